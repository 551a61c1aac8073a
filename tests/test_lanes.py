"""Lanes of the vector env: same-step resets, frozen lanes, and lanes independent of neighbours."""
import numpy as np
import pytest

from envs.lanes import CartPoleLanes, GenericLanes, make_lanes


def _roll(lanes, steps, lane_count, active=None, seed=0):
    rng = np.random.default_rng(seed)
    obs = [lanes.reset()]
    for _ in range(steps):
        out = lanes.step(rng.integers(0, 2, lane_count), np.ones(lane_count, bool) if active is None else active)
        obs.append(out.obs)
    return np.stack(obs)


@pytest.mark.parametrize("factory", [CartPoleLanes, lambda seeds: GenericLanes("CartPole-v1", seeds)])
def test_episode_end_returns_terminal_state_and_a_fresh_start(factory):
    lanes = factory([1, 2])
    lanes.reset()
    for _ in range(200):
        out = lanes.step(np.zeros(2, np.int64), np.ones(2, bool))  # always push left: falls fast
        if out.terminated.any():
            break
    lane = int(np.flatnonzero(out.terminated)[0])
    assert abs(out.final_obs[lane, 2]) > 0.2 or abs(out.final_obs[lane, 0]) > 2.4  # the failure state
    assert np.all(np.abs(out.obs[lane]) <= 0.05)  # the next episode's first state


def test_frozen_lanes_do_not_move():
    lanes = CartPoleLanes([1, 2, 3])
    start = lanes.reset()
    out = lanes.step(np.ones(3, np.int64), np.array([True, False, True]))
    np.testing.assert_array_equal(out.obs[1], start[1])
    assert out.reward.tolist() == [1.0, 0.0, 1.0]


def test_a_lane_does_not_depend_on_its_neighbours():
    alone = CartPoleLanes([42])
    crowd = CartPoleLanes([7, 42, 9])
    rng = np.random.default_rng(0)
    alone.reset(), crowd.reset()
    for _ in range(300):  # long enough for several resets, which draw from each lane's own RNG
        a = rng.integers(0, 2)
        one = alone.step(np.array([a]), np.ones(1, bool))
        three = crowd.step(np.array([rng.integers(0, 2), a, rng.integers(0, 2)]), np.ones(3, bool))
        np.testing.assert_allclose(one.obs[0], three.obs[1], rtol=1e-6)


def test_cartpole_uses_the_vectorized_entry_point():
    assert isinstance(make_lanes("CartPole-v1", [1]), CartPoleLanes)
    assert isinstance(make_lanes("Acrobot-v1", [1]), GenericLanes)

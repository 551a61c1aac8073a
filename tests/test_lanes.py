"""Lanes of the vector env: same-step resets, frozen lanes, and lanes independent of neighbours."""
import numpy as np
import pytest

from frd.envs.acrobot import AcrobotLanes
from frd.envs.lanes import ACROBOT_AT_ONCE, CartPoleLanes, GenericLanes, make_lanes


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


def test_cartpole_and_many_acrobot_lanes_step_at_once_other_envs_one_instance_per_lane():
    assert isinstance(make_lanes("CartPole-v1", [1]), CartPoleLanes)
    assert isinstance(make_lanes("Acrobot-v1", range(ACROBOT_AT_ONCE)), AcrobotLanes)
    assert isinstance(make_lanes("Acrobot-v1", range(ACROBOT_AT_ONCE - 1)), GenericLanes)
    assert isinstance(make_lanes("MountainCar-v0", [1]), GenericLanes)


class _GymStepLanes(CartPoleLanes):
    """The previous CartPoleLanes.step: gymnasium's numpy vector step, frozen lanes restored."""

    def step(self, actions, active):
        from frd.envs.step import LaneStep
        core, frozen = self.core, ~active
        held = core.state[:, frozen].copy(), core.steps[frozen].copy()
        _, reward, terminated, truncated, _ = self.env.step(actions.astype(np.int64))
        final_obs = core.state.T.astype(np.float32)
        done = (terminated | truncated) & active
        core.state[:, frozen], core.steps[frozen] = held
        reward, terminated, truncated = reward * active, terminated & active, truncated & active
        if done.any():
            lanes = np.flatnonzero(done)
            core.state[:, lanes] = self._fresh_states(lanes)
            core.steps[lanes] = 0
        core.prev_done[:] = False
        return LaneStep(core.state.T.astype(np.float32), final_obs, reward.astype(np.float32), terminated, truncated)


def test_numba_cartpole_step_is_bit_identical_to_gymnasiums_vector_step():
    """Including truncation at 500 steps (a balancing policy) and frozen lanes."""
    seeds = list(range(16))
    ours, ref = CartPoleLanes(seeds), _GymStepLanes(seeds)
    np.testing.assert_array_equal(ours.reset(), ref.reset())
    rng = np.random.default_rng(0)
    truncations = 0
    obs = ours.reset(), ref.reset()
    for step in range(3000):
        # half the lanes balance (push against the pole's lean), half act at random
        balance = (obs[0][:, 2] + 0.5 * obs[0][:, 3] > 0).astype(np.int64)
        actions = np.where(np.arange(16) < 8, balance, rng.integers(0, 2, 16))
        active = rng.random(16) < 0.9
        a, b = ours.step(actions, active), ref.step(actions, active)
        for field in ("obs", "final_obs", "reward", "terminated", "truncated"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=f"{field} at step {step}")
        truncations += int(a.truncated.sum())
        obs = a.obs, b.obs
    assert truncations > 0


def test_acrobot_lanes_are_bit_identical_to_one_gymnasium_instance_per_lane():
    """Half the lanes pump energy (torque along the second joint's velocity: episodes end at the
    goal), half act at random (truncated at 500 steps); some lanes are held still each step."""
    seeds = list(range(12))
    ours, ref = AcrobotLanes(seeds), GenericLanes("Acrobot-v1", seeds)
    obs = ours.reset()
    np.testing.assert_array_equal(obs, ref.reset())
    rng = np.random.default_rng(0)
    terminations = truncations = 0
    for step in range(1500):
        pump = np.where(obs[:, 5] > 0, 2, 0)
        actions = np.where(np.arange(12) < 6, pump, rng.integers(0, 3, 12))
        active = rng.random(12) < 0.9
        a, b = ours.step(actions, active), ref.step(actions, active)
        for field in ("obs", "final_obs", "reward", "terminated", "truncated"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=f"{field} at step {step}")
        # the float64 state too, where a last-bit difference shows at once (in observations, after ~10^4 steps)
        np.testing.assert_array_equal(ours.state, [env.unwrapped.state for env in ref.envs], err_msg=f"state at step {step}")
        terminations, truncations = terminations + int(a.terminated.sum()), truncations + int(a.truncated.sum())
        obs = a.obs
    assert terminations > 10 and truncations > 0

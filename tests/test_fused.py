"""The fused update period (``frd.rl.fused``) gives the lockstep runner's tables bit for bit.

Tiny ReLU networks and an easy mission make short episodes, so a few hundred periods see every
kind of episode end: missions completed (ending the run, or only the lane), lanes capped, lanes
at the exchange barrier, runs finished at different times (compaction), experience memories
(PD, FRD, MixFRD), the one-step rlcode recipe with its failure reward, and partial participation.
"""
import numpy as np
import pandas as pd
import pytest

from frd.agents.a2c import A2CPopulation, recipe
from frd.envs.lanes import RESET_BLOCK, CartPoleLanes
from frd.results import MODELS
from frd.rl.config import rl_config
from frd.rl.runner import RLBatch

RUNS = [(method, seed) for seed in range(4) for method in ("independent", "frl", "pd", "frd", "mixfrd")]
SETTINGS = {
    "until first": dict(until="first"),
    "until all": dict(until="all"),
    "rlcode": dict(until="all", recipe="rlcode"),
    "one of two per round": dict(until="all", fraction=0.5),  # partial participation: the other never waits
}


def tables(config, fused: bool) -> dict[str, pd.DataFrame]:
    batch = RLBatch(config, RUNS)
    assert batch.fused  # CartPole, one learner
    batch.fused = fused
    finished = list(batch.run())
    out = {name: pd.concat([t[name] for t in finished]).sort_values(["run_id"], kind="stable").reset_index(drop=True)
           for name in ("episodes", "ledger", "rounds", "runs")}
    out["runs"] = out["runs"].drop(columns=["compute_s", "comm_s"])
    return out


@pytest.mark.parametrize("setting", SETTINGS)
def test_a_fused_batch_gives_the_lockstep_tables_bit_for_bit(setting):
    config = rl_config(("independent", "frl", "pd", "frd", "mixfrd"), agents=2, hidden=8, activation="relu",
                       max_episodes=40, target=35.0, window=3, period=5, **SETTINGS[setting])
    lockstep, fused = tables(config, False), tables(config, True)
    runs = lockstep["runs"]
    assert runs["agents_completed"].gt(0).any() and runs["agents_completed"].lt(2).any()  # completed and capped
    assert runs["rounds"].gt(0).any() and len(lockstep["rounds"])                          # barriers, distillation
    for name, frame in lockstep.items():
        pd.testing.assert_frame_equal(frame, fused[name], check_exact=True, obj=name)


def test_reserving_first_states_ahead_keeps_each_lanes_sequence():
    one_by_one, ahead = CartPoleLanes([3, 4]), CartPoleLanes([3, 4])
    lanes = np.array([0, 1])
    expected = [one_by_one._fresh_states(lanes) for _ in range(150)]
    got = []
    for k in range(150):
        if k % 5 == 0:
            ahead.reserve_resets(8)  # refills with 1–7 states left, carrying them over
            assert (ahead.next_reset <= RESET_BLOCK - 8).all()
        got.append(ahead._fresh_states(lanes))
    np.testing.assert_array_equal(np.stack(got), np.stack(expected))


def test_drawing_uniforms_a_period_at_a_time_keeps_each_lanes_sequence():
    step_by_step, by_period = (A2CPopulation([5, 6, 7], 4, 2, recipe("nstep", hidden=4)) for _ in range(2))
    expected = np.stack([step_by_step.draw_uniforms(1)[0] for _ in range(3000)])
    got = np.concatenate([by_period.draw_uniforms(8) for _ in range(375)])
    np.testing.assert_array_equal(got, expected)


def test_uniforms_handed_back_unused_are_drawn_again_in_order():
    """A fused call draws a row per step of the periods it may take and hands back the rows of those it did not."""
    once, with_returns = (A2CPopulation([5, 6], 4, 2, recipe("nstep", hidden=4)) for _ in range(2))
    expected = once.draw_uniforms(2000)
    got = []
    while sum(len(block) for block in got) < 2000:
        block = with_returns.draw_uniforms(32)
        used = 8 * (1 + len(got) % 4)
        with_returns.undraw_uniforms(32 - used)
        got.append(block[:used])
    np.testing.assert_array_equal(np.concatenate(got)[:2000], expected)
    with pytest.raises(ValueError, match="cannot hand back 5000 uniforms"):
        with_returns.undraw_uniforms(5000)


def test_uniforms_handed_back_lane_by_lane_are_drawn_again_in_each_lanes_order():
    """Runs of a fused call take their own number of periods: each lane hands back its unused rows,
    so lanes stand at different places in their streams, across block refills too."""
    once, with_returns = (A2CPopulation([5, 6, 7], 4, 2, recipe("nstep", hidden=4)) for _ in range(2))
    expected = once.draw_uniforms(6000)
    got: list[list[np.ndarray]] = [[], [], []]
    for call in range(150):
        block = with_returns.draw_uniforms(32)
        used = np.array([8 * (1 + (call + lane * call // 3) % 4) for lane in range(3)])
        with_returns.undraw_uniforms(32 - used)
        for lane in range(3):
            got[lane].append(block[:used[lane], lane])
    for lane in range(3):
        drawn = np.concatenate(got[lane])
        assert len(drawn) > 1024  # past at least one refill
        np.testing.assert_array_equal(drawn, expected[:len(drawn), lane])
    with pytest.raises(ValueError, match="cannot hand back"):
        with_returns.undraw_uniforms(np.array([0, 0, 10**6]))


SB3_SETTINGS = {  # PPO's rollouts are whole periods (n = 8), DQN's collections are not
    "ppo, until first": dict(agent_spec="algo=ppo,sb3.n_steps=64,sb3.batch_size=64,sb3.n_epochs=2;h=8", until="first"),
    "dqn, until all": dict(agent_spec="h=8;algo=dqn,sb3.train_freq=20,sb3.learning_starts=30,sb3.gradient_steps=1,"
                                      "sb3.net_arch=8x8", until="all"),
}


@pytest.mark.parametrize("setting", SB3_SETTINGS)
def test_our_lanes_beside_sb3_agents_step_fused_periods_to_the_lockstep_tables(setting, monkeypatch):
    """Periods that every SB3 agent's collection covers run fused (several per call, each run on its
    own clock, stopping before a period in which one of its SB3 agents starts its next collection),
    such a period in lockstep: the tables and saved agents are the all-lockstep ones."""
    pytest.importorskip("stable_baselines3")
    config = rl_config(("independent", "pd", "frd"), agents=2, hidden=8, max_episodes=12, target=30.0, window=3,
                       period=4, **SB3_SETTINGS[setting])
    runs = [(method, seed) for seed in range(2) for method in config.methods]
    called = {"fused": 0, "most beside SB3": 0,  # calls; the most periods a run took in one while SB3 agents played
              "lockstep beside SB3": 0}
    periods, sb3_step = RLBatch._step_period, RLBatch._step_sb3

    def counted(batch):
        called["fused"] += 1
        playing = any(not batch.capped[lane] and not batch.standing.finished[lane // 2] for lane in batch.sb3)
        before = batch.run_clock.copy()
        periods(batch)
        if playing:
            taken = (batch.run_clock - before).max() // batch.pop.groups[0].config.n_steps
            called["most beside SB3"] = max(called["most beside SB3"], int(taken))

    def sb3_lockstep(batch):
        called["lockstep beside SB3"] += batch.fused
        return sb3_step(batch)

    def tables(fused):
        batch = RLBatch(config, runs)
        assert batch.fused and batch.sb3  # CartPole, one learner of ours
        batch.fused = fused
        finished = list(batch.run())
        out = {name: pd.concat([t[name] for t in finished]).sort_values(["run_id"], kind="stable")
               .reset_index(drop=True) for name in ("episodes", "ledger", "rounds", "runs")}
        out["runs"] = out["runs"].drop(columns=["compute_s", "comm_s"])
        return out, {str(t["runs"]["run_id"].iloc[0]): t[MODELS] for t in finished}

    monkeypatch.setattr(RLBatch, "_step_period", counted)
    monkeypatch.setattr(RLBatch, "_step_sb3", sb3_lockstep)
    (lockstep, lockstep_models), steps_fused = tables(False), called["fused"]
    (fused, fused_models) = tables(True)
    assert steps_fused == 0 and called["fused"] > 0
    assert called["most beside SB3"] > 1
    # a collection that starts at a period's first step is played before the fused call; others in lockstep
    assert (called["lockstep beside SB3"] > 0) == setting.startswith("dqn")
    assert lockstep["runs"]["rounds"].gt(0).any() and lockstep["runs"]["agents_completed"].gt(0).any()
    for name, frame in lockstep.items():
        pd.testing.assert_frame_equal(frame, fused[name], check_exact=True, obj=name)
    assert fused_models == lockstep_models

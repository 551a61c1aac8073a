"""A batch cut off mid-way resumes from its checkpoint to the tables of an uninterrupted batch,
bit for bit; a checkpoint of another experiment, other code or other runs is not taken up."""
import math

import pandas as pd
import pytest

from frd.rl import checkpoint as checkpoint_module
from frd.rl.checkpoint import BatchCheckpoint
from frd.rl.config import rl_config
from frd.rl.experiment import run_experiment
from frd.rl.runner import RLBatch, iter_simulate

CASES = {  # the fused CartPole path, Acrobot's lockstep path, and two learner groups
    "cartpole": dict(methods=("independent", "frl", "pd", "frd", "mixfrd"), env_id="CartPole-v1", hidden=8,
                     activation="relu", max_episodes=40, target=35.0, window=3, period=5, until="all"),
    "acrobot": dict(methods=("independent", "pd", "frd"), env_id="Acrobot-v1", hidden=8, max_episodes=4, period=2),
    "widths": dict(methods=("independent", "pd", "frd"), env_id="CartPole-v1", agent_spec="h=8;h=16",
                   max_episodes=30, target=35.0, window=3, period=5, until="all"),
    "codecs": dict(methods=("frl", "pd", "frd"), env_id="CartPole-v1", hidden=8, activation="relu", max_episodes=40,
                   target=35.0, window=3, period=5, until="all", codec_up="topk:0.2+q4", codec_down="q8",
                   error_feedback=True),  # residuals and references are the batch's state too
    "clock": dict(methods=("frl", "pd", "frd"), env_id="CartPole-v1", hidden=8, activation="relu", max_episodes=40,
                  target=35.0, window=3, period=5, until="all", speed_spread=0.8,
                  round_policy="deadline:9e-5"),  # unequal devices, late uploads: the clocks are the batch's state
}
CUTS = {"cartpole": (7, 8), "acrobot": (100, 150), "widths": (78, 90), "codecs": (7, 8), "clock": (7, 8)}
"""Safe points of the save and of the cut: CartPole and widths runs finish before the save (2
and 3 runs), between it and the cut (5 and 5) and after (8 and 1); Acrobot's untrained episodes
all last ~500 steps, so its runs all finish after the cut. (A fused CartPole safe point comes
after each run took up to 16 update periods, ``RLBatch._periods_at_once``: 12 in all.)"""


class Interrupted(Exception):
    pass


class CutOff(BatchCheckpoint):
    """Saves at its ``save_at``-th safe point only, then is killed at its ``stop_at``-th."""

    def __init__(self, path, config, save_at: int, stop_at: int) -> None:
        super().__init__(path, config, every=math.inf)
        self.calls, self.save_at, self.stop_at = 0, save_at, stop_at

    def __call__(self, batch) -> None:
        self.calls += 1
        if self.calls == self.save_at:
            self.last = -math.inf
            super().__call__(batch)
        if self.calls == self.stop_at:
            raise Interrupted


def frames(tables: list[dict[str, pd.DataFrame]]) -> dict[str, pd.DataFrame]:
    out = {name: pd.concat([t[name] for t in tables]).sort_values("run_id", kind="stable").reset_index(drop=True)
           for name in ("episodes", "ledger", "rounds", "runs")}
    out["runs"] = out["runs"].drop(columns=["compute_s", "comm_s"])
    return out


@pytest.mark.parametrize("case", CASES)
def test_a_batch_cut_off_resumes_from_its_checkpoint_to_the_uninterrupted_tables(case, tmp_path):
    values = dict(CASES[case])
    methods = values.pop("methods")
    config = rl_config(methods, agents=2, **values)
    runs = [(m, s) for s in range(3) for m in methods]
    expected = frames(list(iter_simulate(config, runs)))

    path = tmp_path / "checkpoint.pkl"
    before = []  # finished and saved before the cut
    with pytest.raises(Interrupted):
        for tables in iter_simulate(config, runs, checkpoint=CutOff(path, config, *CUTS[case])):
            before.append(tables)
    assert path.exists() and len(before) < len(runs)
    done = {t["runs"]["run_id"].iloc[0] for t in before}
    todo = [(m, s) for m, s in runs if f"{m}-seed{s}" not in done]
    after = list(iter_simulate(config, todo, checkpoint=BatchCheckpoint(path, config)))
    assert not path.exists()  # the batch finished: its checkpoint is gone

    rerun = {t["runs"]["run_id"].iloc[0]: t for t in after}
    for tables in before:  # finished after the save, before the cut: run again to the same tables
        rid = tables["runs"]["run_id"].iloc[0]
        if rid in rerun:
            pd.testing.assert_frame_equal(tables["episodes"], rerun.pop(rid)["episodes"], check_exact=True)
    resumed = frames(before + list(rerun.values()))
    for name, frame in expected.items():
        pd.testing.assert_frame_equal(resumed[name], frame, check_exact=True, obj=name)


def test_a_checkpoint_is_taken_up_only_by_its_experiment_its_code_and_its_runs(tmp_path, monkeypatch):
    config = rl_config(("independent", "pd"), agents=2, hidden=8, max_episodes=3)
    runs = [("independent", 0), ("pd", 0)]
    path = tmp_path / "checkpoint.pkl"
    with pytest.raises(Interrupted):
        for _ in iter_simulate(config, runs, checkpoint=CutOff(path, config, save_at=1, stop_at=1)):
            pass
    assert BatchCheckpoint(path, config).resume(runs[:1]) is not None
    assert BatchCheckpoint(path, config).resume(runs + [("pd", 1)]) is None            # a run it does not hold
    assert BatchCheckpoint(path, rl_config(("independent", "pd"), agents=2, hidden=16, max_episodes=3)).resume(
        runs) is None                                                                   # another experiment
    monkeypatch.setattr(checkpoint_module, "code_hash", lambda: "other code")
    assert BatchCheckpoint(path, config).resume(runs) is None                           # other code


def test_an_experiment_stopped_mid_batch_continues_from_its_checkpoint(tmp_path, monkeypatch):
    config = rl_config(("independent", "pd"), agents=2, seeds=3, hidden=8, activation="relu", max_episodes=30,
                       target=35.0, window=3, period=5, until="all")
    run_experiment(config, tmp_path / "whole", progress=False)
    monkeypatch.setattr(checkpoint_module, "EVERY", 0.0)  # a checkpoint at every safe point
    step, steps = RLBatch.step, []

    def killed_at_its_6th_step(self):
        steps.append(1)
        if len(steps) == 6:  # of 10: a fused step takes each run through up to 16 update periods
            raise KeyboardInterrupt
        step(self)

    monkeypatch.setattr(RLBatch, "step", killed_at_its_6th_step)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(config, tmp_path / "cut", progress=False)
    assert (tmp_path / "cut" / "checkpoint.pkl").exists()
    resume, resumed = BatchCheckpoint.resume, []
    monkeypatch.setattr(BatchCheckpoint, "resume", lambda self, runs: resumed.append(resume(self, runs)) or resumed[-1])
    run_experiment(config, tmp_path / "cut", progress=False)
    assert isinstance(resumed[0], RLBatch) and not (tmp_path / "cut" / "checkpoint.pkl").exists()
    for table in ("episodes", "ledger", "rounds"):
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "cut" / f"{table}.csv"),
                                      pd.read_csv(tmp_path / "whole" / f"{table}.csv"), check_exact=True)

"""Partial participation in RL (issue 44 §1): K of a run's agents drawn per round from a stream of
their own, the barrier over those alone, the ledger charging only their transfers."""
import numpy as np
import pandas as pd
import pytest
from test_checkpoint import CutOff, Interrupted, frames

from frd.cli import main
from frd.errors import FrdError
from frd.rl.checkpoint import BatchCheckpoint
from frd.rl.config import rl_config
from frd.rl.remote import check_remote
from frd.rl.runner import RLBatch, iter_simulate
from frd.rl.summary import rl_summary
from frd.seeding import Stream, derive_seed

TINY = dict(hidden=8, activation="relu", period=5, window=3)
ACTOR_BITS = 130 * 32  # h = 8, relu recipe: 4·8+8 + 8·8+8 + 8·2+2 = 130 actor weights of 32 bits


def _tables(config, runs) -> dict[str, dict[str, pd.DataFrame]]:
    return {t["runs"]["run_id"].iloc[0]: t for t in iter_simulate(config, runs)}


def _participants(ledger: pd.DataFrame, direction: str) -> list[list[int]]:
    rows = ledger[ledger["direction"] == direction]
    return [sorted(g["participant"]) for _, g in rows.groupby("round", sort=True)]


def _draws(seed: int, agents: int, k: int, rounds: int) -> list[list[int]]:
    """The participants of a run's first rounds while every agent is live, drawn by hand."""
    rng = np.random.default_rng(derive_seed(seed, Stream.RL_PARTICIPANTS))
    return [sorted(rng.choice(agents, k, replace=False).tolist()) for _ in range(rounds)]


@pytest.mark.parametrize("agents, fraction, k", [(10, 0.3, 3), (8, 0.05, 1), (8, 0.5, 4), (8, 1.0, 8)])
def test_a_fraction_gives_floor_c_times_agents_but_at_least_one(agents, fraction, k):
    assert rl_config("frd", agents=agents, fraction=fraction).per_round() == k
    assert rl_config("frd", agents=agents).per_round() == agents


@pytest.mark.parametrize("values, match", [
    (dict(agents=4, agents_per_round=0), r"--agents-per-round must lie in 1..4 \(--agents\), got 0"),
    (dict(agents=4, agents_per_round=5), r"--agents-per-round must lie in 1..4 \(--agents\), got 5"),
    (dict(fraction=0.0), r"--fraction must lie in \(0, 1\], got 0.0"),
    (dict(fraction=1.5), r"--fraction must lie in \(0, 1\], got 1.5"),
    (dict(agents=4, agents_per_round=2, fraction=0.5), "give --agents-per-round or --fraction, not both"),
])
def test_bad_participation_is_refused_before_anything_runs(values, match):
    with pytest.raises(FrdError, match=match):
        rl_config("frd", **values).validate()


def test_a_remote_run_refuses_partial_participation():
    with pytest.raises(FrdError, match="--agents-per-round and --fraction run in process only"):
        check_remote(rl_config("frd", agents=4, fraction=0.5))


def test_the_ledger_charges_only_the_drawn_participants_by_hand():
    config = rl_config("frl", agents=8, agents_per_round=4, max_episodes=40, target=float("inf"), until="all", **TINY)
    tables = _tables(config, [("frl", 0)])["frl-seed0"]
    ledger, runs = tables["ledger"], tables["runs"].iloc[0]
    ups, downs = _participants(ledger, "up"), _participants(ledger, "down")
    assert ups == downs and len(ups) == runs["rounds"] >= 4
    assert ups[:3] == _draws(0, 8, 4, 3)       # every agent live then: the stream's draws, in order
    assert all(len(p) <= 4 for p in ups)       # later rounds: the drawn that are not yet capped
    uploads = sum(len(p) for p in ups)
    assert runs["bits_up"] == runs["bits_down"] == uploads * ACTOR_BITS < runs["rounds"] * 8 * ACTOR_BITS
    assert runs["agents_per_round"] == 4
    summary = rl_summary(tables["runs"]).iloc[0]
    assert summary["bits_up_per_agent_round"] == uploads * ACTOR_BITS / (runs["rounds"] * 4)


def test_the_barrier_waits_for_the_participants_alone(monkeypatch):
    seen = []  # per round: participants, and every agent's (waiting, active, episodes)
    real = RLBatch.exchange

    def spy(self, i, rows):
        lanes = self.runs[i].lanes
        seen.append((sorted(rows), self.waiting[lanes].copy(), self.active[lanes].copy(), self.episode[lanes].copy()))
        return real(self, i, rows)
    monkeypatch.setattr(RLBatch, "exchange", spy)
    config = rl_config("pd", agents=6, agents_per_round=2, max_episodes=60, target=float("inf"), **TINY)
    _tables(config, [("pd", 1)])
    ran_ahead = False
    for participants, waiting, active, episodes in seen:
        others = [a for a in range(6) if a not in participants]
        assert waiting[participants].all() and not waiting[others].any()
        assert active[[a for a in others if episodes[a] < 60]].all()  # the others step on meanwhile
        ran_ahead |= bool((episodes[others] > episodes[participants].max()).any())
    assert len(seen) >= 5 and ran_ahead  # some agent went past a barrier it took no part in


def test_a_run_draws_the_same_participants_alone_and_among_batch_mates():
    config = rl_config(("pd", "frd", "frl", "independent"), agents=4, agents_per_round=2, max_episodes=30,
                       target=float("inf"), until="all", **TINY)
    alone = _tables(config, [("frd", 3)])["frd-seed3"]
    batched = _tables(config, [("pd", 0), ("independent", 2), ("frl", 3), ("frd", 3), ("pd", 5)])["frd-seed3"]
    for name in ("episodes", "ledger", "rounds"):
        pd.testing.assert_frame_equal(alone[name], batched[name], check_exact=True, obj=name)
    assert _participants(alone["ledger"], "up")[:2] == _draws(3, 4, 2, 2)


def test_every_agent_per_round_is_full_participation():
    runs = [("pd", 0), ("frd", 0)]
    full = _tables(rl_config(("pd", "frd"), agents=4, max_episodes=20, target=float("inf"), **TINY), runs)
    every = _tables(rl_config(("pd", "frd"), agents=4, agents_per_round=4, max_episodes=20, target=float("inf"),
                              **TINY), runs)
    for rid in full:
        for name in ("episodes", "ledger", "rounds"):
            pd.testing.assert_frame_equal(full[rid][name], every[rid][name], check_exact=True)
        assert "agents_per_round" not in every[rid]["runs"]


def test_8_agents_4_per_round_complete_the_mission_with_pd_and_frd():
    config = rl_config(("pd", "frd"), agents=8, agents_per_round=4, hidden=16, max_episodes=300, target=100.0,
                       window=5, period=5)
    tables = _tables(config, [("pd", 0), ("frd", 0)])
    for method in ("pd", "frd"):
        runs, ledger = tables[f"{method}-seed0"]["runs"].iloc[0], tables[f"{method}-seed0"]["ledger"]
        assert runs["completed"] and runs["mission_episodes"] < 300 and runs["rounds"] >= 20
        ups = _participants(ledger, "up")
        assert len(ups) == runs["rounds"] and all(len(p) == 4 for p in ups)  # no agent retires before the mission
        assert ups == _draws(0, 8, 4, len(ups))
        assert (ledger.groupby("round")["participant"].nunique() == 4).all()


def test_a_batch_with_partial_participation_resumes_from_its_checkpoint_exactly(tmp_path):
    config = rl_config(("pd", "frd", "frl"), agents=4, agents_per_round=2, max_episodes=40, target=35.0,
                       until="all", **TINY)
    runs = [(m, s) for s in range(2) for m in ("pd", "frd", "frl")]
    expected = frames(list(iter_simulate(config, runs)))
    path = tmp_path / "checkpoint.pkl"
    before = []
    with pytest.raises(Interrupted):
        for tables in iter_simulate(config, runs, checkpoint=CutOff(path, config, save_at=10, stop_at=12)):
            before.append(tables)
    assert path.exists() and len(before) == 3  # seed 1's runs finish before the save, seed 0's after the cut
    done = {t["runs"]["run_id"].iloc[0] for t in before}
    todo = [(m, s) for m, s in runs if f"{m}-seed{s}" not in done]
    saved = BatchCheckpoint(path, config).resume(todo)
    assert saved is not None and sum(run.rounds for run in saved.runs) > 0  # taken up mid-way, rounds held
    after = list(iter_simulate(config, todo, checkpoint=BatchCheckpoint(path, config)))
    resumed = frames(before + after)
    for name, frame in expected.items():
        pd.testing.assert_frame_equal(resumed[name], frame, check_exact=True, obj=name)


def test_a_flower_run_with_partial_participation_is_one_line_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["flower", "sim", "--method", "frd", "--agents", "4", "--agents-per-round", "2", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--agents-per-round and --fraction run in process only" in err
    assert not out.exists()

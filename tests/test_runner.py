"""The RL runner: barrier, cap, lane independence, reproducibility and resume (tiny budgets)."""
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import frd.results as results
import frd.rl.experiment as experiment
import frd.rl.runner as runner
from frd.results import MODELS
from frd.rl.config import RLConfig, rl_config
from frd.rl.runner import RLBatch, simulate

TINY = dict(agents=2, seeds=1, max_episodes=12, period=4, hidden=16)


def _collect(config, method, seeds):
    tables = []
    simulate(config, [(method, seed) for seed in seeds], tables.append)
    return {name: pd.concat([t[name] for t in tables], ignore_index=True) for name in tables[0] if name != MODELS}


def test_barrier_no_round_before_every_agent_finished_its_period(monkeypatch):
    config = RLConfig(methods=("frl",), agents=3, max_episodes=13, period=4, hidden=16)
    batch = RLBatch(config, [("frl", 7)])
    seen = []
    real = runner.run_round

    def spy(exchange, agents, **kw):
        seen.append(batch.episode[batch.runs[0].lanes].tolist())
        return real(exchange, agents, **kw)

    monkeypatch.setattr(runner, "run_round", spy)
    list(batch.run())
    assert seen == [[4, 4, 4], [8, 8, 8], [12, 12, 12]]  # capped at 13 episodes: no 4th round


def test_cap_reports_not_completed_with_all_episodes():
    tables = _collect(RLConfig(target=1e9, **TINY), "pd", [0])
    run = tables["runs"].iloc[0]
    assert not run["completed"] and run["mission_episodes"] == 12 and run["rounds"] == 2
    assert tables["episodes"].groupby("agent")["episode"].max().tolist() == [12, 12]
    assert run["mission_env_steps"] == tables["episodes"].groupby("agent")["env_steps"].max().sum()
    ledger = tables["ledger"]
    assert run["bits_up"] == ledger.loc[ledger.direction == "up", "bits"].sum() > 0


def test_a_runs_results_do_not_depend_on_the_other_runs_in_the_batch():
    config = RLConfig(target=60, **{**TINY, "max_episodes": 30})
    for method in ("independent", "frd"):
        alone = _collect(config, method, [3])["episodes"]
        batched = _collect(config, method, [1, 3, 4])["episodes"]
        pd.testing.assert_frame_equal(alone, batched[batched.seed == 3].reset_index(drop=True))


def test_runs_of_different_methods_share_a_batch_without_affecting_each_other():
    """PD records memories and distills, FRD distills, FRL loads weights: none of it leaks."""
    config = RLConfig(target=60, **{**TINY, "max_episodes": 30})
    mixed = []
    simulate(config, [("pd", 3), ("frl", 3), ("independent", 1), ("frd", 3)], mixed.append)
    by_run = {t["runs"].run_id.iloc[0]: t for t in mixed}
    for method in ("pd", "frl", "frd"):
        alone = _collect(config, method, [3])
        for table in ("episodes", "ledger", "runs"):
            columns = [c for c in alone[table].columns if c not in ("compute_s", "latency_s")]
            pd.testing.assert_frame_equal(alone[table][columns], by_run[f"{method}-seed3"][table][columns])


def test_same_seed_gives_identical_episodes_csv(tmp_path):
    config = RLConfig(methods=("frd", "independent"), **TINY)
    experiment.run_experiment(config, tmp_path / "a", progress=False)
    experiment.run_experiment(config, tmp_path / "b", progress=False)
    assert (tmp_path / "a" / "episodes.csv").read_bytes() == (tmp_path / "b" / "episodes.csv").read_bytes()
    assert (tmp_path / "a" / "ledger.csv").read_bytes() == (tmp_path / "b" / "ledger.csv").read_bytes()
    assert (tmp_path / "a" / "mission.png").exists() and (tmp_path / "a" / "payload.png").exists()
    provenance = pd.read_csv(tmp_path / "a" / "provenance.csv", dtype=str)
    assert len(provenance) == 2 and provenance["code"].str.fullmatch("[0-9a-f]{16}").all()
    assert provenance["code"].nunique() == 1 and (provenance["cpu"] != "").all() and provenance["numba"].notna().all()
    assert provenance["cpu_features"].str.fullmatch("[0-9a-f]{12}").all()


def test_source_hash_changes_with_any_source_and_only_with_sources(tmp_path):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "sub" / "b.py").write_text("y = 2\n")

    def digest():
        results.source_hash.cache_clear()
        return results.source_hash(("pkg",), tmp_path)
    first = digest()
    (tmp_path / "pkg" / "notes.txt").write_text("not a source")
    assert digest() == first
    (tmp_path / "pkg" / "sub" / "b.py").write_text("y = 3\n")
    assert digest() != first
    (tmp_path / "pkg" / "sub" / "b.py").write_text("y = 2\n")
    assert digest() == first
    (tmp_path / "pkg" / "sub" / "b.py").rename(tmp_path / "pkg" / "c.py")  # same bytes, another path
    assert digest() != first


def test_interrupted_experiment_resumes_and_keeps_finished_runs(tmp_path, monkeypatch):
    config = RLConfig(methods=("independent", "pd"), **{**TINY, "seeds": 3})
    experiment.run_experiment(config, tmp_path / "full", progress=False)

    real = experiment.simulate

    def interrupted(config, runs, on_finished, on_status, checkpoint):  # Ctrl-C before any checkpoint
        saved = []

        def save_then_stop(tables):  # Ctrl-C right after the fourth run is saved
            on_finished(tables)
            saved.append(tables)
            if len(saved) == 4:
                raise KeyboardInterrupt
        return real(config, runs, save_then_stop, on_status, checkpoint)

    monkeypatch.setattr(experiment, "simulate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        experiment.run_experiment(config, tmp_path / "resumed", progress=False)
    saved = pd.read_csv(tmp_path / "resumed" / "runs.csv")
    assert len(saved) == 4
    missing = sorted({(m, s) for m in ("independent", "pd") for s in range(3)} - set(zip(saved.method, saved.seed)))

    ran = []
    monkeypatch.setattr(experiment, "simulate", lambda c, runs, *a, **k: ran.append(sorted(runs)) or real(c, runs, *a, **k))
    experiment.run_experiment(config, tmp_path / "resumed", progress=False)
    assert ran == [missing] and len(missing) == 2
    full, resumed = (pd.read_csv(tmp_path / d / "episodes.csv").sort_values(["run_id", "agent", "episode"])
                     .reset_index(drop=True) for d in ("full", "resumed"))
    pd.testing.assert_frame_equal(full, resumed)


def test_parts_of_an_unfinished_run_are_ignored(tmp_path):
    config = RLConfig(methods=("independent",), **TINY)
    experiment.run_experiment(config, tmp_path, progress=False)
    episodes = pd.read_csv(tmp_path / "episodes.csv")
    episodes.iloc[:3].to_csv(tmp_path / "parts" / "episodes" / "independent-seed99.csv", index=False)
    experiment.run_experiment(config, tmp_path, progress=False)
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "episodes.csv"), episodes)


def test_generic_env_path_runs_acrobot_lanes():
    """Acrobot (finite observation bounds, 3 actions) runs on the one-instance-per-lane path."""
    config = rl_config("frd", env_id="Acrobot-v1", agents=2, max_episodes=2, period=1, hidden=8, grid=3, target=1e9)
    tables = _collect(config, "frd", [0])
    run = tables["runs"].iloc[0]
    assert not run["completed"] and run["rounds"] == 1 and run["mission_episodes"] == 2
    up = tables["ledger"].query("direction == 'up'")
    assert (up["bits"] == up["entries"] * (6 + 3) * 32).all()  # d = 6, |A| = 3, paper codec


def test_agents_of_a_run_share_initial_weights_runs_do_not():
    batch = RLBatch(RLConfig(agents=2, hidden=8), [("frl", 0), ("frl", 1)])
    actor = batch.pop.groups[0].actor.data
    assert np.array_equal(actor[0], actor[1]) and not np.array_equal(actor[0], actor[2])


def test_saved_episodes_reproduce_the_mission_time_in_runs_csv():
    from mission_reference import first_completion

    tables = _collect(RLConfig(target=30, **{**TINY, "max_episodes": 40}), "frd", [0, 1, 2])
    assert tables["runs"]["completed"].any()
    for rid, run in tables["runs"].set_index("run_id").iterrows():
        episodes = tables["episodes"][tables["episodes"]["run_id"] == rid].sort_values("episode")
        scores = [g["score"].tolist() for _, g in episodes.groupby("agent")]
        expected = first_completion(scores, target=30)
        assert run["completed"] == (expected is not None)
        if expected is not None:
            assert run["mission_episodes"] == expected


def test_until_all_runs_every_agent_to_its_own_completion():
    from mission_reference import mission_episode

    config = RLConfig(target=25, until="all", **{**TINY, "agents": 3, "max_episodes": 60})
    tables = _collect(config, "independent", [0, 1])
    for _, run in tables["runs"].iterrows():
        episodes = tables["episodes"][tables["episodes"]["run_id"] == run["run_id"]]
        own = [mission_episode(g.sort_values("episode")["score"], target=25) or 60 for _, g in episodes.groupby("agent")]
        assert run["all_agents_episodes"] == max(own) and run["median_agent_episodes"] == np.median(own)
        assert run["mission_episodes"] == min(own) and run["agents_completed"] == sum(o < 60 for o in own)
        assert run["all_agents_episodes"] >= run["mission_episodes"]
    first = _collect(RLConfig(target=25, **{**TINY, "agents": 3, "max_episodes": 60}), "independent", [0])["runs"]
    assert np.isnan(first["all_agents_episodes"].iloc[0]), "unknown when the run stops at the mission"


@pytest.mark.parametrize("env, target", [("Acrobot-v1", -100.0), ("LunarLander-v3", 200.0), ("MountainCar-v0", -110.0)])
def test_other_envs_run_with_their_documented_mission(env, target, tmp_path):
    import json

    from frd.cli import main

    out = tmp_path / env
    assert main(["compare", "--methods", "frd,pd", "--env", env, "--agents", "2", "--seeds", "1", "--max-episodes", "2",
                 "--period", "1", "--hidden", "8", "--grid", "3", "--no-progress", "--out", str(out)]) == 0
    assert json.loads((out / "config.json").read_text())["config"]["target"] == target
    assert len(pd.read_csv(out / "episodes.csv")) == 2 * 2 * 2


@pytest.mark.processes
def test_a_batch_keeps_blas_on_one_thread():
    """The update's matrix products (numba's np.dot → scipy's OpenBLAS, loaded at the first
    product, after the batch is built) must not split over threads. A fresh process, so that
    scipy's BLAS is not loaded before the batch; OpenBLAS asked for 2 threads."""
    code = (
        "import threadpoolctl\n"
        "from frd.rl.config import RLConfig\n"
        "from frd.rl.runner import RLBatch\n"
        "b = RLBatch(RLConfig(agents=1, seeds=1, max_episodes=2), [('independent', 0)])\n"
        "b.reset()\n"
        "for _ in range(20):\n"
        "    b.step()\n"
        "blas = [lib for lib in threadpoolctl.threadpool_info() if lib['user_api'] == 'blas']\n"
        "print(any('/scipy' in lib['filepath'] for lib in blas), max(lib['num_threads'] for lib in blas))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "OPENBLAS_NUM_THREADS": "2"}).stdout.split()
    assert out == ["True", "1"]

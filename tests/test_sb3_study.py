"""The SB3 study's per-learner table (``benchmarks.sb3_study``): several agents of one algorithm
in a run are pooled into that run's mean, the run is the unit of IQM and P(improvement)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.sb3_study import Study, agent_outcomes, edge_summary, markdown, round_edges, summary

FILE = 'domain = "rl"\nseeds = {seeds}\n[sweep]\nenv = {{ cartpole = {{ env = "CartPole-v1" }} }}\n' \
       'method = ["independent", "pd"]\n'


def _agents() -> pd.DataFrame:
    """Two PPO agents and one DQN per run, 2 seeds, alone and under PD."""
    rows = []
    ppo = {("independent", 0): [100, 200], ("independent", 1): [300, 500], ("pd", 0): [120, 140], ("pd", 1): [200, 300]}
    for (method, seed), episodes in ppo.items():
        for agent, n in enumerate([*episodes, 1000 if method == "independent" or seed == 0 else 900]):
            rows.append(dict(env="cartpole", method=method, run_id=f"{method}-seed{seed}", seed=seed, agent=agent,
                             algorithm="ppo" if agent < 2 else "dqn", episodes=n, env_steps=10 * n,
                             completed=n < 1000 and not (method == "pd" and n == 300), wire_bits_per_agent=8e6))
    return pd.DataFrame(rows)


@pytest.fixture
def study(tmp_path):
    def make(seeds: int) -> Study:
        path = tmp_path / "sb3_x.toml"
        path.write_text(FILE.format(seeds=seeds))
        return Study(path)
    return make


def test_a_learners_agents_in_a_run_are_its_mean_and_p_compares_runs(study):
    table = summary(study(2), _agents()).set_index(["method", "learner"])
    ppo = table.loc[("pd", "ppo")]
    assert (ppo["runs"], ppo["agents_per_run"]) == (2, 2)
    assert ppo["episodes_iqm"] == pytest.approx((130 + 250) / 2)  # run means 130 and 250; 2 runs: nothing cut
    assert ppo["completed_frac"] == pytest.approx(3 / 4)
    # runs 130, 250 against alone 150, 400: 3 of 4 pairs fewer (agent by agent it would be 10/16)
    assert ppo["p_better_than_alone"] == pytest.approx(0.75)
    assert ppo["wire_mbit_per_agent"] == pytest.approx(8.0)
    dqn = table.loc[("pd", "dqn")]  # 1000, 900 against 1000, 1000: ties count a half
    assert dqn["agents_per_run"] == 1 and dqn["p_better_than_alone"] == pytest.approx(0.75)
    assert np.isnan(table.loc[("independent", "ppo"), "p_better_than_alone"])


def test_a_cell_short_of_its_seeds_is_left_out_and_named_unless_partial(study, capsys):
    assert summary(study(3), _agents()).empty
    assert "('cartpole', 'pd'): 2 of 3 runs so far, left out" in capsys.readouterr().out
    assert len(summary(study(3), _agents(), partial=True)) == 4


def test_a_cell_of_few_runs_gets_p_without_an_interval_and_no_verdict(study):
    """2 runs a side: the bootstrap's interval of P 0.75 would look certain; the table says so instead."""
    lines = markdown(study(2), summary(study(2), _agents())).splitlines()
    ppo = next(line for line in lines if line.startswith("| cartpole | pd | PPO (SB3) ×2 |"))
    assert "| 0.75 | too few runs |" in ppo and "[" not in ppo.split("|")[7]


def test_an_agents_late_score_is_its_last_window_and_completed_needs_a_full_one():
    """Window 3, target 10: agent 0 ends 8, 11, 14 (mean 11: completed); agent 1 ends 20, 20 with
    too few episodes for a window (mean 20, not completed); agent 2 ends 9, 10, 10 (9.67: capped)."""
    scores = {0: [0, 8, 11, 14], 1: [20, 20], 2: [50, 9, 10, 10]}
    episodes = pd.DataFrame([dict(run_id="r", agent=a, episode=i, env_steps=10 * (i + 1), score=s, target=10.0, window=3)
                             for a, agent_scores in scores.items() for i, s in enumerate(agent_scores)])
    out = agent_outcomes(episodes, ["run_id", "agent"]).set_index("agent")
    assert out["late_score"].tolist() == pytest.approx([11.0, 20.0, 29 / 3])
    assert out["completed"].tolist() == [True, False, False]
    assert out["episodes"].tolist() == [4, 2, 4] and out["env_steps"].tolist() == [40, 20, 40]
    assert list(out.columns) == ["run_id", "episodes", "env_steps", "late_score", "completed"]


def test_a_rounds_edges_are_the_episodes_on_each_side_of_its_barrier_and_need_both_full():
    """Period 2, edge 2: agent 1's episodes 1-6 (10…60) give barriers 1 (15 | 35) and 2 (35 | 55),
    not 3 (no episode after it); agent 0's five episodes give barrier 1 alone (its barrier 2 has
    one episode after it). Edge 1: the episodes either side of each barrier."""
    scores = {0: [1, 2, 3, 4, 5], 1: [10, 20, 30, 40, 50, 60]}
    episodes = pd.DataFrame([dict(run_id="r", agent=a, episode=i + 1, score=s, period=2)
                             for a, agent_scores in scores.items() for i, s in enumerate(agent_scores)])
    two = round_edges(episodes, ["run_id", "agent"], edge=2)
    assert two[["agent", "barrier", "before", "after"]].values.tolist() == [[0, 1, 1.5, 3.5], [1, 1, 15, 35], [1, 2, 35, 55]]
    one = round_edges(episodes, ["run_id", "agent"], edge=1)
    assert one[["agent", "barrier", "before", "after"]].values.tolist() == [
        [0, 1, 2, 3], [0, 2, 4, 5], [1, 1, 20, 30], [1, 2, 40, 50]]


def test_the_edge_summary_averages_each_run_first_then_over_runs():
    """Run a: barriers (10 → 12), (15 → 15), (20 → 26): across 2, 0, 6 (mean 8/3), within 15 − 12
    and 20 − 15 (mean 4). Run b: (0 → −4), (0 → 4): across 0, within 0 − (−4) = 4. Over the two
    runs: across 4/3 (over the five barriers it would be 1.6), within 4; each inside its bootstrap
    interval, which lies between the two runs' values."""
    edges = pd.DataFrame([dict(env="e", run_id=r, agent=0, algorithm="ppo", barrier=b, before=x, after=y)
                          for r, pairs in (("a", [(10, 12), (15, 15), (20, 26)]), ("b", [(0, -4), (0, 4)]))
                          for b, (x, y) in enumerate(pairs, start=1)])
    row = edge_summary(edges, ["env"]).iloc[0]
    assert (row["runs"], row["within"]) == (2, 4.0) and row["across"] == pytest.approx(4 / 3)
    assert 0 <= row["across_lo"] <= 4 / 3 <= row["across_hi"] <= 8 / 3 and row["within_lo"] == row["within_hi"] == 4

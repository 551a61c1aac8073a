"""What keeps a run's memory linear in its agents (issue 44 §4): PD's diagnostic cross-entropy is
taken in chunks of rows, bit for bit the one forward's; and the cost curves' classification point."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import frd.agents.a2c as a2c
from frd.agents.a2c import A2CPopulation, cross_entropy_chunk, recipe

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_chunks_are_multiples_of_16_rows_within_the_budget():
    assert cross_entropy_chunk(701, 8) == (1 << 22) // (701 * 8) // 16 * 16 == 736
    assert cross_entropy_chunk(14000, 64) == 16 and cross_entropy_chunk(0, 64) == 1 << 22


@pytest.mark.parametrize("hidden, activation", [(64, "tanh"), (8, "relu"), (5, "tanh")])
def test_cross_entropy_in_chunks_is_the_one_forwards_bit_for_bit(hidden, activation, monkeypatch):
    rng = np.random.default_rng(0)
    pop = A2CPopulation(list(range(70)), 4, 2, recipe("nstep", hidden=hidden, activation=activation))
    pop.actor.data += torch.as_tensor(rng.normal(0, 0.3, pop.actor.data.shape), dtype=torch.float32)
    states = rng.normal(size=(1001, 4)).astype(np.float32)
    probs = rng.dirichlet([1, 1], 1001).astype(np.float32)
    rows = rng.permutation(70)[:53].tolist()
    monkeypatch.setattr(a2c, "CROSS_ENTROPY_ELEMENTS", 1 << 40)
    whole = pop.cross_entropy(rows, states, probs)
    for chunk in (16, 32):
        monkeypatch.setattr(a2c, "CROSS_ENTROPY_ELEMENTS", 1001 * hidden * chunk)
        assert cross_entropy_chunk(1001, hidden) == chunk
        np.testing.assert_array_equal(pop.cross_entropy(rows, states, probs), whole)


@pytest.mark.processes
def test_a_classification_cost_point_runs_in_a_child_and_lands_in_the_tidy_csv(tmp_path):
    """One point of ``python -m benchmarks.scaling cls`` (4 digits devices, 2 per round, 2 rounds of
    1 iteration): the row's counts are the run's, its clocks and memory consistent."""
    csv = tmp_path / "scaling_cls.csv"
    subprocess.run([sys.executable, "-m", "benchmarks.scaling", "cls", "--axes", "devices", "--methods", "fl",
                    "--devices", "4", "--fixed-participants", "2", "--dataset", "digits", "--rounds", "2",
                    "--iterations", "1", "--csv", str(csv), "--variant", "test"], check=True, cwd=REPO_ROOT,
                   capture_output=True)
    row = pd.read_csv(csv).iloc[0]
    assert (row["variant"], row["repeat"], row["method"], row["dataset"], row["partition"]) == (
        "test", 1, "fl", "digits", "shards")
    assert (row["devices"], row["participants"], row["samples"], row["rounds"], row["parameters"]) == (4, 2, 32, 2, 4810)
    assert row["bits_up"] == 2 * 2 * 4810 * 32  # rounds × participants × the MLP's float32 weights
    assert 0 < row["first_round_cpu_s"] and 0 < row["cpu_s_per_round"]
    assert row["first_round_cpu_s"] + row["cpu_s_per_round"] <= row["cpu_s"]
    assert 0 < row["train_wall_s_per_round"] + row["exchange_wall_s_per_round"] < row["wall_s_per_round"]
    assert 300 < row["rss_before_mib"] <= row["peak_rss_mib"] + 1  # torch is loaded; the peak is the run's

"""The sharing study as an experiment file (benchmarks/experiments/sharing.toml): its old record
(benchmarks/results/sharing_runs.csv) converts into the experiment's record, from which ``frd
report`` and the study's thin script give the committed table, number for number. On a part of
the record: two populations of one cell, three variants (FRL skipped where widths differ)."""
from pathlib import Path

import pandas as pd
import pytest

from benchmarks import records, sharing_study
from frd.cli import main
from frd.report import report
from tests.blank_figures import blank_rl_figures

RESULTS = Path(__file__).parent.parent / "benchmarks" / "results"
PART = '''domain = "rl"
until = "all"
max-episodes = 1000
seeds = 20

[sweep]
env = { cartpole = { env = "CartPole-v1" } }
agents = [2]
population = { homogeneous = {}, widths = { agent-spec = "h=32;h=64;h=128" } }
skip = [{ population = "widths", variant = "frl" }]

[sweep.variant]
independent = { method = "independent" }
frl = { method = "frl" }
"pd steps" = { method = "pd", distill-steps = 20 }
'''
CELL = ["env", "agents", "population", "variant"]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """The part of the committed record, converted (cells' own figures blank), and frd report's summary."""
    root = tmp_path_factory.mktemp("sharing")
    (root / "part.toml").write_text(PART)
    with pytest.MonkeyPatch.context() as patch:
        blank_rl_figures(patch)
        added = records.convert(RESULTS / "sharing_runs.csv", root / "part.toml", root / "exp")
        summary = report([root / "exp"], root / "exp")
    return root, added, summary


def test_the_converted_record_reports_the_committed_table_identically(converted):
    root, added, summary = converted
    assert added == 5 * 20
    table = sharing_study.study_table(summary, seeds=20)
    table.to_csv(root / "table.csv", index=False)
    committed = pd.read_csv(RESULTS / "sharing_summary.csv").merge(table[CELL], on=CELL)
    assert len(committed) == 5
    pd.testing.assert_frame_equal(pd.read_csv(root / "table.csv"), committed, check_exact=True)
    assert sharing_study.study_table(summary.assign(runs=summary["runs"] - (summary["variant"] == "frl")), 20)[
        "variant"].tolist() == ["independent", "pd steps", "independent", "pd steps"]  # a variant short of seeds: left out
    lines = set((RESULTS / "sharing_table.md").read_text().splitlines())
    assert all(line in lines for line in sharing_study.markdown(table).splitlines()[2:])


def test_the_converted_record_is_the_experiments_own(converted, capsys, monkeypatch):
    root, _, _ = converted
    blank_rl_figures(monkeypatch)
    assert records.convert(RESULTS / "sharing_runs.csv", root / "part.toml", root / "exp") == 0  # all there
    parts = sorted((root / "exp" / "cells").glob("*/parts/runs/*.csv"))
    before = {p: p.stat().st_mtime_ns for p in parts}
    assert main(["run", str(root / "part.toml"), "--out", str(root / "exp")]) == 0  # frd run finds every run done
    assert {p: p.stat().st_mtime_ns for p in parts} == before
    assert "cell 1/5" not in capsys.readouterr().err
    cell = pd.read_csv(root / "exp" / "cells" / "env=cartpole,agents=2,population=widths,variant=pd steps" / "runs.csv")
    record = pd.read_csv(RESULTS / "sharing_runs.csv")
    old = record[(record["population"] == "widths") & (record["variant"] == "pd steps") & (record["agents"] == 2)
                 & (record["env"] == "cartpole")]
    pd.testing.assert_frame_equal(cell, old[records.RUN_COLUMNS].sort_values("run_id").reset_index(drop=True))

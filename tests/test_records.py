"""A study's flat record (benchmarks/records.py): flattening an experiment's record and converting
it back into a fresh folder gives the same runs, and ``frd report`` the same summary, number for
number; a ``method`` axis is the run's own column, not a second one; the seed study's committed record gives
its committed table byte for byte; a classification record flattens and converts table by table;
a table past the size limit is written, and read back, one file per cell."""
import gzip
import sys
from pathlib import Path

import pandas as pd

from benchmarks import records
from frd.cli import main
from frd.report import report
from tests.blank_figures import blank_rl_figures

TINY = '''domain = "rl"
seeds = 2
hidden = 8
period = 2
max-episodes = 4
agents = 2

[sweep]
method = ["frd", "independent"]
'''


def test_a_flat_record_converts_back_into_the_same_report(tmp_path, monkeypatch, capsys):
    blank_rl_figures(monkeypatch)
    monkeypatch.setattr("frd.report._save", lambda figure, stem: None)  # the tables are what is compared
    file = tmp_path / "tiny.toml"
    file.write_text(TINY)
    assert main(["run", str(file), "--out", str(tmp_path / "ran"), "--no-progress"]) == 0
    flat = records.flatten(file, tmp_path / "ran")
    assert flat.columns[0] == "run_id" and flat.columns.is_unique
    assert len(flat) == 2 * 2 and set(flat["method"]) == {"frd", "independent"}
    flat.to_csv(tmp_path / "flat.csv", index=False)
    assert records.convert(tmp_path / "flat.csv", file, tmp_path / "converted") == 4
    assert records.convert(tmp_path / "flat.csv", file, tmp_path / "converted") == 0  # all there
    pd.testing.assert_frame_equal(records.flatten(file, tmp_path / "converted")[records.RUN_COLUMNS],
                                  flat[records.RUN_COLUMNS])
    ran, converted = report([tmp_path / "ran"], tmp_path / "ran"), report([tmp_path / "converted"], tmp_path / "c")
    pd.testing.assert_frame_equal(converted, ran, check_exact=True)


def test_the_seed_studys_committed_grid_record_gives_its_committed_table(tmp_path, monkeypatch):
    monkeypatch.setattr("frd.report._save", lambda figure, stem: None)
    results = Path(__file__).parent.parent / "benchmarks" / "results"
    file = Path(__file__).parent.parent / "benchmarks" / "experiments" / "seed_grid.toml"
    assert records.convert(results / "seed_study_grid_runs.csv", file, tmp_path / "grid") == 5 * 20
    report([tmp_path / "grid"], tmp_path / "grid")
    assert (tmp_path / "grid" / "summary.csv").read_bytes() == (results / "seed_study_grid.csv").read_bytes()



def test_a_table_past_the_size_limit_is_a_file_per_cell_that_converts_back_the_same(tmp_path, monkeypatch):
    """Past ``SIZE_LIMIT`` a flat table is written one file per cell: their rows in order are the
    whole table's CSV, the whole written before is gone (a reader never mixes the two), and
    converting the parts gives the same record back, text for text; under the limit again, the
    parts go and the whole returns."""
    file = tmp_path / "tiny.toml"
    file.write_text(TINY)
    assert main(["run", str(file), "--out", str(tmp_path / "ran"), "--no-progress"]) == 0
    tables = ("runs", "episodes", "provenance")
    flat = records.flatten_tables(file, tmp_path / "ran", tables)
    (tmp_path / "flat").mkdir()
    paths = {table: tmp_path / "flat" / f"t_{table}.csv.gz" for table in tables}
    assert records.write_flat_table(flat["episodes"], paths["episodes"]) == [paths["episodes"]]
    monkeypatch.setattr(records, "SIZE_LIMIT", 100)  # bytes: each of these tables compresses to more
    written = {table: records.write_flat_table(flat[table], path) for table, path in paths.items()}
    assert [p.name for p in written["episodes"]] == ["t_episodes.frd.csv.gz", "t_episodes.independent.csv.gz"]
    assert not paths["episodes"].exists()
    first, second = (gzip.decompress(p.read_bytes()).decode().splitlines(keepends=True) for p in written["episodes"])
    assert first[0] == second[0] and "".join(first + second[1:]) == flat["episodes"].to_csv(index=False)
    assert records.convert_tables(paths, file, tmp_path / "converted") == 4
    again = records.flatten_tables(file, tmp_path / "converted", tables)
    for table in tables:
        assert again[table].to_csv(index=False) == flat[table].to_csv(index=False)
    monkeypatch.setattr(records, "SIZE_LIMIT", 10**9)
    assert records.write_flat_table(flat["episodes"], paths["episodes"]) == [paths["episodes"]]
    assert sorted(p.name for p in (tmp_path / "flat").glob("t_episodes*")) == ["t_episodes.csv.gz"]

CLS_TINY = '''domain = "cls"
dataset = "digits"
devices = 3
rounds = 2
iterations = 2
seeds = 2

[sweep]
method = { fl = { method = "fl" }, "fd here" = { method = "fd" } }
'''


def test_a_classification_record_flattens_table_by_table_and_converts_back(tmp_path, monkeypatch):
    """Every table of every run, the cell's axis as ``cell.method`` beside the runs' own ``method``."""
    monkeypatch.setattr("frd.classification.report.plot_accuracy", lambda *args, **kwargs: None)
    monkeypatch.setattr("frd.report._save", lambda figure, stem: None)
    file = tmp_path / "tiny.toml"
    file.write_text(CLS_TINY)  # an axis named like the runs' column
    monkeypatch.setattr(sys, "argv", ["frd", "run", "tiny.toml"])
    assert main(["run", str(file), "--out", str(tmp_path / "ran"), "--no-progress"]) == 0
    monkeypatch.setattr(sys, "argv", ["convert"])
    tables = ("runs", "rounds", "ledger", "provenance")
    flat = records.flatten_tables(file, tmp_path / "ran", tables)
    assert flat["runs"][["cell.method", "method"]].values.tolist() == [
        ["fl", "fl"], ["fl", "fl"], ["fd here", "fd"], ["fd here", "fd"]]
    paths = {}
    for table, frame in flat.items():
        paths[table] = tmp_path / f"{table}.csv"
        frame.to_csv(paths[table], index=False)
    assert records.convert_tables(paths, file, tmp_path / "converted") == 4
    again = records.flatten_tables(file, tmp_path / "converted", tables)
    for table in tables:  # provenance too: the command that ran each run, not the conversion's
        pd.testing.assert_frame_equal(again[table], flat[table], check_exact=True)
    assert set(again["provenance"]["command"]) == {"frd run tiny.toml"}
    pd.testing.assert_frame_equal(report([tmp_path / "converted"], tmp_path / "c"),
                                  report([tmp_path / "ran"], tmp_path / "r"), check_exact=True)


def test_a_cell_without_runs_leaves_the_others_integer_columns_integers(tmp_path):
    """Half an experiment run: the empty cell must not turn seeds, rounds and bits into floats,
    which a converted record would then write as ``0.0``."""
    file = tmp_path / "tiny.toml"
    file.write_text(TINY)
    assert main(["run", str(file), "--out", str(tmp_path / "ran"), "--cells", "method=frd", "--no-progress"]) == 0
    flat = records.flatten_tables(file, tmp_path / "ran", ("runs", "rounds", "ledger"))
    assert set(flat["runs"]["cell.method"]) == {"frd"}
    assert flat["runs"]["seed"].dtype.kind == flat["rounds"]["round"].dtype.kind == flat["ledger"]["bits"].dtype.kind == "i"

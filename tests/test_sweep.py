"""Experiments as files and inline sweeps (issue 41): ``frd run FILE``, ``frd rl --grid 5,10``
and ``frd report``. A file is checked whole before anything is written; the file form and the
inline form of one sweep give the same record; each cell's tables are those of a plain ``frd rl``
of that cell; a rerun resumes; ``frd report`` redraws the summary from the record alone."""
from __future__ import annotations

import contextlib
import json
import multiprocessing
import re
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from frd.backends import LOCAL
from frd.cli import main
from frd.domains import get_domain
from frd.errors import FrdError
from frd.experiment_file import RECORD, Experiment, overridden, read_file, resolve, split_inline
from frd.report import Cell as ReportCell
from frd.report import Summarised, across_methods
from frd.results import locked
from frd.rl.sweep import COMPARISON
from frd.stats import improvement_ci
from frd.sweep import command
from tests.blank_figures import blank_rl_figures

TINY = {"method": "frd", "agents": 2, "seeds": 2, "max-episodes": 30, "period": 10, "hidden": 8}
"""A sweep's base settings: two agents, two seeds, three exchange rounds of 30 episodes."""
TINY_FILE = 'domain = "rl"\nmethod = "frd"\nagents = 2\nseeds = 2\nmax_episodes = 30\nperiod = 10\nhidden = 8\n'
TINY_ARGS = ["--method", "frd", "--agents", "2", "--seeds", "2", "--max-episodes", "30", "--period", "10", "--hidden", "8",
             "--no-progress"]
TABLES = ("runs", "episodes", "ledger", "rounds")
TIMINGS = ("compute_s", "comm_s", "cpu_seconds", "comm_seconds")
"""Wall-clock columns: the only ones two runs of one config may differ in."""


def _table(path: Path) -> pd.DataFrame:
    frame = pd.read_csv(path)
    return frame.drop(columns=[c for c in TIMINGS if c in frame.columns])


@pytest.fixture(autouse=True)
def blank_cell_figures(monkeypatch):
    """Each RL cell's own figures drawn blank (written as usual); the report's are real."""
    blank_rl_figures(monkeypatch)


def _write(folder: Path, text: str, name: str = "exp.toml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder / name


# ---- checked before anything is written ----

@pytest.mark.parametrize("text, message", [
    (TINY_FILE + "gird = 5\n", r"exp.toml: unknown key 'gird' \(not a flag of frd rl\); did you mean grid\?"),
    (TINY_FILE + 'out = "x"\n', r"exp.toml: out is not a setting of the experiment: give --out"),
    (TINY_FILE.replace('domain = "rl"\n', ""), r'exp.toml: name the domain, e.g. domain = "rl"'),
    (TINY_FILE.replace('"rl"', '"dqn"'), r"unknown domain 'dqn'; installed: "),
    (TINY_FILE + 'grid = "ten"\n', r"exp.toml: grid: expected an integer, got 'ten'"),
    (TINY_FILE + "recipe = 3.5\n[sweep]\ngrid = [5]\n", r"recipe: choose one of nstep, rlcode, got '3.5'"),
    (TINY_FILE.replace("agents = 2", "agents = [2, 4]"), r"exp.toml: agents takes one value, got \[2, 4\]; to sweep it"),
    (TINY_FILE + "[sweep]\ngrid = 5\n", r"exp.toml: the axis grid needs a list of values"),
    (TINY_FILE + "[sweep]\ngrid = [5, 10, 5]\n", r"exp.toml: the axis grid lists 5 twice"),
    (TINY_FILE + "[sweep]\nagents = [4]\n", r"exp.toml: agents is both set and swept"),
    (TINY_FILE + "[sweep]\nfirst-seed = [3]\nfirst_seed = [4]\n", r"exp.toml: first-seed is swept twice"),
    (TINY_FILE + "max-episodes = 30\n", r"exp.toml: max-episodes is given twice"),
    (TINY_FILE + "single-agent-reference = 1\n", r"exp.toml: single-agent-reference is a switch: true or false, got 1"),
    (TINY_FILE + "grid = \n", r"exp.toml: not TOML: "),
    (TINY_FILE + "[sweep]\nwindow = [10, 0]\n", r"exp.toml: cell window=0: --window must be at least 1, got 0"),
    (TINY_FILE.replace('"frd"', '"pd"') + "grid = 5\n", r"cell base: --grid is an option of frd, mixfrd, not of pd"),
    (TINY_FILE + "single-agent-reference = true\n", r"--single-agent-reference is not run in a sweep"),
    (TINY_FILE + "[sweep]\nsize = { small = 8 }\n", r"exp.toml: the axis size names bundles of settings: each a table"),
    (TINY_FILE + "[sweep.size]\nsmall = { hiden = 8 }\n", r"exp.toml: size.small: unknown key 'hiden' .*did you mean hidden"),
    (TINY_FILE + "[sweep.size]\nsmall = { hidden = 4 }\n", r"exp.toml: hidden is set by the axis size and by the settings"),
    (TINY_FILE + "[sweep]\ngrid = [5]\nskip = [{ gird = 5 }]\n", r"exp.toml: skip: gird is no axis; did you mean grid"),
    (TINY_FILE + "[sweep]\ngrid = [5]\nskip = [{ grid = 7 }]\n", r"exp.toml: skip: grid has no value 7"),
    (TINY_FILE + "[sweep]\ngrid = [5]\nskip = { grid = 5 }\n", r"exp.toml: skip takes a list of tables"),
])
def test_a_bad_file_is_one_line_and_writes_nothing(text, message, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(_write(tmp_path, text)), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert re.search(message, err), err
    assert not out.exists()


def test_a_bad_value_names_its_key(tmp_path):
    cmd = command(get_domain("rl"))
    with pytest.raises(FrdError, match=r"^f.toml: grid: expected an integer, got '5.5'"):
        resolve(cmd, {"grid": 5.5}, {}, "f.toml: ")
    with pytest.raises(FrdError, match=r"^f.toml: partition: choose one of iid, mix2fld, dirichlet, shards, got 'zipf'"):
        resolve(command(get_domain("cls")), {}, {"partition": ["iid", "zipf"]}, "f.toml: ")
    with pytest.raises(FrdError, match=r"^--sweep: unknown key 'seed' \(not a flag of frd rl\); did you mean seeds"):
        split_inline(cmd, ["--sweep", "seed=1,2"])
    with pytest.raises(FrdError, match=r"--sweep takes KEY=V1,V2,…, e.g. --sweep grid=5,10,30; got 'grid'"):
        split_inline(cmd, ["--sweep", "grid"])
    with pytest.raises(FrdError, match=r"^--sweep: grid is swept twice"):
        split_inline(cmd, ["--grid", "5,10", "--sweep", "grid=30,50"])


# ---- the command line: which comma lists sweep ----

def test_only_a_number_or_a_choice_given_as_a_comma_list_sweeps():
    rl = command(get_domain("rl"))
    axes, rest = split_inline(rl, ["--method", "frd", "--grid", "5,10,30", "--agent-spec", "h=32,lr=3e-4;h=64",
                                   "--channel-opt", "p_up_dbm=10,preset=symmetric", "--target=1e9,2e9", "--out", "X"])
    assert axes == {"grid": ["5", "10", "30"], "target": ["1e9", "2e9"]}
    assert rest == ["--method", "frd", "--agent-spec", "h=32,lr=3e-4;h=64", "--channel-opt", "p_up_dbm=10,preset=symmetric",
                    "--out", "X"]
    assert split_inline(rl, ["--grid", "5", "--frl-critic", "no"]) == ({}, ["--grid", "5", "--frl-critic", "no"])
    assert split_inline(rl, ["--sweep", "agents=2,4", "--sweep=method=frd,pd"])[0] == {"agents": ["2", "4"],
                                                                                       "method": ["frd", "pd"]}
    cls = command(get_domain("cls"))
    assert split_inline(cls, ["--method", "fl,fd", "--partition", "iid,dirichlet"]) == (
        {"partition": ["iid", "dirichlet"]}, ["--method", "fl,fd"])  # --method fl,fd is the command's own


def test_the_inline_form_resolves_to_the_files_experiment(tmp_path):
    rl = command(get_domain("rl"))
    path = _write(tmp_path, TINY_FILE + "target = inf\n[sweep]\ngrid = [5, 10]\ndistill-lr = [1e-3, 0.01]\n")
    domain, settings, axes = read_file(path)
    from_file = resolve(rl, settings, axes, "")
    from_line = resolve(rl, {**{k: str(v) for k, v in TINY.items()}, "target": "inf"},
                        {"grid": ["5", "10"], "distill-lr": ["0.001", "1e-2"]}, "")
    assert from_file == from_line and from_file.toml() == from_line.toml()
    assert "agents" not in from_file.settings  # 2, the default: given or not, the same experiment
    assert [c.id for c in from_file.cells()] == ["grid=5,distill-lr=0.001", "grid=5,distill-lr=0.01",
                                                 "grid=10,distill-lr=0.001", "grid=10,distill-lr=0.01"]
    again = _write(tmp_path, from_file.toml(), "record.toml")  # the record reads back as the same experiment
    assert resolve(rl, *read_file(again)[1:], "") == from_file
    assert Experiment("rl", {}, {}).cells()[0].id == "base"


@pytest.mark.parametrize("domain, base", [("cls", 'domain = "cls"\nmethod = "fl,fd"\nseeds = 1\n'),
                                          ("rl", TINY_FILE.replace('"frd"', '"frd,pd"'))])
def test_a_method_list_in_a_file_sweeps_the_methods(domain, base, tmp_path, capsys):
    cmd = command(get_domain(domain))
    listed = resolve(cmd, *read_file(_write(tmp_path, base))[1:], "")
    methods = base.split('method = "')[1].split('"')[0].split(",")
    swept = base.replace(f'method = "{",".join(methods)}"\n', "") + f"[sweep]\nmethod = {json.dumps(methods)}\n"
    assert listed == resolve(cmd, *read_file(_write(tmp_path, swept, "swept.toml"))[1:], "")
    with_axis = resolve(cmd, {"method": ",".join(methods)}, {"seeds": ["1", "2"]}, "")  # the inline form too
    assert [c.id for c in with_axis.cells()] == [f"method={m},seeds={k}" for m in methods for k in (1, 2)]
    assert main(["run", str(tmp_path / "exp.toml"), "--print", "--out", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out.splitlines()[:2] == [f"method={m}: {1 if domain == 'cls' else 2} runs" for m in methods]
    assert not (tmp_path / "out").exists()
    both = _write(tmp_path, base + f"[sweep]\nmethod = {json.dumps(methods)}\n", "both.toml")
    with pytest.raises(FrdError, match=r"^both.toml: method is both set and swept: keep one$"):
        resolve(cmd, *read_file(both)[1:], "both.toml: ")


def test_an_axis_of_bundles_sets_several_flags_and_skip_leaves_cells_out(tmp_path):
    rl = command(get_domain("rl"))
    text = ('domain = "rl"\nagents = 2\n[sweep]\npopulation = { small = { hidden = 32 }, mixed = { agent-spec = "h=32;h=64" } }\n'
            'skip = [{ population = "mixed", variant = "frl" }]\n[sweep.variant]\nfrl = { method = "frl" }\n'
            '"pd steps" = { method = "pd", distill-steps = 20 }\n')
    experiment = resolve(rl, *read_file(_write(tmp_path, text))[1:], "")
    assert [c.id for c in experiment.cells()] == ["population=small,variant=frl", "population=small,variant=pd steps",
                                                  "population=mixed,variant=pd steps"]
    assert experiment.arguments(rl, experiment.cells()[2]) == ["--agent-spec", "h=32;h=64", "--distill-steps", "20",
                                                                 "--method", "pd"]
    assert experiment.method_axes() == {"variant"}
    record = _write(tmp_path, experiment.toml(), "record.toml")  # the record reads back as the same experiment
    assert resolve(rl, *read_file(record)[1:], "") == experiment
    assert Experiment.of_record(*read_file(record)).flat() == experiment.flat()


# ---- flags after the file override it ----

@pytest.mark.parametrize("overrides, expected", [
    (["--seeds", "3", "--hidden=16"], "agents = 4\nseeds = 3\nhidden = 16\n[sweep]\ngrid = [5, 10]"),
    (["--grid", "7"], "agents = 4\nseeds = 2\nhidden = 8\ngrid = 7"),  # a swept key given one value is no axis
    (["--grid", "5,30", "--sweep", "agents=2,4"], "seeds = 2\nhidden = 8\n[sweep]\ngrid = [5, 30]\nagents = [2, 4]"),
    (["--agents", "2"], "seeds = 2\nhidden = 8\n[sweep]\ngrid = [5, 10]"),  # the default given: as if not given
])
def test_flags_after_the_file_override_it(overrides, expected, tmp_path):
    rl = command(get_domain("rl"))
    base = 'domain = "rl"\nmethod = "frd"\nagents = 4\nseeds = 2\nhidden = 8\n[sweep]\ngrid = [5, 10]\n'
    _, settings, axes = read_file(_write(tmp_path, base))
    merged = resolve(rl, *overridden(rl, settings, axes, overrides), "")
    written = read_file(_write(tmp_path, f'domain = "rl"\nmethod = "frd"\n{expected}\n', "expected.toml"))
    assert merged == resolve(rl, *written[1:], "")
    assert merged.toml() == resolve(rl, *written[1:], "").toml()


@pytest.mark.parametrize("overrides, message", [
    (["--gird", "5"], r"^unknown flag --gird of frd rl; did you mean --grid\?$"),
    (["--seed", "1"], r"^unknown flag --seed of frd rl; did you mean --seeds or --first-seed\?$"),
    (["--grid", "ten"], r"^--grid: expected an integer, got 'ten'$"),
    (["--recipe", "dqn"], r"^--recipe: choose one of nstep, rlcode, got 'dqn'$"),
    (["--seeds"], r"^--seeds needs a value$"),
    (["--seeds", "2", "--seeds", "3"], r"^--seeds is given twice$"),
    (["--single-agent-reference=yes"], r"^--single-agent-reference is a switch: it takes no value$"),
    (["5"], r"^'5' after the experiment file is no flag: give settings as --KEY VALUE$"),
    (["--grid", "5,10", "--sweep", "grid=30"], r"^--sweep: grid is swept twice$"),
    (["--window", "0"], r"^exp.toml: cell grid=5: --window must be at least 1, got 0$"),
])
def test_a_bad_override_is_one_line_and_writes_nothing(overrides, message, tmp_path, capsys):
    out = tmp_path / "out"
    path = _write(tmp_path, TINY_FILE + "[sweep]\ngrid = [5, 10]\n")
    assert main(["run", str(path), "--out", str(out), *overrides]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(message, err.removeprefix("frd: error: ").strip()), err
    assert not out.exists()


def test_the_record_holds_the_overridden_experiment(tmp_path, capsys):
    path = _write(tmp_path, TINY_FILE + "[sweep]\ngrid = [5, 10]\n")
    out = tmp_path / "out"
    assert main(["run", str(path), "--grid", "5", "--seeds", "1", "--no-progress", "--max-episodes", "10",
                 "--out", str(out), "--backend", "local"]) == 0
    record = (out / "experiment.toml").read_text()
    assert "grid = 5\n" in record and "seeds = 1\n" in record and "max-episodes = 10\n" in record
    assert "[sweep]" not in record
    assert pd.read_csv(out / "cells" / "base" / "runs.csv")["run_id"].tolist() == ["frd-seed0"]
    assert main(["run", str(path), "--out", str(tmp_path / "new"), "--print"]) == 0  # the file alone: 2 cells of 2 seeds
    assert capsys.readouterr().out.splitlines()[-1] == f"2 cells, 4 runs, into {tmp_path / 'new'}/"
    assert main(["run", str(path), "--out", str(out), "--print"]) == 2  # as its run, not the overridden record's
    assert "holds another experiment (" in capsys.readouterr().err


# ---- one sweep, from a file and from the command line ----

@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """The tiny grid sweep from a file and inline, and a plain ``frd rl`` of each cell (the cells'
    own figures drawn blank: the report's are real)."""
    root = tmp_path_factory.mktemp("sweeps")
    with pytest.MonkeyPatch.context() as patch:
        blank_rl_figures(patch)
        path = _write(root, TINY_FILE + "[sweep]\ngrid = [5, 10]\n", "grid.toml")
        assert main(["run", str(path), "--out", str(root / "file"), "--no-progress"]) == 0
        assert main(["rl", *TINY_ARGS, "--grid", "5,10", "--out", str(root / "inline")]) == 0
        for grid in (5, 10):
            assert main(["rl", *TINY_ARGS, "--grid", str(grid), "--out", str(root / f"plain-{grid}")]) == 0
    return root


def test_the_file_and_the_inline_sweep_give_the_same_record(sweeps):
    file, inline = sweeps / "file", sweeps / "inline"
    assert (file / "experiment.toml").read_text() == (inline / "experiment.toml").read_text()
    assert sorted(p.name for p in (file / "cells").iterdir()) == ["grid=10", "grid=5"]
    for cell in ("grid=5", "grid=10"):
        for table in TABLES:
            pd.testing.assert_frame_equal(_table(file / "cells" / cell / f"{table}.csv"),
                                          _table(inline / "cells" / cell / f"{table}.csv"), check_exact=True)
    pd.testing.assert_frame_equal(_table(file / "summary.csv"), _table(inline / "summary.csv"), check_exact=True)


@pytest.mark.parametrize("grid", [5, 10])
def test_each_cell_holds_the_tables_of_a_plain_frd_rl_of_that_cell(sweeps, grid):
    for table in [*TABLES, "summary"]:
        pd.testing.assert_frame_equal(_table(sweeps / "file" / "cells" / f"grid={grid}" / f"{table}.csv"),
                                      _table(sweeps / f"plain-{grid}" / f"{table}.csv"), check_exact=True, obj=table)


def test_the_summary_is_numbers_per_cell_with_the_axis_in_front(sweeps):
    summary = pd.read_csv(sweeps / "file" / "summary.csv")
    assert list(summary.columns[:2]) == ["grid", "method"] and summary["grid"].tolist() == [5, 10]
    assert all(pd.api.types.is_numeric_dtype(summary[c]) for c in summary.columns if c not in ("method", "baseline"))
    for grid, row in summary.set_index("grid").iterrows():
        runs = pd.read_csv(sweeps / f"plain-{grid}" / "runs.csv")
        assert row["bits_up_per_agent_round"] == (runs["bits_up"] / runs["rounds"] / 2).median()
        assert row["bits_up_total"] == runs["bits_up"].median()
        assert row["mission_episodes_median"] == runs["mission_episodes"].median()
    small, large = summary["bits_up_per_agent_round"]
    assert small < large  # a finer grid sends more cells


def test_the_table_shows_per_grid_episodes_and_bits(sweeps, tmp_path, capsys):
    assert main(["report", str(sweeps / "file"), "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["grid", "method"] and "bits up/agent/round" in lines[0]
    summary = pd.read_csv(sweeps / "file" / "summary.csv")
    for line, (_, row) in zip(lines[1:3], summary.iterrows()):
        words = line.split()
        assert words[:3] == [str(row["grid"]), "frd", "2"]
        assert words[-2:] == [f"{row['bits_up_per_agent_round']:.0f}", f"{row['bits_up_total']:.0f}"]


def test_report_reproduces_the_summary_from_the_record_and_draws_png_and_pdf(sweeps, tmp_path, capsys):
    assert main(["report", str(sweeps / "file"), "--out", str(tmp_path)]) == 0
    assert (tmp_path / "summary.csv").read_bytes() == (sweeps / "file" / "summary.csv").read_bytes()
    assert {p.name for p in (tmp_path / "figures").iterdir()} == {"grid.png", "grid.pdf", "frontier.png", "frontier.pdf"}
    assert (tmp_path / "frontier.csv").exists()  # outcome against bits, per cell (frd.frontier)
    first = (tmp_path / "figures" / "grid.pdf").read_bytes()
    assert main(["report", str(sweeps / "file"), "--out", str(tmp_path)]) == 0
    assert (tmp_path / "figures" / "grid.pdf").read_bytes() == first  # no date in the PDF: a redraw is the same file


def test_a_rerun_resumes_without_computing_anything(sweeps, capsys):
    parts = sorted((sweeps / "inline" / "cells").glob("*/parts/*/*"))
    before = {p: p.stat().st_mtime_ns for p in parts}
    assert main(["rl", *TINY_ARGS, "--grid", "5,10", "--out", str(sweeps / "inline")]) == 0
    assert main(["rl", *TINY_ARGS, "--sweep", "grid=5,10", "--out", str(sweeps / "inline")]) == 0
    assert {p: p.stat().st_mtime_ns for p in parts} == before
    assert sorted((sweeps / "inline" / "cells").glob("*/parts/*/*")) == parts


def test_another_experiment_in_the_same_folder_is_refused_naming_what_differs(sweeps, tmp_path, capsys):
    record = (sweeps / "file" / "experiment.toml").read_text()
    path = _write(tmp_path, TINY_FILE.replace("hidden = 8", "hidden = 16") + "[sweep]\ngrid = [5, 10, 30]\n")
    assert main(["run", str(path), "--out", str(sweeps / "file")]) == 2
    assert (f"{sweeps / 'file'} holds another experiment (hidden: 8 → 16, sweep.grid: [5, 10] → [5, 10, 30]); "
            "use another --out") in capsys.readouterr().err
    assert (sweeps / "file" / "experiment.toml").read_text() == record
    assert main(["rl", *TINY_ARGS, "--grid", "5,10", "--out", str(sweeps / "plain-5")]) == 2
    assert "holds the results of one frd command, not an experiment" in capsys.readouterr().err



def test_a_file_that_adds_cells_or_seeds_grows_the_record_and_runs_only_the_new_ones(sweeps, tmp_path, monkeypatch, capsys):
    blank_rl_figures(monkeypatch)
    grown = tmp_path / "grown"
    shutil.copytree(sweeps / "file", grown)
    parts = {p: p.stat().st_mtime_ns for p in grown.glob("cells/*/parts/*/*")}
    path = _write(tmp_path, TINY_FILE + "[sweep]\ngrid = [5, 10, 30]\n")
    assert main(["run", str(path), "--out", str(grown), "--no-progress"]) == 0
    assert f"{grown}: the experiment grows (sweep.grid: [5, 10] → [5, 10, 30]); its runs stay" in capsys.readouterr().err
    assert {p: p.stat().st_mtime_ns for p in parts} == parts  # the cells it held were not run again
    assert "grid = [5, 10, 30]" in (grown / "experiment.toml").read_text()
    assert list(pd.read_csv(grown / "summary.csv")["grid"]) == [5, 10, 30]
    assert main(["run", str(_write(tmp_path, TINY_FILE + "[sweep]\ngrid = [5, 10]\n", "fewer.toml")), "--out", str(grown)]) == 2
    assert "holds another experiment (sweep.grid: [5, 10, 30] → [5, 10])" in capsys.readouterr().err
    more = _write(tmp_path, TINY_FILE.replace("seeds = 2", "seeds = 3") + "[sweep]\ngrid = [5, 10, 30]\n", "more.toml")
    assert main(["run", str(more), "--out", str(grown), "--no-progress"]) == 0
    assert "the experiment grows (seeds: 2 → 3)" in capsys.readouterr().err
    assert {p: p.stat().st_mtime_ns for p in parts} == parts
    runs = pd.read_csv(grown / "cells" / "grid=5" / "runs.csv")
    assert list(runs["seed"]) == [0, 1, 2]
    assert main(["run", str(_write(tmp_path, TINY_FILE.replace("seeds = 2", "first-seed = 1\nseeds = 3")
                                   + "[sweep]\ngrid = [5, 10, 30]\n", "shifted.toml")), "--out", str(grown)]) == 2
    assert "holds another experiment (" in capsys.readouterr().err  # seeds 1-3 leave out seed 0, which it holds

def test_report_leaves_out_a_damaged_run_and_names_it(sweeps, tmp_path, capsys):
    copy = tmp_path / "copy"
    shutil.copytree(sweeps / "file", copy)
    part = copy / "cells" / "grid=5" / "parts" / "runs" / "frd-seed1.csv"
    part.write_text(part.read_text().replace("frd-seed1", "frd-seed9"))
    assert main(["report", str(copy)]) == 0
    assert "frd-seed1 is run again: parts/runs/frd-seed1.csv is truncated or altered" in capsys.readouterr().err
    summary = pd.read_csv(copy / "summary.csv")
    assert summary["runs"].tolist() == [1, 2]


def _frd_logged(args: list[str], log: Path) -> None:
    """``frd *args`` in a forked process, its stderr (progress and cell lines) into ``log``."""
    with log.open("w", buffering=1) as stream, contextlib.redirect_stderr(stream):  # line by line, as it runs
        code = main(args)
    sys.exit(code)


def test_two_processes_share_one_experiment_each_cell_run_once(tmp_path):
    """Two ``frd run`` of one experiment into one folder while this test holds cell grid=10: the
    free cell is run by one of them, grid=10 by nobody until it is released, then by one; both
    end on the record a single process writes. (Forked, not started: the cells' figures stay blank.)"""
    path = _write(tmp_path, TINY_FILE + "[sweep]\ngrid = [5, 10]\n")
    assert main(["run", str(path), "--out", str(tmp_path / "one"), "--no-progress"]) == 0
    two, logs = tmp_path / "two", [tmp_path / "a.log", tmp_path / "b.log"]
    fork = multiprocessing.get_context("fork")
    with locked(two / "locks" / "grid=10.lock", wait=False) as held:
        assert held
        processes = [fork.Process(target=_frd_logged, args=(["run", str(path), "--out", str(two)], log)) for log in logs]
        for process in processes:
            process.start()
        deadline = time.monotonic() + 120
        while not all("grid=10 is run by another process" in log.read_text() for log in logs if log.exists()) \
                or not all(log.exists() for log in logs):
            assert time.monotonic() < deadline and all(p.is_alive() for p in processes), [log.read_text() for log in logs]
            time.sleep(0.1)
        assert not (two / "cells" / "grid=10").exists()  # held here: nobody runs it
    for process in processes:
        process.join(120)
    assert [process.exitcode for process in processes] == [0, 0], [log.read_text()[-2000:] for log in logs]
    started = [line for log in logs for line in re.findall(r"cell \d/2: \S+$", log.read_text(), re.M)]
    assert sorted(started) == ["cell 1/2: grid=5", "cell 2/2: grid=10"], started  # each cell run once
    for cell in ("grid=5", "grid=10"):
        for table in TABLES:
            pd.testing.assert_frame_equal(_table(two / "cells" / cell / f"{table}.csv"),
                                          _table(tmp_path / "one" / "cells" / cell / f"{table}.csv"), check_exact=True)
    pd.testing.assert_frame_equal(_table(two / "summary.csv"), _table(tmp_path / "one" / "summary.csv"), check_exact=True)
    assert not list(two.rglob("*.tmp"))


@pytest.mark.parametrize("args, message", [
    (["--by", "gird"], r"--by gird: not a sweep axis here \(axes: grid\); did you mean grid\?"),
    (["--metric", "bits_up"], r"--metric bits_up: no such column in summary.csv; did you mean bits_up_total"),
])
def test_report_refuses_an_unknown_axis_or_column(sweeps, args, message, tmp_path, capsys):
    assert main(["report", str(sweeps / "file"), *args, "--out", str(tmp_path)]) == 2
    assert re.search(message, capsys.readouterr().err)


def test_report_of_several_folders_needs_out_and_one_domain(sweeps, tmp_path, capsys):
    assert main(["report", str(sweeps / "plain-5"), str(sweeps / "plain-10")]) == 2
    assert "reporting several folders needs --out R" in capsys.readouterr().err
    assert main(["report", str(sweeps / "plain-5"), str(sweeps / "plain-10"), "--out", str(tmp_path)]) == 0
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert summary["experiment"].tolist() == ["plain-5", "plain-10"]
    assert main(["report", str(tmp_path)]) == 2
    assert "holds neither an experiment (experiment.toml) nor results (config.json)" in capsys.readouterr().err


def test_report_of_plain_folders_draws_their_headline_and_claims_only_what_it_wrote(sweeps, tmp_path, capsys):
    several, one = tmp_path / "several", tmp_path / "one"
    assert main(["report", str(sweeps / "plain-5"), str(sweeps / "plain-10"), "--out", str(several)]) == 0
    assert {"experiment.png", "experiment.pdf"} <= {p.name for p in (several / "figures").iterdir()}
    assert capsys.readouterr().out.endswith(f"summary.csv and figures/ in {several}/\n")
    assert main(["report", str(sweeps / "plain-5"), "--out", str(one)]) == 0  # one row: nothing to draw
    assert not (one / "figures").exists()
    assert capsys.readouterr().out.endswith(f"summary.csv in {one}/\n")


def test_print_lists_the_cells_and_runs_and_writes_nothing(tmp_path, capsys):
    path = _write(tmp_path, 'domain = "rl"\nseeds = 2\n[sweep]\nagents = [2, 4]\nmethod = ["frd", "independent"]\n')
    assert main(["run", str(path), "--print", "--out", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "agents=2,method=frd: 2 runs", "agents=2,method=independent: 2 runs", "agents=4,method=frd: 2 runs",
        "agents=4,method=independent: 2 runs", f"4 cells, 8 runs, into {tmp_path / 'out'}/"]
    assert not (tmp_path / "out").exists()


def test_print_counts_the_finished_runs_of_the_record_and_refuses_a_folder_the_run_refuses(sweeps, tmp_path, capsys):
    record = sweeps / "file"
    held = (record / RECORD).read_text()
    grown = _write(tmp_path, TINY_FILE + "[sweep]\ngrid = [5, 10, 30]\n")
    assert main(["run", str(grown), "--print", "--out", str(record)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "grid=5: 2 runs, 2 of 2 already done", "grid=10: 2 runs, 2 of 2 already done", "grid=30: 2 runs",
        f"3 cells, 6 runs, 4 of 6 already done, into {record}/"]
    assert (record / RECORD).read_text() == held and not (record / "cells" / "grid=30").exists()
    other = _write(tmp_path, TINY_FILE.replace("hidden = 8", "hidden = 16") + "[sweep]\ngrid = [5, 10]\n", "other.toml")
    for path, out, message in ((other, record, r"file holds another experiment \(hidden: 8 → 16\); use another --out"),
                               (grown, sweeps / "plain-5", r"plain-5 holds the results of one frd command, not an experiment")):
        assert main(["run", str(path), "--print", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and re.search(message, err), err


def test_cells_runs_the_picked_cells_into_the_whole_record_and_a_plain_rerun_adds_the_rest(sweeps, tmp_path, capsys):
    path = _write(tmp_path, TINY_FILE + "[sweep]\ngrid = [5, 10]\n", "grid.toml")
    out = tmp_path / "out"
    assert main(["run", str(path), "--cells", "nothing*", "--out", str(out)]) == 2
    assert "--cells 'nothing*' matches no cell" in capsys.readouterr().err and not out.exists()
    assert main(["run", str(path), "--print", "--cells", "grid=1*", "--out", str(out)]) == 0
    assert capsys.readouterr().out.splitlines() == ["grid=10: 2 runs", f"1 cells, 2 runs, into {out}/"]
    assert main(["run", str(path), "--cells", "grid=1*", "--out", str(out), "--no-progress"]) == 0
    assert (out / "experiment.toml").read_text() == (sweeps / "file" / "experiment.toml").read_text()
    assert sorted(p.name for p in (out / "cells").iterdir()) == ["grid=10"]
    assert "grid=5 has no runs yet" in capsys.readouterr().err  # the report names what is missing
    assert pd.read_csv(out / "summary.csv")["grid"].tolist() == [10]
    ten = sorted((out / "cells" / "grid=10").glob("parts/*/*"))
    before = {p: p.stat().st_mtime_ns for p in ten}
    assert main(["run", str(path), "--out", str(out), "--no-progress"]) == 0  # the rest, nothing twice
    assert {p: p.stat().st_mtime_ns for p in ten} == before
    for table in TABLES:
        pd.testing.assert_frame_equal(_table(out / "cells" / "grid=5" / f"{table}.csv"),
                                      _table(sweeps / "file" / "cells" / "grid=5" / f"{table}.csv"), check_exact=True)
    pd.testing.assert_frame_equal(_table(out / "summary.csv"), _table(sweeps / "file" / "summary.csv"), check_exact=True)


def test_seeds_per_pass_runs_each_cells_first_seeds_before_any_next_and_gives_the_same_record(sweeps, tmp_path,
                                                                                                 capsys):
    path = _write(tmp_path, TINY_FILE + "[sweep]\ngrid = [5, 10]\n", "grid.toml")
    out = tmp_path / "out"
    assert main(["run", str(path), "--seeds-per-pass", "0", "--out", str(out)]) == 2
    assert "--seeds-per-pass: takes a whole number of seeds ≥ 1, got '0'" in capsys.readouterr().err
    assert not out.exists()
    assert main(["run", str(path), "--seeds-per-pass", "1", "--out", str(out)]) == 0
    started = [line for line in capsys.readouterr().err.splitlines() if line.startswith("cell ")]
    assert started == ["cell 1/2: grid=5, seeds 0–0", "cell 2/2: grid=10, seeds 0–0",
                       "cell 1/2: grid=5, seeds 1–1", "cell 2/2: grid=10, seeds 1–1"]
    for cell in ("grid=5", "grid=10"):
        for table in [*TABLES, "summary"]:  # each cell's summary is of both its seeds
            pd.testing.assert_frame_equal(_table(out / "cells" / cell / f"{table}.csv"),
                                          _table(sweeps / "file" / "cells" / cell / f"{table}.csv"), check_exact=True)
    pd.testing.assert_frame_equal(_table(out / "summary.csv"), _table(sweeps / "file" / "summary.csv"), check_exact=True)


def test_a_pass_waits_for_no_held_cell_and_the_last_pass_runs_what_it_left(sweeps, tmp_path):
    """While this test holds grid=10, a process with one seed per pass runs both passes of grid=5;
    released, grid=10's seeds all run in the last pass; the record is the single-pass one."""
    path = _write(tmp_path, TINY_FILE + "[sweep]\ngrid = [5, 10]\n", "grid.toml")
    out, log = tmp_path / "out", tmp_path / "a.log"
    process = multiprocessing.get_context("fork").Process(
        target=_frd_logged, args=(["run", str(path), "--seeds-per-pass", "1", "--out", str(out)], log))
    with locked(out / "locks" / "grid=10.lock", wait=False) as held:
        assert held
        process.start()
        deadline = time.monotonic() + 120
        while not (log.exists() and log.read_text().count("grid=10 is run by another process") == 3):  # a pass each
            assert time.monotonic() < deadline and process.is_alive(), log.read_text() if log.exists() else ""
            time.sleep(0.1)
        assert "cell 1/2: grid=5, seeds 1–1" in log.read_text()  # the second pass went on without grid=10
    process.join(120)
    assert process.exitcode == 0, log.read_text()[-2000:]
    assert "cell 2/2: grid=10, seeds 0–1" in log.read_text()
    for cell in ("grid=5", "grid=10"):
        for table in [*TABLES, "summary"]:
            pd.testing.assert_frame_equal(_table(out / "cells" / cell / f"{table}.csv"),
                                          _table(sweeps / "file" / "cells" / cell / f"{table}.csv"), check_exact=True)


def test_a_folder_whose_key_still_holds_first_seed_resumes_without_a_run(sweeps, tmp_path):
    """Folders written before first_seed left the resume key (2026-12-06) hold it there."""
    folder = shutil.copytree(sweeps / "plain-5", tmp_path / "old")
    config = json.loads((folder / "config.json").read_text())
    assert "first_seed" not in config["resume_key"]["common"]
    config["resume_key"]["common"]["first_seed"] = 0
    (folder / "config.json").write_text(json.dumps(config))
    parts = {p: p.stat().st_mtime_ns for p in folder.glob("parts/*/*")}
    assert main(["rl", *TINY_ARGS, "--grid", "5", "--out", str(folder)]) == 0
    assert {p: p.stat().st_mtime_ns for p in folder.glob("parts/*/*")} == parts


# ---- across method cells ----

def _found(method: str, agents: int, episodes: list[int], seeds: list[int]) -> Summarised:
    summary = pd.DataFrame({"method": [method], "agents": [agents], "p_improvement": [np.nan],
                            "p_improvement_lo": [np.nan], "p_improvement_hi": [np.nan]})
    runs = pd.DataFrame({"method": method, "seed": seeds, "mission_episodes": episodes, "all_agents_episodes": np.nan})
    cell = ReportCell("exp", "rl", Path("."), {"agents": agents, "method": method}, frozenset({"method"}))
    return Summarised(cell, summary, [], runs)


def test_p_improvement_compares_each_method_cell_with_independent_on_the_seeds_both_have():
    frd2 = _found("frd", 2, [10, 20, 30], [0, 1, 2])
    alone2 = _found("independent", 2, [15, 25, 35, 5], [0, 1, 2, 3])  # seed 3: frd has none, left out
    pd4 = _found("pd", 4, [10, 10], [0, 1])  # no independent cell with 4 agents: nothing to compare with
    across_methods(COMPARISON, [frd2, alone2, pd4])
    row = frd2.summary.iloc[0]
    assert row["p_improvement"] == 6 / 9  # 10 < 15, 25, 35; 20 < 25, 35; 30 < 35
    assert 0 <= row["p_improvement_lo"] < 6 / 9 < row["p_improvement_hi"] <= 1
    assert alone2.summary[["p_improvement", "p_improvement_lo", "p_improvement_hi"]].isna().all(axis=None)
    assert pd4.summary["p_improvement"].isna().all()
    assert frd2.summary["p_improvement_all_agents"].isna().all()  # --until first: no episodes until every agent


def test_a_sweep_over_method_reports_p_improvement_against_independent(tmp_path, capsys):
    path = _write(tmp_path, TINY_FILE.replace('method = "frd"\n', "") + '[sweep]\nmethod = ["frd", "independent"]\n')
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--no-progress", "--max-episodes", "40"]) == 0
    summary = pd.read_csv(out / "summary.csv").set_index("method")
    runs = {m: pd.read_csv(out / "cells" / f"method={m}" / "runs.csv") for m in ("frd", "independent")}
    expected = improvement_ci(runs["frd"]["mission_episodes"], runs["independent"]["mission_episodes"])
    assert tuple(summary.loc["frd", ["p_improvement", "p_improvement_lo", "p_improvement_hi"]]) == expected
    assert np.isfinite(expected[0]) and summary.loc["independent", ["p_improvement"]].isna().all()
    assert np.isnan(pd.read_csv(out / "cells" / "method=frd" / "summary.csv")["p_improvement"]).all()  # alone in its cell


# ---- classification ----

def test_a_classification_file_sweeps_methods_and_draws_accuracy_against_uplink(tmp_path, capsys):
    path = _write(tmp_path, 'domain = "cls"\ndataset = "digits"\nrounds = 2\ndevices = 3\nseeds = 1\n'
                            '[sweep]\nmethod = ["fl", "fd"]\niterations = [1, 2]\n')
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    out = tmp_path / "out"
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary.columns[:2]) == ["sweep_iterations", "method"]  # the summary's iterations are a run's total
    assert summary[["method", "sweep_iterations", "iterations"]].values.tolist() == [
        ["fl", 1, 2], ["fl", 2, 4], ["fd", 1, 2], ["fd", 2, 4]]
    for method, iterations in (("fl", 2), ("fd", 1)):
        cell = out / "cells" / f"method={method},iterations={iterations}"
        runs = pd.read_csv(cell / "runs.csv")
        row = summary.set_index(["method", "sweep_iterations"]).loc[(method, iterations)]
        assert row["accuracy_final_median"] == runs["accuracy"].median() and row["bits_up_total"] == runs["bits_up"].median()
        after = pd.read_csv(cell / "rounds.csv").query("phase == 'exchanged' and round >= 1 and device == 0")
        assert row["accuracy_best_median"] == after["accuracy"].max(), "one seed: its best round"
        assert row["best_round_median"] == after.loc[after["accuracy"].idxmax(), "round"]
        assert (cell / "accuracy.png").exists()
    assert {p.name for p in (out / "figures").iterdir()} == {
        f"{name}.{form}" for name in ("method", "iterations", "accuracy-vs-uplink", "frontier_final", "frontier_best")
        for form in ("png", "pdf")}
    printed = capsys.readouterr().out
    assert "device acc %, median [IQR]" in printed and "bits up/device/round" in printed
    assert "best acc %, median [IQR]" in printed and "best round, median" in printed


def test_accuracy_against_uplink_ends_at_the_runs_uplink(tmp_path):
    from frd.classification.methods import cls_config
    from frd.classification.sweep import accuracy_against_uplink
    from frd.results import ResultStore

    config = cls_config("fd", rounds=3, iterations_per_round=2, devices=3, seeds=1)
    get_domain("cls").run_experiment(config, tmp_path, progress=False, backend=LOCAL)
    store = ResultStore.existing(tmp_path)
    frame = accuracy_against_uplink(config, store).frame
    runs, rounds = store.read("runs"), store.read("rounds")
    exchanged = rounds[(rounds["phase"] == "exchanged") & (rounds["round"] >= 1)]["accuracy"].to_numpy()
    assert frame["x"].iloc[-1] == runs["bits_up"].iloc[0]  # one seed: every upload counted once
    assert np.array_equal(frame["y"].to_numpy(), exchanged) and frame["x"].is_monotonic_increasing

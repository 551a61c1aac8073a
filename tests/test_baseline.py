"""Any method against any method (issue 61, item 3): ``--baseline METHOD`` sets what
P(improvement) compares against in ``frd compare``, ``frd cls``, ``frd report`` and ``frd run``;
``frd report --pairwise`` sets every method against every other. A baseline that did not run is
one line, exit 2, nothing written. Hand-computed on tiny frames, then end to end on tiny runs."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import frd
from frd.classification.report import cls_summary, cls_table
from frd.cli import main
from frd.errors import FrdError
from frd.report import Cell, Summarised, across_methods, pairwise_table
from frd.rl.summary import rl_summary, rl_table
from frd.rl.sweep import COMPARISON
from frd.stats import improvement_ci
from tests.blank_figures import blank_rl_figures

P = ["p_improvement", "p_improvement_lo", "p_improvement_hi"]
RL = ["--agents", "2", "--seeds", "4", "--max-episodes", "30", "--period", "1", "--hidden", "8", "--target", "40",
      "--window", "3", "--no-progress"]
"""Missions of 6 to 30 episodes: the methods differ on some seeds."""
CLS = ["--dataset", "digits", "--rounds", "2", "--iterations", "2", "--devices", "3", "--seeds", "3", "--no-progress"]


@pytest.fixture(autouse=True)
def blank_cell_figures(monkeypatch):
    blank_rl_figures(monkeypatch)


def _runs(episodes: dict[str, list[int]]) -> pd.DataFrame:
    return pd.DataFrame([{"method": m, "seed": s, "n_agents": 2, "mission_episodes": e, "all_agents_episodes": np.nan}
                         for m, values in episodes.items() for s, e in enumerate(values)])


def _found(cell: Cell, runs: pd.DataFrame) -> Summarised:
    summary = pd.DataFrame({"method": list(dict.fromkeys(runs["method"])), "agents": 2})
    return Summarised(cell, summary, [], runs)


# ---- by hand ----

def test_rl_summary_compares_with_the_baseline_given():
    runs = _runs({"frd": [10, 20, 30], "pd": [15, 25, 35], "independent": [40, 50, 60]}).assign(
        completed=True, median_agent_episodes=np.nan, mission_env_steps=1, rounds=1, bits_up=1, bits_down=1,
        compute_s=1.0, comm_s=0.0)
    frd_row, pd_row, alone = rl_summary(runs, baseline="pd").to_dict("records")
    assert frd_row["baseline"] == "pd" and frd_row["p_improvement"] == 6 / 9  # 10 < 15, 25, 35; 20 < 25, 35; 30 < 35
    assert alone["p_improvement"] == 0 and np.isnan(pd_row["p_improvement"])  # the baseline's own row has none
    assert rl_summary(runs)["p_improvement"].tolist()[:2] == [1.0, 1.0]  # by default against independent
    assert "P(fewer episodes than pd) [95% CI]" in rl_table(rl_summary(runs, baseline="pd")).columns


def test_cls_summary_compares_final_accuracy_higher_is_better():
    runs = pd.DataFrame({"run_id": ["fl-seed0", "fl-seed1", "fd-seed0", "fd-seed1"], "seed": [0, 1, 0, 1],
                         "method": ["fl", "fl", "fd", "fd"], "dataset": "digits", "partition": "iid", "parameters": 1,
                         "iterations": 1, "accuracy": [0.6, 0.8, 0.7, 0.9], "local_accuracy": np.nan,
                         "global_accuracy": np.nan, "bits_up": 1, "bits_down": 1, "compute_s": 1.0, "comm_s": 0.0})
    rounds = pd.DataFrame({"run_id": runs["run_id"], "round": 1, "phase": "exchanged", "device": 0,
                           "accuracy": runs["accuracy"]})
    ledger = pd.DataFrame({"run_id": runs["run_id"], "round": 1, "direction": "up", "bits": 1})
    summary = cls_summary(runs, rounds, ledger, baseline="fl")
    assert summary.loc[1, "p_improvement"] == 3 / 4  # 0.7 > 0.6; 0.9 > 0.6, 0.8
    assert np.isnan(summary.loc[0, "p_improvement"]) and summary["baseline"].tolist() == ["fl", "fl"]
    assert cls_table(summary).loc[1, "P(higher final acc than fl) [95% CI]"].startswith("0.75 [")
    plain = cls_summary(runs, rounds, ledger)
    assert plain["p_improvement"].isna().all() and "P(higher final acc than fl) [95% CI]" not in cls_table(plain)


def test_a_report_compares_within_a_folder_and_across_cells_with_the_baseline_named():
    folder = _found(Cell("cmp", "rl", Path("."), {}), _runs({"frd": [10, 20, 30], "pd": [15, 25, 35],
                                                            "independent": [40, 50, 60]}))
    across_methods(COMPARISON, [folder], "pd")
    assert folder.summary["p_improvement"].tolist()[0] == 6 / 9 and folder.summary["baseline"].eq("pd").all()
    assert np.isnan(folder.summary["p_improvement"].tolist()[1]) and folder.summary["p_improvement"].tolist()[2] == 0
    # a sweep whose bundles choose the method: the baseline is named by the bundle, two of them run pd
    variant = frozenset({"variant"})
    cells = [_found(Cell("exp", "rl", Path("."), {"agents": 2, "variant": name}, variant), _runs({method: values}))
             for name, method, values in (("pd", "pd", [15, 25, 35]), ("pd steps", "pd", [10, 20, 30]),
                                          ("frd", "frd", [40, 5, 35]))]
    across_methods(COMPARISON, cells, "pd steps")
    assert cells[0].summary.loc[0, "p_improvement"] == 3 / 9  # 15 < 20, 30; 25 < 30
    assert np.isnan(cells[1].summary.loc[0, "p_improvement"])
    assert cells[2].summary.loc[0, "p_improvement"] == 3 / 9  # 5 < 10, 20, 30


def test_the_pairwise_table_is_every_method_against_every_other_of_its_group():
    runs = _runs({"frd": [10, 20, 30], "pd": [15, 20, 35], "frl": [5, 50, 30]})
    cells = [_found(Cell("cmp", "rl", Path("."), {}), runs)]
    pairs = pairwise_table(COMPARISON, cells, {("cmp", ()): {}})
    assert len(pairs) == 6 and list(pairs.columns[:2]) == ["method", "baseline"]
    p = pairs.set_index(["method", "baseline"])["p_improvement"]
    assert p["frd", "pd"] == (3 + 1.5 + 1) / 9  # 10 < 15, 20, 35; 20 = 20, 20 < 35; 30 < 35
    for a, b in (("frd", "pd"), ("frd", "frl"), ("pd", "frl")):  # ties count a half: the two directions add to 1
        assert p[a, b] + p[b, a] == pytest.approx(1)
    lo, hi = pairs.set_index(["method", "baseline"]).loc[("frd", "pd"), ["p_improvement_lo", "p_improvement_hi"]]
    assert (lo, hi) == improvement_ci(runs.query("method == 'frd'")["mission_episodes"],
                                      runs.query("method == 'pd'")["mission_episodes"])[1:]


# ---- end to end ----

@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    """``frd compare --baseline pd`` of three methods (figures blank)."""
    out = tmp_path_factory.mktemp("cmp") / "cmp"
    with pytest.MonkeyPatch.context() as patch:
        blank_rl_figures(patch)
        assert main(["compare", "--methods", "frd,pd,independent", *RL, "--baseline", "pd", "--out", str(out)]) == 0
    return out


def test_compare_baseline_writes_and_prints_p_against_it(compared):
    runs, summary = pd.read_csv(compared / "runs.csv"), pd.read_csv(compared / "summary.csv").set_index("method")
    episodes = {m: runs.loc[runs["method"] == m, "mission_episodes"] for m in ("frd", "pd", "independent")}
    expected = improvement_ci(episodes["frd"], episodes["pd"])
    assert tuple(summary.loc["frd", P]) == expected
    assert expected != improvement_ci(episodes["frd"], episodes["independent"]), "the data tell the baselines apart"
    assert tuple(summary.loc["independent", P]) == improvement_ci(episodes["independent"], episodes["pd"])
    assert summary["baseline"].eq("pd").all() and summary.loc["pd", P].isna().all()


def test_report_baseline_and_pairwise_of_a_compare_folder(compared, tmp_path, capsys):
    out = tmp_path / "R"
    assert main(["report", str(compared), "--baseline", "frd", "--pairwise", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    runs = pd.read_csv(compared / "runs.csv")
    episodes = {m: runs.loc[runs["method"] == m, "mission_episodes"] for m in ("frd", "pd", "independent")}
    summary = pd.read_csv(out / "summary.csv").set_index("method")
    assert tuple(summary.loc["pd", P]) == improvement_ci(episodes["pd"], episodes["frd"])
    assert "P(fewer episodes than frd) [95% CI]" in printed.splitlines()[0]
    pairs = pd.read_csv(out / "pairwise.csv").set_index(["method", "baseline"])
    assert len(pairs) == 6
    assert tuple(pairs.loc[("independent", "pd"), P]) == improvement_ci(episodes["independent"], episodes["pd"])
    assert "P(a run of the row's method: fewer episodes than one of the column's) [95% CI]" in printed
    assert printed.endswith(f"summary.csv, pairwise.csv and figures/ in {out}/\n")
    assert summary["baseline"].eq("frd").all()


@pytest.mark.parametrize("args, message", [
    (["--baseline", "a2c"], r"--baseline a2c: no such method ran here \(methods: frd, independent, pd\)$"),
    (["--baseline", "indepedent"], r"did you mean independent\?$"),
])
def test_a_baseline_that_did_not_run_is_one_line_and_writes_nothing(compared, args, message, tmp_path, capsys):
    before = {p: p.stat().st_mtime_ns for p in compared.rglob("*")}
    assert main(["report", str(compared), *args, "--out", str(tmp_path / "R")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(message, err.strip()), err
    assert not (tmp_path / "R").exists() and {p: p.stat().st_mtime_ns for p in compared.rglob("*")} == before
    assert main(["compare", "--methods", "frd,independent", *RL, *args, "--out", str(tmp_path / "C")]) == 2
    assert "--baseline" in capsys.readouterr().err and not (tmp_path / "C").exists()


def test_pairwise_needs_two_methods_side_by_side(tmp_path, capsys):
    assert main(["rl", "--method", "frd", *RL, "--seeds", "1", "--out", str(tmp_path / "one")]) == 0
    capsys.readouterr()
    assert main(["report", str(tmp_path / "one"), "--pairwise", "--out", str(tmp_path / "R")]) == 2
    assert "--pairwise: no two methods ran side by side here" in capsys.readouterr().err
    assert not (tmp_path / "R").exists()


def test_cls_baseline_and_a_bad_one(tmp_path, capsys):
    out = tmp_path / "cls"
    assert main(["cls", "--method", "fl,fd", *CLS, "--baseline", "fd", "--out", str(out)]) == 0
    assert "P(higher final acc than fd) [95% CI]" in capsys.readouterr().out
    runs, summary = pd.read_csv(out / "runs.csv"), pd.read_csv(out / "summary.csv").set_index("method")
    accuracy = {m: runs.loc[runs["method"] == m, "accuracy"] for m in ("fl", "fd")}
    assert tuple(summary.loc["fl", P]) == improvement_ci(accuracy["fl"], accuracy["fd"], lower_is_better=False)
    assert main(["report", str(out), "--out", str(tmp_path / "R")]) == 0  # no default baseline in classification
    assert pd.read_csv(tmp_path / "R" / "summary.csv")["p_improvement"].isna().all()
    assert main(["cls", "--method", "fl,fd", *CLS, "--baseline", "mix2fld", "--out", str(tmp_path / "bad")]) == 2
    assert "--baseline mix2fld: no such method ran here (methods: fl, fd)" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
    with pytest.raises(FrdError, match="--baseline pd: no such method ran here"):
        frd.classification.run(frd.cls_configs("fl", rounds=1, devices=2), out=tmp_path / "api", baseline="pd")
    assert not (tmp_path / "api").exists()


def test_an_experiment_run_compares_with_the_baseline_and_checks_it_first(tmp_path, capsys):
    file = tmp_path / "exp.toml"
    file.write_text('domain = "rl"\nagents = 2\nseeds = 3\nmax-episodes = 30\nperiod = 1\nhidden = 8\ntarget = 40\n'
                    'window = 3\n[sweep]\nmethod = ["frd", "pd"]\n')
    assert main(["run", str(file), "--baseline", "frl", "--out", str(tmp_path / "bad")]) == 2
    assert "--baseline frl: no such method ran here (methods: frd, pd)" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
    file.write_text(file.read_text().replace("seeds = 3\n", 'seeds = 3\nbaseline = "pd"\n'))
    assert main(["run", str(file), "--out", str(tmp_path / "bad")]) == 2
    assert "baseline is not a setting of the experiment: give --baseline to the command" in capsys.readouterr().err
    file.write_text(file.read_text().replace('baseline = "pd"\n', ""))
    out = tmp_path / "exp"
    assert main(["run", str(file), "--baseline", "pd", "--out", str(out), "--no-progress"]) == 0
    summary = pd.read_csv(out / "summary.csv").set_index("method")
    episodes = {m: pd.read_csv(out / "cells" / f"method={m}" / "runs.csv")["mission_episodes"] for m in ("frd", "pd")}
    assert tuple(summary.loc["frd", P]) == improvement_ci(episodes["frd"], episodes["pd"])
    assert summary.loc["pd", P].isna().all() and summary["baseline"].eq("pd").all()

"""``frd cls --method fl,fd``: several methods on the same seeds into one folder, one table and one
accuracy-vs-bits figure; each method's runs are those it gives alone, and a rerun resumes."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import frd
from frd.classification import runs as runs_module
from frd.classification.report import accuracy_bits_figure, accuracy_vs_bits, cls_summary
from frd.cli import main
from frd.domains import get_domain
from frd.report import report
from frd.results import ResultStore, ResumeKey

TINY = ["--dataset", "digits", "--rounds", "2", "--iterations", "2", "--devices", "3", "--seeds", "2", "--no-progress"]
TIMING = {"runs": "compute_s", "rounds": "compute_s", "summary": "compute_seconds"}
"""Wall-clock columns: the only ones that differ between two runs of one seed."""


def _part(out, table: str, rid: str) -> pd.DataFrame:
    return pd.read_csv(out / "parts" / table / f"{rid}.csv").drop(columns=TIMING.get(table, []))


def _csv(out, name: str) -> pd.DataFrame:
    return pd.read_csv(out / f"{name}.csv").drop(columns=TIMING.get(name, []))


def test_a_compare_gives_each_method_s_own_runs_one_table_and_resumes(tmp_path, capsys, monkeypatch):
    both = tmp_path / "fl+fd"
    assert main(["cls", "--method", "fl,fd", *TINY, "--out", str(both)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split() == ["method", "fl", "fd"] and printed[3].split() == ["seeds", "2", "2"]
    assert next(line for line in printed if line.startswith("total up bits")).split()[-1] == "19200"  # fd: 2 × 3 × 3200
    for name in ("accuracy_bits.png", "accuracy_bits.pdf", "accuracy.png", "accuracy.pdf"):
        assert (both / name).stat().st_size > 0
    for method in ("fl", "fd"):
        alone = tmp_path / method
        assert main(["cls", "--method", method, *TINY, "--out", str(alone)]) == 0
        for table in ("runs", "rounds", "ledger"):
            for seed in (0, 1):
                rid = f"{method}-seed{seed}"
                pd.testing.assert_frame_equal(_part(both, table, rid), _part(alone, table, rid), obj=f"{table} {rid}")
    for name in ("summary", "accuracy_bits"):  # the compare's rows are the single runs' rows, in the order asked for
        pd.testing.assert_frame_equal(_csv(both, name), pd.concat([_csv(tmp_path / m, name) for m in ("fl", "fd")],
                                                                  ignore_index=True), obj=name)
    summary = pd.read_csv(both / "summary.csv")
    assert summary["accuracy_final_median_lo"].notna().all(), "2 seeds: the median has an interval"

    def no_run(*args, **kwargs):
        raise AssertionError("a finished run was computed again")

    monkeypatch.setattr(runs_module, "run_seed", no_run)
    tables = {t: pd.read_csv(both / f"{t}.csv") for t in ("runs", "rounds", "ledger", "summary")}
    assert main(["cls", "--method", "fl,fd", *TINY, "--out", str(both)]) == 0
    for name, frame in tables.items():
        pd.testing.assert_frame_equal(pd.read_csv(both / f"{name}.csv"), frame, obj=name)
    assert main(["cls", "--method", "fd", *TINY, "--out", str(both)]) == 0, "one method of the folder resumes too"


def test_report_reads_a_multi_method_folder_and_names_a_folder_of_no_domain(tmp_path, capsys, monkeypatch):
    both = tmp_path / "fl+fd"
    assert main(["cls", "--method", "fl,fd", *TINY, "--out", str(both)]) == 0
    written = _csv(both, "summary")
    assert main(["report", str(both), "--out", str(tmp_path / "R")]) == 0
    pd.testing.assert_frame_equal(_csv(tmp_path / "R", "summary"), written)
    assert (tmp_path / "R" / "figures" / "accuracy-vs-uplink.png").exists()
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "config.json").write_text('{"config": {"steps": 3}}')
    with pytest.raises(frd.FrdError, match=r"foreign/config.json is the config of no installed domain \(.*rl: not an RL config"):
        report([foreign], tmp_path / "R2")

    def broken(values):
        raise KeyError("a bug")

    monkeypatch.setattr(get_domain("cls"), "config_from_dict", broken)
    with pytest.raises(KeyError, match="a bug"):  # a bug keeps its traceback, not read as "no domain"
        report([both], tmp_path / "R3")


@pytest.mark.parametrize("methods, message", [
    ("fedprox", "unknown classification method 'fedprox'; choose one of fl, fd, "),
    ("fl,fedprox", "unknown classification method 'fedprox'"),
    ("fl,,fd", "unknown classification method ''"),
    ("fl,fd,fl", "fl listed twice in fl,fd,fl: each method runs once per seed"),
])
def test_a_bad_method_list_is_one_line_and_writes_nothing(methods, message, tmp_path, capsys):
    assert main(["cls", "--method", methods, *TINY, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_the_api_refuses_a_bad_list_or_configs_that_differ_but_in_the_method(tmp_path):
    with pytest.raises(frd.FrdError, match="unknown classification method 'magic'"):
        frd.cls_configs("fl,magic")
    with pytest.raises(frd.FrdError, match="--n-mix is an option of fld, mixfld, mix2fld, not of fl, fd"):
        frd.cls_configs("fl,fd", n_mix=3)
    differing = (frd.cls_config("fl", rounds=1), frd.cls_config("fd", rounds=2, lr=0.1))
    with pytest.raises(frd.FrdError, match="^fl and fd differ in rounds, lr: the methods of one experiment share"):
        frd.classification.run(differing, out=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_folder_written_before_compares_resumes(tmp_path):
    """Before, the one method of a folder was also a common field of its resume key."""
    key = frd.cls_config("fd", rounds=2).resume_key()
    assert "method" not in key.common
    ResultStore(tmp_path, {}, ResumeKey({**key.common, "method": "fd"}, key.methods))  # as an older frd wrote it
    ResultStore(tmp_path, {}, key)
    other = frd.cls_config("fd", rounds=3).resume_key()
    with pytest.raises(frd.FrdError, match=r"different experiment \(rounds: 2 → 3\)"):
        ResultStore(tmp_path, {}, other)


def test_accuracy_against_bits_by_hand_and_as_drawn():
    runs = pd.DataFrame({"run_id": ["fl-seed0", "fl-seed1", "feddualmatch-seed0"],
                         "method": ["fl", "fl", "feddualmatch"], "rounds": 2})
    exchanged = [("fl-seed0", 1, 0, 0.5), ("fl-seed0", 2, 0, 0.7), ("fl-seed0", 2, -1, 0.1),
                 ("fl-seed1", 1, 0, 0.3), ("fl-seed1", 2, 0, 0.9), ("fl-seed1", 0, 0, 0.05),
                 ("feddualmatch-seed0", 1, -1, 0.6), ("feddualmatch-seed0", 2, -1, 0.65)]
    rounds = pd.DataFrame(exchanged, columns=["run_id", "round", "device", "accuracy"]).assign(phase="exchanged")
    local = pd.DataFrame({"run_id": "fl-seed0", "round": 2, "device": 0, "accuracy": 0.99, "phase": "local"}, index=[0])
    ledger = pd.DataFrame([("fl-seed0", 1, "up", 100), ("fl-seed0", 1, "up", 100), ("fl-seed0", 2, "up", 200),
                           ("fl-seed0", 1, "down", 50), ("fl-seed1", 0, "up", 10), ("fl-seed1", 1, "up", 200),
                           ("fl-seed1", 2, "up", 200), ("feddualmatch-seed0", 1, "up", 30),
                           ("feddualmatch-seed0", 2, "down", 40)], columns=["run_id", "round", "direction", "bits"])
    curves = accuracy_vs_bits(runs, pd.concat([rounds, local]), ledger)
    expected = pd.DataFrame({
        "method": ["fl", "fl", "feddualmatch", "feddualmatch"], "model": ["device", "device", "global", "global"],
        "round": [1, 2, 1, 2], "runs": [2, 2, 1, 1],
        "bits_up_cumulative": [205.0, 405.0, 30.0, 30.0],  # fl: (200 + 210) / 2, (400 + 410) / 2; setup included
        "bits_down_cumulative": [25.0, 25.0, 0.0, 40.0],
        "accuracy_median": [0.4, 0.8, 0.6, 0.65], "accuracy_min": [0.3, 0.7, 0.6, 0.65],
        "accuracy_max": [0.5, 0.9, 0.6, 0.65]})
    pd.testing.assert_frame_equal(curves, expected)
    ax = accuracy_bits_figure(curves, "digits (iid)").axes[0]
    assert ax.get_xscale() == "log" and [t.get_text() for t in ax.get_legend().get_texts()] == [
        "fl", "feddualmatch (global model)"]
    for line, (_, curve) in zip(ax.get_lines(), curves.groupby("method", sort=False)):
        assert np.array_equal(line.get_xdata(), curve["bits_up_cumulative"])
        assert np.array_equal(line.get_ydata(), curve["accuracy_median"])
    band, = ax.collections  # fl's two seeds; feddualmatch's one seed has none
    assert np.allclose(band.get_paths()[0].vertices[:, 1].min(), 0.3)
    assert "median of 2 seed(s), band: lowest–highest seed" in ax.get_title()


def test_accuracy_against_bits_shows_medians_as_the_summary_does():
    """Three seeds whose mean (0.4) is not their median (0.2): the curve's last point is the
    summary's final accuracy, and its title says median."""
    ids = [f"fl-seed{s}" for s in range(3)]
    runs = pd.DataFrame({"run_id": ids, "method": "fl", "dataset": "digits", "partition": "iid", "parameters": 1,
                         "iterations": 1, "rounds": 1, "accuracy": [0.1, 0.2, 0.9], "local_accuracy": np.nan,
                         "global_accuracy": np.nan, "bits_up": [10, 20, 90], "bits_down": 0, "compute_s": 1.0,
                         "comm_s": 0.0})
    rounds = pd.DataFrame({"run_id": ids, "round": 1, "phase": "exchanged", "device": 0, "accuracy": [0.1, 0.2, 0.9]})
    ledger = pd.DataFrame({"run_id": ids, "round": 1, "direction": "up", "bits": [10, 20, 90]})
    curve = accuracy_vs_bits(runs, rounds, ledger).iloc[-1]
    assert (curve["accuracy_median"], curve["bits_up_cumulative"]) == (0.2, 20)
    assert curve["accuracy_median"] == cls_summary(runs, rounds, ledger).iloc[0]["accuracy_final_median"]
    ax = accuracy_bits_figure(accuracy_vs_bits(runs, rounds, ledger), "digits").axes[0]
    assert "median of 3 seed(s)" in ax.get_title()

"""``frd eval --run ID`` (issue 61): one run's saved models scored alone, in a results folder, a
multi-method folder, an experiment record and a classification folder; an id naming no finished
run is one line, exit 2, nothing written, naming ids that exist (tiny budgets)."""
from __future__ import annotations

import json

import pandas as pd
import pytest

import frd.rl.experiment as experiment
from frd.cli import main
from frd.errors import FrdError
from frd.saved import EvalRequest, evaluate

RL = ["--agents", "2", "--max-episodes", "4", "--period", "2", "--hidden", "8", "--no-progress"]
CLS = ["cls", "--dataset", "digits", "--rounds", "1", "--iterations", "1", "--devices", "3", "--no-progress"]


@pytest.fixture(autouse=True)
def no_figures(monkeypatch):
    """These tests read tables and models; the figures (tested elsewhere) would cost seconds."""
    for target in ("plot_mission", "plot_payload"):
        monkeypatch.setattr(experiment, target, lambda *args, **kwargs: None)
    monkeypatch.setattr("frd.classification.report.plot_accuracy", lambda *args, **kwargs: None)


def _refused(args: list[str], capsys) -> str:
    capsys.readouterr()
    assert main(args) == 2, args
    err = capsys.readouterr().err
    assert err.startswith("frd: error:") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_run_scores_that_run_alone_of_a_multi_method_folder(tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", "--methods", "frd,pd", "--seeds", "2", *RL, "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["eval", str(out), "--run", "pd-seed1", "--episodes", "2"]) == 0
    printed = capsys.readouterr().out
    rows = pd.read_csv(out / "eval.csv")
    assert rows["run_id"].tolist() == ["pd-seed1", "pd-seed1"] and rows["agent"].tolist() == [0, 1]
    assert "pd-seed1" in printed and "frd-seed0" not in printed
    every, _ = evaluate(out, EvalRequest(episodes=2))  # the same run's rows among all four runs'
    assert sorted(every["run_id"].unique()) == ["frd-seed0", "frd-seed1", "pd-seed0", "pd-seed1"]
    pd.testing.assert_frame_equal(rows, every[every["run_id"] == "pd-seed1"].reset_index(drop=True), check_dtype=False)


def test_a_run_naming_no_run_is_one_line_naming_some_that_exist_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "rl"
    assert main(["rl", "--method", "frd", "--seeds", "2", *RL, "--out", str(out)]) == 0
    err = _refused(["eval", str(out), "--run", "frd-s1"], capsys)
    assert err == f"frd: error: --run frd-s1 names no finished run of {out}; it holds frd-seed1, frd-seed0\n"
    assert not (out / "eval.csv").exists()
    with pytest.raises(FrdError, match=r"--run pd-seed0 names no finished run of .*; it holds frd-seed0, frd-seed1$"):
        evaluate(out, EvalRequest(run="pd-seed0"))
    manifest = out / "parts" / "manifest" / "frd-seed1.json"  # finished, but no models (as an older frd saved it)
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "files": {}}))
    (out / "models" / "frd-seed1.pt").unlink()
    with pytest.raises(FrdError, match=r"run frd-seed1 of .* saved no models \(models/frd-seed1.pt\)"):
        evaluate(out, EvalRequest(run="frd-seed1"))
    assert not (out / "eval.csv").exists()


def test_a_long_list_of_runs_is_cut_short_with_its_count():
    from frd.saved import _some

    ids = [f"frd-seed{s}" for s in range(12)]
    assert _some("frd-seed7x", ids) == ("; it holds frd-seed7, frd-seed9, frd-seed8, frd-seed0, frd-seed1, … "
                                        "(12 runs)")
    assert _some("x", []) == "; it holds no finished runs yet"


def test_run_of_an_experiment_record_scores_it_in_every_cell_that_holds_it(tmp_path, capsys):
    record = tmp_path / "sweep"
    assert main(["rl", "--method", "frd", "--grid", "5,10", "--seeds", "2", *RL, "--out", str(record)]) == 0
    capsys.readouterr()
    assert main(["eval", str(record), "--run", "frd-seed1", "--episodes", "2"]) == 0
    combined = pd.read_csv(record / "eval.csv")
    assert combined["grid"].tolist() == [5, 5, 10, 10] and set(combined["run_id"]) == {"frd-seed1"}
    for grid in (5, 10):
        assert set(pd.read_csv(record / "cells" / f"grid={grid}" / "eval.csv")["run_id"]) == {"frd-seed1"}
    for path in record.rglob("eval.csv"):
        path.unlink()
    err = _refused(["eval", str(record), "--run", "frd-seed2"], capsys)
    assert f"--run frd-seed2 names no finished run in any cell of {record}; it holds frd-seed1, frd-seed0\n" in err
    assert not list(record.rglob("eval.csv"))


def test_run_of_a_classification_folder_tests_that_runs_model(tmp_path, capsys):
    out = tmp_path / "cls"
    assert main([*CLS, "--method", "fl", "--seeds", "2", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["eval", str(out), "--run", "fl-seed1"]) == 0
    rows = pd.read_csv(out / "eval.csv")
    assert rows[["run_id", "model"]].values.tolist() == [["fl-seed1", "global"]]
    runs = pd.read_csv(out / "runs.csv").set_index("run_id")
    assert rows["accuracy"].iloc[0] == runs.loc["fl-seed1", "global_accuracy"]  # the same test, the same weights
    assert "--run fl-seed5 names no finished run" in _refused(["eval", str(out), "--run", "fl-seed5"], capsys)

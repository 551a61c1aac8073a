"""A resumed experiment says so (issue 61): rerunning the same command on the same --out prints
"k of n runs already done" once on stderr, in both domains, and nothing the first time or with
--no-progress (tiny budgets)."""
from __future__ import annotations

import pytest

import frd.rl.experiment as experiment
from frd.cli import main
from frd.results import resumed

RL = ["rl", "--method", "frd", "--agents", "2", "--max-episodes", "2", "--period", "1", "--hidden", "8"]
CLS = ["cls", "--method", "fl", "--dataset", "digits", "--rounds", "1", "--iterations", "1", "--devices", "3"]


@pytest.fixture(autouse=True)
def no_figures(monkeypatch):
    """These tests read stderr; the figures (tested elsewhere) would cost seconds."""
    for target in ("plot_mission", "plot_payload"):
        monkeypatch.setattr(experiment, target, lambda *args, **kwargs: None)
    monkeypatch.setattr("frd.classification.report.plot_accuracy", lambda *args, **kwargs: None)


def _notes(args: list[str], capsys) -> list[str]:
    """The lines ``frd`` wrote on stderr that are its own (not the progress bar's)."""
    assert main(args) == 0, args
    err = capsys.readouterr().err.replace("\r", "\n")
    return [line for line in err.splitlines() if line.startswith("frd:")]


def test_the_resume_line_counts_what_is_done_and_what_is_left():
    assert resumed(0, 3, "out") is None
    assert resumed(2, 3, "out") == "frd: 2 of 3 runs already done in out; running the other 1"
    assert resumed(3, 3, "out") == "frd: 3 of 3 runs already done in out; nothing to run"


@pytest.mark.parametrize("command, first, more", [(RL, 2, 3), (CLS, 1, 2)], ids=["rl", "cls"])
def test_a_rerun_says_once_how_many_runs_are_already_done(command, first, more, tmp_path, capsys):
    out = str(tmp_path / "out")
    assert _notes([*command, "--seeds", str(first), "--out", out], capsys) == []  # nothing to resume
    assert _notes([*command, "--seeds", str(more), "--out", out], capsys) == [
        f"frd: {first} of {more} runs already done in {out}; running the other {more - first}"]
    assert _notes([*command, "--seeds", str(more), "--out", out], capsys) == [
        f"frd: {more} of {more} runs already done in {out}; nothing to run"]
    assert _notes([*command, "--seeds", str(more), "--out", out, "--no-progress"], capsys) == []


def test_only_the_runs_of_the_command_count(tmp_path, capsys):
    """A folder gathering methods: pd's runs are no part of a rerun of frd alone."""
    out = str(tmp_path / "out")
    tiny = ["--agents", "2", "--max-episodes", "2", "--period", "1", "--hidden", "8", "--seeds", "2", "--out", out]
    assert _notes(["compare", "--methods", "frd,pd", *tiny], capsys) == []
    assert _notes(["rl", "--method", "frd", *tiny], capsys) == [f"frd: 2 of 2 runs already done in {out}; nothing to run"]

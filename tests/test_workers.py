"""``--workers N``: the local backend's runs over worker processes of this machine give the tables
of one batch, a worker's failure reaches the driver (one line for bad input, the traceback for a
bug), and no worker outlives frd, however it ends (tiny budgets throughout)."""
from __future__ import annotations

import pandas as pd
import pytest

from frd import reaper
from frd.cli import main
from frd.errors import FrdError
from frd.workers import in_processes
from tests.processes import command_line, kill_9, left_after, start_frd, wait_for
from tests.test_backends import TINY, _assert_same_tables
from tests.worker_groups import dies, has_a_bug, refuses

pytestmark = pytest.mark.processes  # every test here starts processes (pytest -m 'not processes' skips them)


def test_rl_and_classification_over_two_workers_give_the_tables_of_one_batch(tmp_path):
    rl = ["compare", "--methods", "frd,frl", "--seeds", "2", *TINY]
    cls = ["cls", "--method", "fl", "--dataset", "digits", "--rounds", "2", "--iterations", "2", "--devices", "3",
           "--seeds", "2", "--no-progress"]
    for name, command in (("rl", rl), ("cls", cls)):
        assert main([*command, "--out", str(tmp_path / name / "one")]) == 0
        assert main([*command, "--workers", "2", "--out", str(tmp_path / name / "two")]) == 0
    _assert_same_tables(tmp_path / "rl" / "one", tmp_path / "rl" / "two")
    for table in ("runs", "rounds", "ledger"):
        one, two = (pd.read_csv(tmp_path / "cls" / d / f"{table}.csv").drop(columns="compute_s", errors="ignore")
                    for d in ("one", "two"))
        pd.testing.assert_frame_equal(one, two, obj=table)


@pytest.mark.parametrize("group, error, match", [
    (refuses, FrdError, r"^bad input in group \['b'\]$"),
    (has_a_bug, RuntimeError, r"a worker process failed:\n(.|\n)*ValueError: a bug"),
    (dies, RuntimeError, r"worker process \d+ died \(exit code 3\)"),
])
def test_a_workers_failure_reaches_the_driver(group, error, match):
    got = []
    with pytest.raises(error, match=match):
        for item in in_processes(group, None, None, [["a"], ["b"]], lambda text: None):
            got.append(item)
    assert group is not refuses or (1, 0, "b") in got  # what a group finished before it failed arrived


def test_no_worker_outlives_frd_killed_9(tmp_path):
    log = tmp_path / "frd.log"
    sweep = start_frd(["compare", "--methods", "frd,pd", "--seeds", "2", *TINY, "--max-episodes", "1000000",
                       "--workers", "2", "--out", str(tmp_path / "out")], log)

    def workers() -> list[int]:
        return [pid for pid, _ in reaper.descendants(sweep.pid) if "--multiprocessing-fork" in command_line(pid)]

    wait_for(lambda: len(workers()) == 2, sweep, log, "two worker processes")
    below = kill_9(sweep)
    assert not left_after(below)


@pytest.mark.parametrize("flags, match", [
    (["--workers", "0"], "--workers must be at least 1, got 0"),
    (["--workers", "2", "--backend", "ray"], "--workers splits the local backend's runs over processes"),
])
def test_bad_workers_are_one_line_and_nothing_written(flags, match, tmp_path, capsys):
    assert main(["rl", *TINY, *flags, "--out", str(tmp_path / "out")]) == 2
    assert match in capsys.readouterr().err and not (tmp_path / "out").exists()

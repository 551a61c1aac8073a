"""A command line meant for another command (issue 61): ``frd rl --method frd,pd`` points to
``frd compare --methods``, and an unknown flag that another frd command has names that command;
each one line, exit 2, nothing written."""
from __future__ import annotations

import pytest

from frd.cli import build_parser
from tests.test_bad_flags import _refused


@pytest.mark.parametrize("method, fix", [
    ("frd,pd", "for several on the same seeds: frd compare --methods frd,pd"),
    ("frd, pd,frl", "for several on the same seeds: frd compare --methods frd,pd,frl"),
    ("frd,", "did you mean --method frd?"),
])
def test_rl_with_a_method_list_points_to_compare(method, fix, tmp_path, capsys):
    err = _refused(["rl", "--method", method, "--max-episodes", "2"], tmp_path, capsys)
    assert err == f"frd: error: frd rl runs one method, got --method {method}; {fix}\n"


def test_an_unknown_method_is_still_named_as_such(tmp_path, capsys):
    assert "unknown RL method 'frdd'" in _refused(["rl", "--method", "frdd"], tmp_path, capsys)


@pytest.mark.parametrize("args, expected", [
    (["rl", "--rounds", "3"], "unknown flag --rounds; --rounds is a flag of frd cls (see --help)"),
    (["compare", "--devices=3"], "unknown flag --devices; --devices is a flag of frd cls (see --help)"),
    (["cls", "--max-episodes", "3"], "unknown flag --max-episodes; --max-episodes is a flag of frd rl, frd compare"),
    (["rl", "--seed", "1"], "did you mean --seeds or --first-seed? --seed is a flag of frd eval (see --help)"),
    (["compare", "--method", "frd"], "did you mean --methods? --method is a flag of frd cls, frd rl (see --help)"),
    (["rl", "--rounds", "3", "--grid", "5,10"], "unknown flag --rounds; --rounds is a flag of frd cls"),  # a sweep
    (["flower", "sim", "--method", "frd", "--rounds", "3"], "--rounds is a flag of frd cls"),
    (["rl", "--bogus", "3"], "unknown flag --bogus (see --help)"),  # nobody's: nothing added
])
def test_an_unknown_flag_of_another_command_names_it(args, expected, tmp_path, capsys):
    assert expected in _refused(args, tmp_path, capsys)


def test_a_command_is_not_named_for_its_own_flags_and_every_command_is_known():
    parser = build_parser()
    owners = parser.owners
    assert owners["--rounds"] == ["frd cls"] and owners["--port"] == ["frd flower link", "frd flower node"]
    assert "frd eval" in owners["--run"] and "--help" not in owners
    rl = next(a for a in parser._actions if hasattr(a, "choices") and a.choices and "rl" in a.choices).choices["rl"]
    assert rl.owners is owners and rl._elsewhere("--seeds", "m") == "m; --seeds is a flag of frd cls, frd compare"

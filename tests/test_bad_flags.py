"""Every flag of every command, fed a malformed value, gets exit code 2 and one line on stderr,
never a traceback, and writes nothing."""
from __future__ import annotations

import argparse

import pytest

from frd.cli import build_parser, main

COMMANDS = {"rl": ["--method", "frd"], "compare": [], "cls": []}
"""Each command, with the method that owns the most flags (compare runs all four RL methods)."""

FREE_TEXT = {"--out", "--data-dir", "--tensorboard"}
"""Flags whose value is any path: nothing to malform."""


def _flags(command: str) -> list[argparse.Action]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return [a for a in sub.choices[command]._actions
            if a.option_strings and a.nargs != 0 and a.option_strings[0] not in FREE_TEXT | {"--help"}]


WRONG_TYPE = [(command, action.option_strings[0]) for command in COMMANDS for action in _flags(command)]

OUT_OF_RANGE = [
    ("rl", "--agents", "0"), ("rl", "--seeds", "-1"), ("rl", "--first-seed", "-1"), ("rl", "--hidden", "0"),
    ("rl", "--max-episodes", "0"), ("rl", "--period", "0"), ("rl", "--window", "0"), ("rl", "--threads", "0"),
    ("rl", "--target", "nan"), ("rl", "--grid", "0"), ("rl", "--grid-bounds", "1,0"),
    ("rl", "--grid-bounds", "-1,1;-2,2"), ("rl", "--grid-bounds", "-1,1,3;0,1;0,1;0,1"),
    ("rl", "--agent-spec", "h=0"), ("rl", "--agent-spec", "h=32,width=3"), ("rl", "--agent-spec", "h=8;lr=-1"),
    ("rl", "--agent-spec", "recipe=ppo"), ("rl", "--agent-spec", "h=8;"), ("rl", "--init", "fresh"),
    ("rl", "--agents-per-round", "0"), ("rl", "--agents-per-round", "3"), ("rl", "--fraction", "0"),
    ("rl", "--fraction", "1.5"), ("compare", "--fraction 0.5 --agents-per-round", "1"),
    ("compare", "--agent-spec", "h=8;h=16"),
    ("rl", "--distill-epochs", "0"), ("rl", "--distill-batch", "0"), ("rl", "--distill-lr", "0"),
    ("rl", "--proxy-layout", "zip"), ("rl", "--frd-weighting", "median"), ("compare", "--frl-critic", "maybe"),
    ("rl", "--channel-opt", "p_up_dbm=3"), ("rl", "--channel", "wireless --channel-opt p_up_dbm=loud"),
    ("rl", "--channel", "wireless --channel-opt bogus=1"), ("rl", "--channel", "wireless --channel-opt fading=2"),
    ("rl", "--channel", "wireless --channel-opt n_channels=2.5"), ("rl", "--channel", "wireless --channel-opt t_max_s=inf"),
    ("cls", "--devices", "0"), ("cls", "--rounds", "0"), ("cls", "--iterations", "0"), ("cls", "--batch-size", "0"),
    ("cls", "--lr", "0"), ("cls", "--alpha", "0"), ("cls", "--seeds", "0"), ("cls", "--threads", "0"),
    ("cls", "--width", "0"), ("cls", "--samples-per-device", "0"), ("cls", "--min-samples", "-1"),
    ("cls", "--minority-labels", "-1"), ("cls", "--test-fraction", "1.5"), ("cls", "--split-seed", "-1"),
    ("cls", "--reference-device", "99"), ("cls", "--method fd --beta", "-1"), ("cls", "--method feddm --ipc", "0"),
    ("cls", "--method feddm --distill-iterations", "0"), ("cls", "--method feddm --server-epochs", "-1"),
    ("cls", "--method feddm --dp-noise", "-1"), ("cls", "--method feddm --dp-clip", "0"),
    ("cls", "--method feddm --distill-preset", "gpu"), ("cls", "--method mixfld --gamma", "0.7"),
    ("cls", "--method fld --n-mix", "0"), ("cls", "--method mix2fld --n-inv", "0"), ("cls", "--method mix2fld --n-s", "1"),
    ("cls", "--method fld --server-iterations", "-1"), ("cls", "--method fld --server-lr", "0"),
    ("cls", "--channel", "wireless --channel-opt preset=loud"),
]


def _refused(args: list[str], tmp_path, capsys) -> str:
    out = tmp_path / "out"
    assert main([*args, "--out", str(out)]) == 2, args
    err = capsys.readouterr().err
    assert err.startswith("frd: error:") and err.count("\n") == 1 and "Traceback" not in err, err
    assert not out.exists(), "bad input writes nothing"
    return err


@pytest.mark.parametrize("command, flag", WRONG_TYPE)
def test_every_flag_refuses_a_value_of_the_wrong_type(command, flag, tmp_path, capsys):
    _refused([command, *COMMANDS[command], flag, "1,2;x!"], tmp_path, capsys)


@pytest.mark.parametrize("command, flag, value", OUT_OF_RANGE)
def test_values_out_of_range_or_of_the_wrong_shape_are_refused(command, flag, value, tmp_path, capsys):
    err = _refused([command, *COMMANDS[command], *flag.split(), value], tmp_path, capsys)
    assert flag.split()[-1] in err or "channel" in err or "gymnasium" in err, err

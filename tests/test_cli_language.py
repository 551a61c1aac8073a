"""One CLI language: the same flag for the same idea in ``rl``/``compare`` and ``cls``, no
abbreviated flags (an unknown or partial flag is one line naming the flags meant), every accepted
choice in the help, and method options named in the help like the other flags."""
from __future__ import annotations

import argparse
import typing
from dataclasses import fields

import pytest

from frd.channel import CHANNELS
from frd.classification.config import ClsConfig
from frd.classification.methods import CLS_METHODS
from frd.cli import build_parser, main, unknown_flag
from frd.rl.config import RLConfig
from frd.rl.methods import RL_METHODS

EXPERIMENTS = ("rl", "compare", "cls")


def _subcommands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every command's parser by its words (``("flower", "link")``)."""
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[(*prefix, name)] = sub
                found.update(_subcommands(sub, (*prefix, name)))
    return found


COMMANDS = _subcommands(build_parser())


def _help(*words: str) -> str:
    """A command's help, its wrapped lines joined."""
    return " ".join(COMMANDS[words].format_help().split())


def _refused(args: list[str], capsys) -> str:
    assert main(args) == 2, args
    err = capsys.readouterr().err
    assert err.startswith("frd: error:") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("command", EXPERIMENTS)
def test_seed_is_no_abbreviation_of_seeds_but_an_error_naming_both_seed_flags(command, tmp_path, capsys):
    err = _refused([command, "--seed", "1", "--out", str(tmp_path / "out")], capsys)
    assert "unknown flag --seed; did you mean --seeds or --first-seed" in err, err
    assert not (tmp_path / "out").exists()


def test_the_unknown_flag_is_named_before_a_missing_out(capsys):
    assert "unknown flag --max-episode; did you mean --max-episodes?" in _refused(["rl", "--max-episode", "30"], capsys)


@pytest.mark.parametrize("words", sorted(COMMANDS), ids=" ".join)
def test_no_command_takes_a_flag_cut_short(words, tmp_path, capsys):
    """What argparse used to read as the whole flag (``--max-episode`` as ``--max-episodes``)."""
    parser = COMMANDS[words]
    parser = parser.delegate([]) if getattr(parser, "delegate", None) else parser  # flower sim/run: cls's flags
    options = parser._option_string_actions
    cut = sorted({flag[:-1] for flag in options if flag.startswith("--") and flag[:-1] not in options})
    for flag in cut:  # the command's own parser, as ``frd`` hands it the words after its name
        with pytest.raises(SystemExit, match="2"):
            parser.parse_args([flag, "1", "--out", str(tmp_path / "out")])
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"unknown flag {flag}; did you mean {flag}" in err, err


@pytest.mark.parametrize("args, suggestion", [
    (["flower", "sim", "--method", "frd", "--seed", "2"], "did you mean --seeds or --first-seed?"),
    (["flower", "link", "--prot", "9"], "did you mean --port?"),
    (["export", "tensorboard", "dir", "--log", "x"], "did you mean --logdir?"),
    (["compare", "--method", "frd"], "did you mean --methods?"),
    (["cls", "--method", "feddm", "--init", "noise"], "did you mean --synthetic-init?"),  # rl's --init: weights
    (["rl", "--hiden", "8"], "did you mean --hidden?"),
    (["rl", "--seed=1"], "did you mean --seeds or --first-seed?"),
    (["--bogus", "rl"], "unknown flag --bogus (see --help)"),
    (["rl", "-s", "1"], "unknown flag -s (see --help)"),
])
def test_an_unknown_flag_is_one_line_with_the_flags_it_may_mean(args, suggestion, capsys):
    assert suggestion in _refused(args, capsys)


def test_suggestions_come_from_prefixes_spellings_and_words():
    flags = ["--seeds", "--first-seed", "--split-seed", "--out", "--groups", "--cpus"]
    assert unknown_flag("--seed", flags) == "unknown flag --seed; did you mean --seeds or --first-seed or --split-seed?"
    assert unknown_flag("--bogus", flags) == "unknown flag --bogus"


def test_a_negative_number_is_a_value_not_a_flag(capsys):
    err = _refused(["rl", "--first-seed", "-1", "--out", "x"], capsys)
    assert "--first-seed must be at least 0, got -1" in err


def test_seeds_and_out_are_one_idea_with_one_name_and_default_in_rl_and_cls(capsys):
    from frd.classification.cli import config_from_args as cls_from_args
    from frd.rl.cli import config_from_args as rl_from_args

    parser = build_parser()
    rl = rl_from_args(parser.parse_args(["rl", "--out", "x"]), ("frd",))
    cls = cls_from_args(parser.parse_args(["cls", "--out", "x"]))
    assert (rl.seeds, rl.first_seed) == (cls.seeds, cls.first_seed) == (20, 0)
    for command in EXPERIMENTS:
        assert "--out DIR results folder, required (rerun the same command to resume)" in _help(command)
        assert "--first-seed FIRST_SEED" in _help(command) and "(default 20)" in _help(command)
        assert "required: --out" in _refused([command], capsys)


def test_cls_runs_from_its_first_seed_which_is_no_part_of_the_resume_key(tmp_path):
    import pandas as pd

    tiny = ["cls", "--seeds", "1", "--rounds", "1", "--iterations", "2", "--devices", "3", "--no-progress"]
    assert main([*tiny, "--first-seed", "3", "--out", str(tmp_path)]) == 0
    assert main([*tiny, "--first-seed", "4", "--out", str(tmp_path)]) == 0  # the same experiment, one seed more
    assert sorted(pd.read_csv(tmp_path / "runs.csv")["run_id"]) == ["fl-seed3", "fl-seed4"]


@pytest.mark.parametrize("words", [("rl",), ("compare",), ("cls",)])
def test_help_lists_every_channel(words):
    text = _help(*words)
    for channel in CHANNELS:
        assert channel in text.replace("{", ",").replace("}", ",").split(","), channel


def test_rl_help_lists_every_choice_the_config_accepts():
    text = _help("rl")
    for f in fields(RLConfig):
        for choice in f.metadata.get("choices", ()):
            assert choice in text, (f.name, choice)
    assert "{tanh,relu}" in text and "{nstep,rlcode}" in text and "{shared,separate}" in text and "{first,all}" in text


@pytest.mark.parametrize("command, registry", [("rl", RL_METHODS), ("cls", CLS_METHODS)])
def test_method_options_read_like_the_other_flags(command, registry):
    text = _help(command)
    assert "OPTION:" not in text
    for klass in registry.values():
        hints = typing.get_type_hints(klass.Options)
        for f in fields(klass.Options):
            kind = next((a for a in typing.get_args(hints[f.name]) if a is not type(None)), hints[f.name])
            if typing.get_origin(kind) is typing.Literal:  # every choice, as argparse shows a flag's choices
                assert "{" + ",".join(typing.get_args(kind)) + "}" in text, f.name
    if command == "rl":
        assert "--grid S " in text and "--distill-epochs DISTILL_EPOCHS" in text and "--frl-critic [yes|no]" in text
    else:
        assert "--synthetic-init {real,noise}" in text and "--init " not in text and "--beta BETA" in text


def test_cls_and_rl_configs_share_the_seed_fields():
    assert {"seeds", "first_seed"} <= {f.name for f in fields(ClsConfig)} & {f.name for f in fields(RLConfig)}
    assert ClsConfig.seeds == RLConfig.seeds and ClsConfig.first_seed == RLConfig.first_seed

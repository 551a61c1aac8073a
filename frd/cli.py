"""The ``frd`` command. Each installed domain (``frd.domains``) adds its own subcommands (its
experiment command, named like it, also sweeps: ``frd.sweep``), then ``frd run``, ``frd report``,
``frd flower``, ``frd export`` and ``frd eval`` are added; errors print as one line."""
from __future__ import annotations

import argparse
import signal
import sys
from typing import Any, Callable, Mapping, NoReturn, Sequence

from frd import plugins, report, sweep
from frd.domains import domains
from frd.errors import FrdError
from frd.experiment_file import unknown_flag
from frd.flower import cli as flower_cli
from frd.saved import register as register_eval
from frd.tensorboard import register as register_export


class _Parser(argparse.ArgumentParser):
    """One-line errors, no abbreviated flags (``--seed 1`` is an error naming ``--seeds`` and
    ``--first-seed``, not ``--seeds 1``); a subcommand whose flags depend on its arguments sets
    ``delegate``, which picks the parser for them (``frd flower sim``: an RL or a classification
    method's flags)."""

    delegate: Callable[[list[str]], argparse.ArgumentParser] | None = None
    experiments: set[str]
    """The domains' experiment commands (``frd rl``, ``frd cls``): a command line of one may sweep."""
    run_command: argparse.ArgumentParser
    """``frd run``'s parser: the flags of an experiment command after its file override the file."""
    owners: Mapping[str, list[str]]
    """Each long flag of every command, and the commands (``frd cls``) that have it: an unknown
    flag that is another command's names that command (``build_parser`` fills it)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{"allow_abbrev": False, **kwargs})
        self.owners = {}

    def error(self, message: str) -> NoReturn:  # one line, exit 2, like every other bad input
        self.exit(2, f"frd: error: {message} (see --help)\n")

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        if self.delegate is not None:
            return self.delegate(list(args or [])).parse_known_args(args, namespace)
        given = list(sys.argv[1:] if args is None else args)
        if self._subparsers is not None:  # its own flags come before the subcommand's name
            given = given[:next((i for i, a in enumerate(given) if not a.startswith("-")), len(given))]
        self._refuse_unknown(given)  # before argparse's own checks: `--seed 1`, not "--out is required"
        parsed, extras = super().parse_known_args(args, namespace)
        self._refuse_unknown(extras)
        return parsed, extras

    def _refuse_unknown(self, args: list[str]) -> None:
        """The first flag in ``args`` (up to ``--``, after which all is positional) that this
        parser lacks is an error suggesting its own flags (a subcommand's, not its parent's)."""
        for arg in args[:args.index("--")] if "--" in args else args:
            flag = arg.split("=", 1)[0]
            number = arg[1:2] in "0123456789."  # -1, -.5, and grid bounds like -2.4,2.4 are values
            if arg.startswith("-") and not number and flag not in self._option_string_actions:
                self.error(self._elsewhere(flag, unknown_flag(flag, self._option_string_actions)))

    def _elsewhere(self, flag: str, message: str) -> str:
        """``message``, then the other commands that have ``flag`` (``--rounds is a flag of frd cls``)."""
        others = [command for command in self.owners.get(flag, []) if command != self.prog]
        if not others:
            return message
        return f"{message}{' ' if message.endswith('?') else '; '}{flag} is a flag of {', '.join(others)}"


def build_parser() -> _Parser:
    parser = _Parser(prog="frd", description="What each way of sharing knowledge costs on the wire, and what it buys.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    parser.experiments = set()
    for domain in domains().values():
        domain.register(sub)
        if domain.name in sub.choices:
            parser.experiments.add(domain.name)
            sweep.add_sweep_flag(sub.choices[domain.name])
    plugins.check()  # the domains loaded their plug-in methods
    parser.run_command = sweep.register(sub)
    report.register(sub)
    flower_cli.register(sub)
    register_export(sub)
    register_eval(sub)
    _share_owners(parser, _flag_owners(parser))
    return parser


def _commands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every command's parser under ``parser`` (``frd flower link`` too), depth first."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # an alias is the same parser
                found += [sub, *_commands(sub)]
    return found


def _flag_owners(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """Each long flag and the commands that take it, by their ``prog`` (``frd cls``). A command
    whose flags follow its ``--method`` (``frd flower sim``) has those of an experiment command,
    named there already."""
    owners: dict[str, list[str]] = {}
    for command in _commands(parser):
        if getattr(command, "delegate", None) is None:
            for flag in command._option_string_actions:
                if flag.startswith("--") and flag != "--help":
                    owners.setdefault(flag, []).append(command.prog)
    return owners


def _share_owners(parser: _Parser, owners: Mapping[str, list[str]]) -> None:
    """Hand ``owners`` to every command's parser, and to those a ``delegate`` builds."""
    for command in [parser, *_commands(parser)]:
        if isinstance(command, _Parser):
            command.owners = owners
            if command.delegate is not None:
                command.delegate = _owning(command.delegate, owners)


def _owning(delegate: Callable[[list[str]], argparse.ArgumentParser],
            owners: Mapping[str, list[str]]) -> Callable[[list[str]], argparse.ArgumentParser]:
    def build(args: list[str]) -> argparse.ArgumentParser:
        built = delegate(args)
        if isinstance(built, _Parser):
            built.owners = owners
        return built
    return build


Swept = tuple[dict[str, list[str]], list[str]]
"""A command line's sweep axes (as texts) and the arguments left (``frd.sweep.inline_axes``)."""


def parse(argv: list[str]) -> tuple[argparse.Namespace, Swept | None]:
    """``argv`` parsed as ``frd`` parses it: a domain's experiment command that sweeps
    (``frd rl --grid 5,10``) parses once its axes are taken off; exits on a flag argparse refuses."""
    parser = build_parser()
    if argv and argv[0] == "run":  # frd run exp.toml --seeds 5: --seeds 5 overrides the file
        own, overrides = sweep.split_run_arguments(parser.run_command, argv[1:])
        args = parser.parse_args([argv[0], *own])
        args.overrides = overrides
        return args, None
    swept = sweep.inline_axes(argv[0], argv[1:]) if argv and argv[0] in parser.experiments else None
    return parser.parse_args(argv if swept is None else [argv[0], *swept[1]]), swept


def _stop(signum: int, frame: object) -> None:
    """``kill`` stops a run like Ctrl-C, so the tables still gather every finished run."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Run one command; the exit code: 0 done, 2 bad input (one line on stderr), 130 interrupted."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        try:
            args, swept = parse(argv)
        except SystemExit as exc:  # --help (0) or a flag argparse refused (2, one line already printed)
            return int(exc.code or 0)
        signal.signal(signal.SIGTERM, _stop)
        if swept is not None:
            return sweep.run_inline(argv[0], *swept, args)
        return int(args.run(args) or 0)
    except FrdError as exc:  # also no domain installed, or a parser's own check
        print(f"frd: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nfrd: interrupted; finished runs are saved, rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

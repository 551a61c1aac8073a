"""The ``frd`` command. Each installed domain (``frd.domains``) adds its own subcommands, then
``frd flower``, ``frd export`` and ``frd eval`` are added; errors print as one line."""
from __future__ import annotations

import argparse
import signal
import sys
from typing import Callable, NoReturn, Sequence

from frd.domains import domains
from frd.errors import FrdError
from frd.flower import cli as flower_cli
from frd.saved import register as register_eval
from frd.tensorboard import register as register_export


class _Parser(argparse.ArgumentParser):
    """One-line errors; a subcommand whose flags depend on its arguments sets ``delegate``, which
    picks the parser for them (``frd flower sim``: an RL or a classification method's flags)."""

    delegate: Callable[[list[str]], argparse.ArgumentParser] | None = None

    def error(self, message: str) -> NoReturn:  # one line, exit 2, like every other bad input
        self.exit(2, f"frd: error: {message} (see --help)\n")

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        if self.delegate is not None:
            return self.delegate(list(args or [])).parse_known_args(args, namespace)
        return super().parse_known_args(args, namespace)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="frd", description="What each way of sharing knowledge costs on the wire, and what it buys.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for domain in domains().values():
        domain.register(sub)
    flower_cli.register(sub)
    register_export(sub)
    register_eval(sub)
    return parser


def _stop(signum: int, frame: object) -> None:
    """``kill`` stops a run like Ctrl-C, so the tables still gather every finished run."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Run one command; the exit code: 0 done, 2 bad input (one line on stderr), 130 interrupted."""
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:  # --help (0) or a flag argparse refused (2, one line already printed)
            return int(exc.code or 0)
        signal.signal(signal.SIGTERM, _stop)
        return int(args.run(args) or 0)
    except FrdError as exc:  # also no domain installed, or a parser's own check
        print(f"frd: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nfrd: interrupted; finished runs are saved, rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

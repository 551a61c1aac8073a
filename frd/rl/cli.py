"""``frd rl`` (one method) and ``frd compare`` (several) on Gymnasium.

The common flags come from ``RLConfig``'s fields and each method's own flags from its options
dataclass (:mod:`frd.options`), so a new field or a new method's options appear here without
editing this file.
"""
from __future__ import annotations

import argparse

import pandas as pd

from frd.backends import add_backend_arguments, backend_from_args
from frd.domains import add_baseline_flag
from frd.errors import FrdError
from frd.options import add_config_flags, add_option_flags, add_out_flag, given_config, given_options
from frd.rl.config import NOT_FLAGS, RLConfig, rl_config
from frd.rl.experiment import run_experiment
from frd.rl.methods import RL_METHODS
from frd.rl.summary import BASELINE, rl_table
from frd.tensorboard import add_tensorboard_flag


def add_common_arguments(p: argparse.ArgumentParser, scale_out: bool = True) -> None:
    """Every flag but the method's: ``RLConfig``'s fields; ``scale_out``: also the backend's and the
    single-agent reference."""
    add_config_flags(p, RLConfig, skip=NOT_FLAGS)
    add_out_flag(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    if scale_out:
        p.add_argument("--single-agent-reference", action="store_true",
                       help="also run one independent agent per seed (in DIR/single-agent) and show its row")
        add_backend_arguments(p)
        add_tensorboard_flag(p)
        add_baseline_flag(p, BASELINE)
    add_option_flags(p, RL_METHODS)


def config_from_args(args: argparse.Namespace, methods: tuple[str, ...] | str) -> RLConfig:
    return rl_config(methods, **given_config(args, RLConfig, skip=NOT_FLAGS), **given_options(args))


def one_method(method: str) -> tuple[str]:
    """``frd rl``'s ``--method``: one name; a list is ``frd compare``'s, named as such (not as an unknown method)."""
    listed = [m.strip() for m in method.split(",") if m.strip()]
    if len(listed) > 1:
        raise FrdError(f"frd rl runs one method, got --method {method}; for several on the same seeds: "
                       f"frd compare --methods {','.join(listed)}")
    if "," in method and listed:
        raise FrdError(f"frd rl runs one method, got --method {method}; did you mean --method {listed[0]}?")
    return (method,)


def _run(args: argparse.Namespace, methods: tuple[str, ...] | str) -> int:
    summary = run_experiment(config_from_args(args, methods), args.out, progress=not args.no_progress,
                             single_agent_reference=args.single_agent_reference, backend=backend_from_args(args),
                             tensorboard=args.tensorboard, baseline=args.baseline)
    print_summary(summary, args.out)
    return 0


def print_summary(summary: pd.DataFrame, out: str) -> None:
    """One block per method of the numeric summary (``rl_summary``), formatted by ``rl_table``."""
    with pd.option_context("display.width", 250, "display.max_columns", None):
        for _, row in rl_table(summary).iterrows():
            print(f"\n== {row['method']} ({row['agents']} agents, {row['runs']} runs) ==")
            print(row.drop(["method", "agents", "runs"]).to_string())
    print(f"\ntables, config and figures in {out}/")


def register(sub: argparse._SubParsersAction) -> None:
    names = ", ".join(f"{name} ({method.description})" for name, method in RL_METHODS.items())
    rl = sub.add_parser("rl", help="train agents with one exchange method")
    rl.add_argument("--method", default="independent", help=f"one of {names}")
    add_common_arguments(rl)
    rl.set_defaults(run=lambda a: _run(a, one_method(a.method)))
    cmp = sub.add_parser("compare", help="several exchange methods on the same seeds, one table each")
    cmp.add_argument("--methods", default="frd,pd,frl,independent", help=f"comma-separated, from {names}")
    add_common_arguments(cmp)
    cmp.set_defaults(run=lambda a: _run(a, a.methods))  # rl_config splits the names at commas

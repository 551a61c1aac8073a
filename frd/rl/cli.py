"""``frd rl`` (one method) and ``frd compare`` (several) on Gymnasium.

The common flags are here; each method's own flags come from its options dataclass
(:mod:`frd.options`), so a new method's options appear here without editing this file.
"""
from __future__ import annotations

import argparse

import pandas as pd

from frd.backends import add_backend_arguments, backend_from_args
from frd.channel import parse_channel_option
from frd.options import add_option_flags, given_options
from frd.rl.config import RLConfig, rl_config
from frd.rl.experiment import run_experiment
from frd.rl.methods import RL_METHODS
from frd.rl.summary import rl_table

COMMON_FLAGS = ("env_id", "agents", "seeds", "first_seed", "hidden", "activation", "recipe", "agent_spec", "init",
                "max_episodes", "period", "target", "window", "until", "channel", "channel_options", "threads")


def add_common_arguments(p: argparse.ArgumentParser, scale_out: bool = True) -> None:
    """Every flag but the method's; ``scale_out``: also the backend's and the single-agent reference."""
    d = RLConfig()
    p.add_argument("--env", dest="env_id", default=d.env_id, help="gymnasium env id (Box obs, Discrete actions)")
    p.add_argument("--agents", type=int, default=d.agents, help="agents per run")
    p.add_argument("--seeds", type=int, default=d.seeds, help="runs per method")
    p.add_argument("--first-seed", type=int, default=d.first_seed, help="seed of the first run")
    p.add_argument("--hidden", type=int, default=d.hidden, help="hidden width h of actor and critic")
    p.add_argument("--activation", default=d.activation, help="tanh or relu")
    p.add_argument("--recipe", default=d.recipe, help="A2C recipe: nstep or rlcode")
    p.add_argument("--agent-spec", default="", metavar="SPEC", help="per-agent learners, cycled over the agents, e.g. "
                   "'h=32;h=64;h=128,lr=3e-4;recipe=rlcode' (keys h, lr, recipe; a missing key: the common one)")
    p.add_argument("--init", default=d.init, help="initial weights: shared by the agents of one architecture, or separate")
    p.add_argument("--max-episodes", type=int, default=d.max_episodes, help="episode cap per agent")
    p.add_argument("--period", type=int, default=d.period, help="episodes between exchange rounds")
    p.add_argument("--target", type=float, default=None, help="mission score (default: the env's: CartPole-v1 490 "
                   "[Seo et al. 2022, §4], else gymnasium's reward threshold, e.g. Acrobot-v1 -100, LunarLander-v3 200)")
    p.add_argument("--window", type=int, default=d.window, help="episodes in the mission average")
    p.add_argument("--until", default=d.until, help="a run ends when the first agent completes (first) or every "
                   "agent does (all: runs.csv then has the slowest and the median agent's episodes)")
    p.add_argument("--channel", default=d.channel, help="channel model of every transfer: ideal or wireless[-symmetric]")
    p.add_argument("--channel-opt", dest="channel_options", type=parse_channel_option, action="append", default=[],
                   metavar="NAME=VALUE", help="override a wireless channel parameter, e.g. p_up_dbm=15 (repeatable)")
    p.add_argument("--threads", type=int, default=d.threads, help="torch threads")
    p.add_argument("--out", required=True, help="results folder (rerun the same command to resume)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    if scale_out:
        p.add_argument("--single-agent-reference", action="store_true",
                       help="also run one independent agent per seed (in OUT/single-agent) and show its row")
        add_backend_arguments(p)
    add_option_flags(p, RL_METHODS)


def config_from_args(args: argparse.Namespace, methods: tuple[str, ...] | str) -> RLConfig:
    values = {k: getattr(args, k) for k in COMMON_FLAGS}
    values["channel_options"] = tuple(args.channel_options)
    return rl_config(methods, **values, **given_options(args))


def _run(args: argparse.Namespace, methods: tuple[str, ...] | str) -> int:
    summary = run_experiment(config_from_args(args, methods), args.out, progress=not args.no_progress,
                             single_agent_reference=args.single_agent_reference, backend=backend_from_args(args))
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
    rl.set_defaults(run=lambda a: _run(a, (a.method,)))
    cmp = sub.add_parser("compare", help="several exchange methods on the same seeds, one table each")
    cmp.add_argument("--methods", default="frd,pd,frl,independent", help=f"comma-separated, from {names}")
    add_common_arguments(cmp)
    cmp.set_defaults(run=lambda a: _run(a, a.methods))  # rl_config splits the names at commas

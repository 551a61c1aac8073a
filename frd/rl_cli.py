"""``frd rl`` (one method) and ``frd compare`` (several) on Gymnasium."""
from __future__ import annotations

import argparse
from dataclasses import fields

import pandas as pd

from frd.backends import add_backend_arguments, backend_from_args
from frd.channel import parse_channel_option
from frd.rl_experiment import run_experiment
from frd.rl_methods import METHODS
from frd.rl_runner import RLConfig


def _bounds(text: str) -> tuple:
    """``"-2.4,2.4;-3,3"`` → ((-2.4, 2.4), (-3.0, 3.0))."""
    try:
        return tuple(tuple(float(v) for v in pair.split(",")) for pair in text.split(";"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"grid bounds look like '-2.4,2.4;-3,3', got {text!r}") from None


def _add_common(p: argparse.ArgumentParser) -> None:
    d = RLConfig()
    p.add_argument("--env", dest="env_id", default=d.env_id, help="gymnasium env id (Box obs, Discrete actions)")
    p.add_argument("--agents", type=int, default=d.agents, help="agents per run")
    p.add_argument("--seeds", type=int, default=d.seeds, help="runs per method")
    p.add_argument("--first-seed", type=int, default=d.first_seed, help="seed of the first run")
    p.add_argument("--hidden", type=int, default=d.hidden, help="hidden width h of actor and critic")
    p.add_argument("--activation", default=d.activation, help="tanh or relu")
    p.add_argument("--recipe", default=d.recipe, help="A2C recipe: nstep or rlcode")
    p.add_argument("--max-episodes", type=int, default=d.max_episodes, help="episode cap per agent")
    p.add_argument("--period", type=int, default=d.period, help="episodes between exchange rounds")
    p.add_argument("--target", type=float, default=d.target, help="mission score")
    p.add_argument("--window", type=int, default=d.window, help="episodes in the mission average")
    p.add_argument("--grid", type=int, default=d.grid, help="FRD intervals S per observation dimension")
    p.add_argument("--grid-bounds", type=_bounds, default=None, help="FRD grid bounds 'lo,hi;lo,hi;…'")
    p.add_argument("--codec", default=d.codec, help="FRD payload codec: paper or compact")
    p.add_argument("--frd-weighting", default=d.frd_weighting, help="FRD server average: mean or count")
    p.add_argument("--frl-critic", action="store_true", help="FRL averages the critic too")
    p.add_argument("--distill-epochs", type=int, default=d.distill_epochs, help="PD/FRD passes over the memory")
    p.add_argument("--distill-batch", type=int, default=d.distill_batch, help="PD/FRD distillation minibatch")
    p.add_argument("--distill-lr", type=float, default=d.distill_lr, help="PD/FRD distillation learning rate (own Adam)")
    p.add_argument("--channel", default=d.channel, help="channel model of every transfer: ideal or wireless[-symmetric]")
    p.add_argument("--channel-opt", dest="channel_options", type=parse_channel_option, action="append", default=[],
                   metavar="NAME=VALUE", help="override a channel parameter, e.g. p_up_dbm=15 (repeatable)")
    p.add_argument("--threads", type=int, default=d.threads, help="torch threads")
    p.add_argument("--out", required=True, help="results folder (rerun the same command to resume)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_backend_arguments(p)


def _config(args: argparse.Namespace, methods: tuple[str, ...]) -> RLConfig:
    names = {f.name for f in fields(RLConfig)} - {"methods"}
    values = {k: v for k, v in vars(args).items() if k in names}
    return RLConfig(methods=methods, **{**values, "channel_options": tuple(args.channel_options)})


def _run(args: argparse.Namespace, methods: tuple[str, ...]) -> int:
    summary = run_experiment(_config(args, methods), args.out, progress=not args.no_progress,
                             backend=backend_from_args(args))
    with pd.option_context("display.width", 250, "display.max_columns", None):
        for _, row in summary.iterrows():
            print(f"\n== {row['method']} ({row['agents']} agents, {row['runs']} runs) ==")
            print(row.drop(["method", "agents", "runs"]).to_string())
    print(f"\ntables, config and figures in {args.out}/")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    rl = sub.add_parser("rl", help="train agents with one exchange method")
    rl.add_argument("--method", default="independent", help=f"one of {', '.join(METHODS)}")
    _add_common(rl)
    rl.set_defaults(run=lambda a: _run(a, (a.method,)))
    cmp = sub.add_parser("compare", help="several exchange methods on the same seeds, one table each")
    cmp.add_argument("--methods", default="frd,pd,frl,independent", help="comma-separated methods")
    _add_common(cmp)
    cmp.set_defaults(run=lambda a: _run(a, tuple(m.strip() for m in a.methods.split(",") if m.strip())))

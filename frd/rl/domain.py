"""RL as a domain of the harness (``frd.domains``), registered as the entry point ``rl``."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from frd.agents.spec import AgentSpec
from frd.backends import Executor
from frd.domains import Curve, Domain
from frd.errors import FrdError
from frd.options import current_names
from frd.remote import Reply, Request
from frd.results import ResultStore, run_id
from frd.rl import cli, saved
from frd.rl.config import COMMON_FIELDS, RLConfig
from frd.rl.experiment import report, run_experiment
from frd.rl.methods import RL_METHODS, get_method
from frd.rl.remote import agent_reply, check_remote
from frd.rl.runs import RLRuns
from frd.rl.series import tensorboard_series
from frd.rl.sweep import COMPARISON, FRONTIERS, HEADLINE, experiment_config, summary
from frd.saved import EvalRequest, SavedModels


def _tuples(value: Any) -> Any:
    """JSON's lists back to the tuples the frozen config holds."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


class RLDomain(RLRuns):
    """Agents on Gymnasium: ``frd rl``, ``frd compare``; over Flower one node per agent."""

    name = "rl"
    methods = RL_METHODS
    headline = HEADLINE
    comparison = COMPARISON
    frontiers = FRONTIERS
    series = staticmethod(tensorboard_series)

    def register(self, subparsers: argparse._SubParsersAction) -> None:
        cli.register(subparsers)

    def add_remote_arguments(self, parser: argparse.ArgumentParser, deployed: bool) -> None:
        parser.add_argument("--method", required=True, help=f"RL method(s), comma-separated, from {', '.join(RL_METHODS)}")
        cli.add_common_arguments(parser, scale_out=False)

    def remote_config(self, args: argparse.Namespace) -> tuple[RLConfig, Path]:
        config = cli.config_from_args(args, tuple(m.strip() for m in args.method.split(",") if m.strip()))
        config.validate()
        check_remote(config)
        return config, Path(args.out).resolve()

    def config_from_dict(self, values: Mapping[str, Any]) -> RLConfig:
        if not {"env_id", "methods"} <= set(values):
            raise FrdError("not an RL config: it names no env_id and methods")
        common = {k: _tuples(v) for k, v in values.items() if k in COMMON_FIELDS}
        common["agent_spec"] = tuple(AgentSpec(**{**entry, "sb3": tuple(tuple(pair) for pair in entry.get("sb3", ()))})
                                     for entry in values.get("agent_spec", ()))  # absent: written before it
        options = {m: get_method(m).Options(**current_names(get_method(m).Options, {k: _tuples(v) for k, v in o.items()}))
                   for m, o in values["options"].items()}
        return RLConfig(**common, options=options)

    def participants(self, config: RLConfig) -> int:
        return config.agents

    def run_experiment(self, config: RLConfig, out: Path, backend: Executor, progress: bool,
                       tensorboard: Path | None = None) -> None:
        run_experiment(config, out, progress=progress, backend=backend, tensorboard=tensorboard)

    def experiment_config(self, args: argparse.Namespace) -> RLConfig:
        return experiment_config(args)

    def summary(self, config: RLConfig, store: ResultStore) -> pd.DataFrame:
        return summary(config, store)

    def curves(self, config: RLConfig, store: ResultStore) -> list[Curve]:
        return []  # each cell draws its own learning curves (mission.png)

    def participant_reply(self, config: RLConfig, participant: int, request: Request,
                          kept: list[bytes] | None) -> tuple[Reply, list[bytes]]:
        """Agent ``participant``'s reply; it keeps its history of requests (bytes) to replay."""
        return agent_reply(config, participant, request, kept or [])

    def run_ids(self, config: RLConfig) -> set[str]:
        seeds = range(config.first_seed, config.first_seed + config.seeds)
        return {run_id(m, s) for m in config.methods for s in seeds}

    def report(self, config: RLConfig, store: ResultStore) -> None:
        cli.print_summary(report(store, config), str(store.out))

    def evaluate(self, models: Sequence[SavedModels], request: EvalRequest) -> tuple[pd.DataFrame, str]:
        return saved.evaluate(models, request)


DOMAIN: Domain = RLDomain()

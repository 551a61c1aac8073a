"""Classification as a domain of the harness (``frd.domains``), registered as the entry point ``cls``."""
from __future__ import annotations

import argparse
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from frd.backends import Executor
from frd.classification import cli, saved
from frd.classification.config import ClsConfig, run_ids
from frd.classification.data import Dataset, load_dataset
from frd.classification.experiment import run_experiment
from frd.classification.methods import CLS_METHODS, COMMON_FIELDS, cls_config
from frd.classification.remote import participant_reply, resolved
from frd.classification.runner import build_run
from frd.classification.runs import ClsRuns
from frd.classification.series import tensorboard_series
from frd.classification.sweep import COMPARISON, FRONTIERS, HEADLINE, accuracy_against_uplink, summary
from frd.domains import Curve, Domain
from frd.errors import FrdError
from frd.remote import Reply, Request
from frd.results import ResultStore
from frd.saved import EvalRequest, SavedModels


def _data(config: ClsConfig) -> Dataset:
    """``config``'s dataset, loaded once per process (a node serves many messages)."""
    return _load(config.dataset, config.data_dir, config.download, config.test_fraction, config.split_seed)


@lru_cache(maxsize=2)
def _load(dataset: str, data_dir: str | None, download: bool, test_fraction: float, split_seed: int) -> Dataset:
    return load_dataset(dataset, data_dir, download=download, test_fraction=test_fraction, split_seed=split_seed)


class ClsDomain(ClsRuns):
    """Devices classifying images: ``frd cls``; over Flower one node per device."""

    name = "cls"
    methods = CLS_METHODS
    headline = HEADLINE
    comparison = COMPARISON  # with --baseline only: no method is every other's baseline
    frontiers = FRONTIERS
    series = staticmethod(tensorboard_series)

    def register(self, subparsers: argparse._SubParsersAction) -> None:
        cli.register(subparsers)

    def add_remote_arguments(self, parser: argparse.ArgumentParser, deployed: bool) -> None:
        cli.add_experiment_arguments(parser, " on the SuperLink's machine" if deployed else "")

    def remote_config(self, args: argparse.Namespace) -> tuple[ClsConfig, Path]:
        config = cli.config_from_args(args)
        if config.partial_participation:
            raise FrdError("frd flower runs every device in every round (one node each); sample devices per "
                           "round (--clients-per-round, --fraction) with frd cls")
        build_run(config, 0, _data(config))
        return config, Path(args.out).resolve()

    def config_from_dict(self, values: Mapping[str, Any]) -> ClsConfig | tuple[ClsConfig, ...]:
        """One method's config, or the configs of a folder of several (``experiment_record``:
        ``methods``, and ``options`` by method)."""
        if "dataset" not in values:
            raise FrdError("not a classification config: it names no dataset")
        common = {k: v for k, v in values.items() if k in COMMON_FIELDS and k != "method"}
        if "methods" in values:
            return tuple(cls_config(m, **common, **values["options"][m]) for m in values["methods"])
        return cls_config(values["method"], **common, **values["options"])

    def participants(self, config: ClsConfig) -> int:
        return config.devices

    def run_experiment(self, config: ClsConfig, out: Path, backend: Executor, progress: bool,
                       tensorboard: Path | None = None) -> None:
        run_experiment(config, out, progress=progress, backend=backend, tensorboard=tensorboard)

    def experiment_config(self, args: argparse.Namespace) -> ClsConfig:
        config = cli.config_from_args(args)
        build_run(config, 0, _data(config))  # the dataset, partition, model and method, checked
        return config

    def summary(self, config: ClsConfig | tuple[ClsConfig, ...], store: ResultStore) -> pd.DataFrame:
        return summary(config, store)

    def curves(self, config: ClsConfig | tuple[ClsConfig, ...], store: ResultStore) -> list[Curve]:
        return [accuracy_against_uplink(config, store)]

    def participant_reply(self, config: ClsConfig, participant: int, request: Request,
                          kept: bytes | None) -> tuple[Reply, bytes]:
        """Device ``participant``'s reply; it keeps its state as bytes."""
        return participant_reply(resolved(config), _data(config), participant, request, kept)

    def run_ids(self, config: ClsConfig | tuple[ClsConfig, ...]) -> set[str]:
        return run_ids(config)

    def report(self, config: ClsConfig | tuple[ClsConfig, ...], store: ResultStore) -> None:
        cli.report(config, store)

    def evaluate(self, models: Sequence[SavedModels], request: EvalRequest) -> tuple[pd.DataFrame, str]:
        return saved.evaluate(models, request)


DOMAIN: Domain = ClsDomain()

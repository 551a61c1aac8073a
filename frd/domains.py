"""Domains as plug-ins: what a domain (RL, classification, …) offers the harness, and where the
installed ones are found.

A domain is registered, not imported by name: its package declares it under the entry-point group
``frd.domains`` (``rl = "frd.rl.domain:DOMAIN"`` in frd's ``pyproject.toml``), so the core and the
roof (the ``frd`` command, the Flower apps) reach it through this registry and never import it.
A domain is loaded when it is first asked for: a Flower node imports only its run's domain.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Protocol, Sequence

import pandas as pd

from frd.backends import Executor, Runs
from frd.errors import FrdError
from frd.experiment_file import suggest
from frd.remote import Reply, Request
from frd.results import ResultStore

if TYPE_CHECKING:
    import pandas as pd

    from frd.saved import EvalRequest, SavedModels

GROUP = "frd.domains"
"""The entry-point group a domain is declared under: ``name = "package.module:OBJECT"``."""


@dataclass(frozen=True)
class Metric:
    """A column of a domain's numeric summary as a sweep report shows it (``frd.report``): in the
    printed table and, if ``plot``, against each sweep axis."""

    column: str
    label: str
    lo: str | None = None
    """The columns of its interval (error bars; ``[lo–hi]`` in the table), if it has one."""
    hi: str | None = None
    log: bool = False
    """Drawn as points on a log axis (payloads span decades); else on a linear axis from zero."""
    percent: bool = False
    """A fraction, shown in %."""
    plot: bool = True
    statistic: str = ""
    """What the value is over runs (``median``, ``IQM``), named in the table's heading."""
    interval: str = ""
    """What ``lo``–``hi`` is (``frd.stats.CI95`` or ``IQR``), named in the heading as ``[…]``."""
    digits: str = ""
    """How its numbers are written (a format spec: ``.2f`` for a probability); else ``frd.stats.fmt``."""
    unit: str = ""
    """What its numbers count (``episodes``, ``bits``; a percentage's is %), under its heading in a paper's table."""
    better: str = ""
    """``lower`` or ``higher``: which way is better, so that a paper's table can mark the best (``frd.tables``)."""

    @property
    def heading(self) -> str:
        """The label as a printed table and a figure's title show it: % where a percentage, then
        the statistic and its interval (``mission episodes, median [95% CI]``)."""
        text = f"{self.label} %" if self.percent and "%" not in self.label else self.label
        text += f", {self.statistic}" if self.statistic else ""
        return text + (f" [{self.interval}]" if self.interval and self.lo else "")


@dataclass(frozen=True)
class Curve:
    """One figure of a sweep report across its cells: per method, ``y`` against ``x`` (a frame
    with columns method, x, y, y_lo, y_hi), e.g. accuracy against cumulative uplink bits."""

    name: str
    """File stem of the figure."""
    frame: pd.DataFrame
    xlabel: str
    ylabel: str
    xlog: bool = False


@dataclass(frozen=True)
class Comparison:
    """How a summary compares its methods with a baseline method: P(a run of one better than a
    run of the baseline) on each measure, with its 95 % interval. Within a folder of several
    methods the domain's summary compares them; ``frd report`` compares each summary row with the
    baseline's runs beside it (the same folder, or the cell of the same other sweep values), on
    the seeds both have, and any method with any other (``--pairwise``)."""

    baseline: str | None
    """The method compared with unless ``--baseline`` names another (RL: ``independent``; None:
    only where ``--baseline`` names one)."""
    measures: Mapping[str, str]
    """``runs.csv`` column compared (one value per run) → the summary column it fills, with its
    ``_lo`` and ``_hi``: P(better than the baseline) and its interval."""
    lower_is_better: bool
    labels: Mapping[str, str] = field(default_factory=dict)
    """Measure → what "better" is on it in a table's label (``fewer episodes``: P(fewer episodes than pd))."""

    def label(self, measure: str) -> str:
        """What "better" is on ``measure`` in a label: its own words, else fewer/higher and its name."""
        return self.labels.get(measure, f"{'fewer' if self.lower_is_better else 'higher'} {measure.replace('_', ' ')}")


def check_baseline(baseline: str, names: Iterable[str]) -> None:
    """``--baseline`` names a method that ran (or, in a sweep whose axis chooses the method, that
    axis's value): else one line, before anything is written."""
    ran = list(dict.fromkeys(names))
    if baseline not in ran:
        raise FrdError(f"--baseline {baseline}: no such method ran here (methods: {', '.join(ran) or 'none'})"
                       f"{suggest(baseline, ran)}")


def add_baseline_flag(parser: argparse.ArgumentParser, default: str = "") -> None:
    """``--baseline METHOD``: what P(improvement) compares against (a report's choice, never a
    setting of the runs: a rerun with another baseline resumes the same folder)."""
    parser.add_argument("--baseline", metavar="METHOD", help="the method P(improvement) compares every other with"
                        + (f" (default {default})" if default else "") + "; it must be among those run")


class Domain(Runs, Protocol):
    """One domain: its runs (``Runs``: a group of runs in one process, one run over a link), its
    command-line (its own commands, and the flags of one experiment over Flower), a participant's
    side of a remote run, the report of a finished experiment and the scores of its saved models.

    Its experiment command is the one named like the domain (``frd rl``, ``frd cls``): its flags
    are the keys of an experiment file and can be swept (``frd.sweep``)."""

    name: str
    """The registry key; also what a Flower run's spec names."""
    @property
    def methods(self) -> Mapping[str, Any]:
        """Its exchange methods by name: ``frd flower --method M`` runs the domain that has ``M``."""

    def register(self, subparsers: argparse._SubParsersAction) -> None:
        """Add its commands to ``frd`` (each ``set_defaults(run=...)``)."""

    def add_remote_arguments(self, parser: argparse.ArgumentParser, deployed: bool) -> None:
        """The flags of one experiment over Flower (``frd flower sim``; ``run`` when ``deployed``)."""

    def remote_config(self, args: argparse.Namespace) -> tuple[Any, Path]:
        """The config those flags give and its absolute results folder, checked as far as can be
        before any process starts (bad input is one line, nothing started)."""

    def config_from_dict(self, values: Mapping[str, Any]) -> Any:
        """The config whose ``dataclasses.asdict`` (through JSON) is ``values``; an ``FrdError`` where
        ``values`` are no config of this domain (``frd report`` tries each domain on a folder)."""

    def participants(self, config: Any) -> int:
        """How many participants (nodes) a run of ``config`` has: agents, devices."""

    def run_experiment(self, config: Any, out: Path, backend: Executor, progress: bool,
                       tensorboard: Path | None = None) -> None:
        """Every run of ``config`` not yet in ``out``, on ``backend``, its tables saved as it finishes
        (and its TensorBoard events written in ``tensorboard``, if given)."""

    def experiment_config(self, args: argparse.Namespace) -> Any:
        """The config the flags of its experiment command give, checked as far as can be before
        anything is written (a sweep checks every cell before it runs one)."""

    @property
    def headline(self) -> Sequence[Metric]:
        """The summary columns a sweep report prints and draws against each axis."""

    @property
    def comparison(self) -> Comparison | None:
        """How a report across method cells compares them (optional: None, or absent, compares nothing)."""

    def summary(self, config: Any, store: ResultStore) -> pd.DataFrame:
        """The numeric summary of ``config``'s runs in ``store`` (read from verified tables), its
        ``summary.csv`` and figures written into the folder as its command writes them."""

    def curves(self, config: Any, store: ResultStore) -> list[Curve]:
        """Figures across the cells of a sweep, one ``Curve`` each (its rows for this cell)."""

    def series(self, tables: Mapping[str, pd.DataFrame], common: Mapping[str, Any]) -> list[tuple[str, pd.Series]]:
        """A run's own TensorBoard series, (tag, values by step), from its tables and its config's
        common settings (``frd.tensorboard`` adds the ledger's bits): the core reads no domain's schema."""

    def participant_reply(self, config: Any, participant: int, request: Request, kept: Any) -> tuple[Reply, Any]:
        """``participant``'s answer to ``request`` and what it keeps for the next one (``kept``:
        what the previous call returned, None at first; bytes or a list of bytes)."""

    def run_ids(self, config: Any) -> set[str]:
        """The runs a finished experiment of ``config`` holds."""

    def report(self, config: Any, store: ResultStore) -> None:
        """Print the summary of ``config``'s runs in ``store`` and draw its figures."""

    def evaluate(self, saved: Sequence[SavedModels], request: EvalRequest) -> tuple[pd.DataFrame, str]:
        """``frd eval``: the scores of its saved models (``eval.csv``'s rows) and the table to print
        (optional: a domain without it saves no models)."""


REGISTRY: dict[str, Domain] = {}
"""The domains loaded so far by name (a test may add one here)."""


def _declared() -> dict[str, Any]:
    declared = {ep.name: ep for ep in entry_points(group=GROUP)}
    if not declared:
        raise FrdError(f"no frd domain is installed (entry points {GROUP}); reinstall frd: pip install -e .")
    return declared


def get_domain(name: str) -> Domain:
    """The domain called ``name``, loading only its own modules."""
    if name not in REGISTRY:
        declared = _declared()
        if name not in declared:
            raise FrdError(f"unknown domain {name!r}; installed: {', '.join(declared)}")
        REGISTRY[name] = declared[name].load()
    return REGISTRY[name]


def domains() -> dict[str, Domain]:
    """Every installed domain by name, in the order declared, then any added to ``REGISTRY``."""
    installed = {name: get_domain(name) for name in _declared()}
    return {**installed, **REGISTRY}

"""TensorBoard event files of finished runs: ``frd export tensorboard DIR`` and ``--tensorboard L``.

One TensorBoard run per ``run_id``, in ``L/<method>/seed<k>``, so TensorBoard's run filter
(a regex over those paths) picks methods and seeds. Both ways in write through :func:`log_run`
from the tables as saved (CSV), so live logging and a later export give the same events.
The ``tensorboard`` package is an optional extra; without it both fail before writing anything.
"""
from __future__ import annotations

import argparse
import importlib.util
import io
import json
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd

from frd.errors import FrdError
from frd.results import RUNS_TABLE, ResultStore

TABLES = (RUNS_TABLE, "episodes", "rounds", "ledger")
"""The tables a run may have; its domain's series read what they need of them."""
SUMMARY_METRICS = ("mission_episodes", "accuracy", "bits_up", "bits_down")
"""``runs.csv`` columns logged once per run as ``run/<column>`` (those the run's domain has): the
metrics of TensorBoard's hparams table [our choice]."""

LiveLog = Callable[[ResultStore, Mapping[str, pd.DataFrame]], None]
Series = Callable[[Mapping[str, pd.DataFrame], Mapping[str, Any]], list[tuple[str, pd.Series]]]
"""A domain's own series of one run (``Domain.series``): (tag, values by step) from its tables and
its config's common settings; the core adds the ledger's bits."""


def require_tensorboard() -> None:
    """The extra is installed, or a one-line error (checked before anything is written)."""
    if importlib.util.find_spec("tensorboard") is None:
        raise FrdError("TensorBoard logging needs the tensorboard package: install frd[tensorboard]")


def live_logger(logdir: str | Path | None, series: Series) -> LiveLog:
    """What an experiment driver calls after ``store.save_run(tables)``: writes that run's events,
    with its domain's ``series``, into ``logdir`` (nothing when it is None)."""
    if logdir is None:
        return lambda store, tables: None
    require_tensorboard()

    def log(store: ResultStore, tables: Mapping[str, pd.DataFrame]) -> None:
        log_run(Path(logdir), _resume_key(store.out),
                {name: _as_saved(tables[name]) for name in TABLES if name in tables}, series)
    return log


def _as_saved(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as its CSV reads back (what an export reads), so both paths log the same floats."""
    return frame if frame.empty else pd.read_csv(io.StringIO(frame.to_csv(index=False)))


def _resume_key(results: Path) -> dict[str, Any]:
    """What fixes a run's results: the common fields and each method's resolved options (``config.json``)."""
    path = results / "config.json"
    if not path.exists():
        raise FrdError(f"{results} has no config.json: not an frd results folder")
    return json.loads(path.read_text())["resume_key"]


def _finished(results: Path) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
    """A results folder's resume key and tables, or a one-line error."""
    key = _resume_key(results)
    if not (results / f"{RUNS_TABLE}.csv").exists():
        raise FrdError(f"{results} holds no {RUNS_TABLE}.csv: no finished run to export")
    return key, {name: pd.read_csv(results / f"{name}.csv") for name in TABLES if (results / f"{name}.csv").exists()}


def export(results: str | Path, logdir: str | Path | None = None) -> tuple[Path, int]:
    """Every finished run of ``results`` into ``logdir`` (default ``results/tensorboard``); returns
    the logdir and the number of runs. Of an experiment record, each cell's runs into
    ``logdir/<cell id>``, as a sweep logs them live (every cell read before any is written)."""
    from frd.domains import get_domain
    from frd.report import cells_of, recorded_cells  # here: an experiment driver imports this module

    results = Path(results)
    require_tensorboard()
    out = Path(logdir) if logdir is not None else results / "tensorboard"
    cells = recorded_cells(results)
    if cells == []:
        raise FrdError(f"{results} holds no finished runs yet")
    found = ([(out, cell, _finished(cell.folder)) for cell in cells_of(results)] if cells is None
             else [(out / cell.folder.name, cell, _finished(cell.folder)) for cell in cells])
    count = 0
    for where, cell, (key, tables) in found:
        series = get_domain(cell.domain).series
        for rid in tables[RUNS_TABLE]["run_id"]:
            log_run(where, key, {name: frame[frame["run_id"] == rid].reset_index(drop=True)
                                 for name, frame in tables.items()}, series)
            count += 1
    return out, count


def run_folder(logdir: Path, method: str, seed: int) -> Path:
    return logdir / method / f"seed{seed}"


def log_run(logdir: Path, key: Mapping[str, Any], tables: Mapping[str, pd.DataFrame], series: Series) -> Path:
    """One run's events, replacing any written before: its config as text and hparams, per-run
    metrics, its domain's ``series`` and the ledger's bits by round. Returns its folder."""
    from torch.utils.tensorboard import SummaryWriter
    from torch.utils.tensorboard.summary import hparams

    run = tables[RUNS_TABLE].iloc[0]
    method, seed = str(run["method"]), int(run["seed"])
    folder = run_folder(logdir, method, seed)
    for old in folder.glob("events.out.tfevents.*"):
        old.unlink()
    config = {"method": method, "seed": seed, **key["common"], "options": key["methods"].get(method, {})}
    metrics = {f"run/{name}": float(run[name]) for name in SUMMARY_METRICS if name in run.index}
    with SummaryWriter(str(folder)) as writer:
        writer.add_text("config", f"**{method}, seed {seed}**\n\n```json\n{json.dumps(config, indent=2)}\n```", 0)
        for summary in hparams(_flat(config), metrics):  # into this run's file: add_hparams opens a timestamped sub-run
            writer._get_file_writer().add_summary(summary)
        for tag, value in metrics.items():
            writer.add_scalar(tag, value, 0)
        for tag, values in [*series(tables, key["common"]), *_bits(tables)]:
            for step, value in values.items():
                writer.add_scalar(tag, float(value), int(step))
    return folder


def _flat(config: Mapping[str, Any]) -> dict[str, int | float | str | bool]:
    """TensorBoard's hparams take scalars: options as ``option.<name>``, the rest as JSON text."""
    flat: dict[str, int | float | str | bool] = {}
    for name, value in config.items():
        if name == "options":
            flat.update({f"option.{k}": v for k, v in _flat(value).items()})
        else:
            flat[name] = value if isinstance(value, (int, float, str, bool)) else json.dumps(value)
    return flat


def _bits(tables: Mapping[str, pd.DataFrame]) -> list[tuple[str, pd.Series]]:
    """All participants' bits by round and direction, every transfer counted, delivered or not (as
    in the runs' totals)."""
    ledger = tables.get("ledger", pd.DataFrame())
    if ledger.empty:
        return []
    bits = ledger.pivot_table(index="round", columns="direction", values="bits", aggfunc="sum", fill_value=0)
    return [(f"bits/{d}", bits[d] if d in bits else pd.Series(0, bits.index)) for d in ("up", "down")]


def add_tensorboard_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tensorboard", metavar="L", help="also write each finished run's TensorBoard events into L "
                   "(L/<method>/seed<k>; needs frd[tensorboard])")


def _export(args: argparse.Namespace) -> int:
    out, count = export(args.dir, args.logdir)
    print(f"{count} runs written to {out}/ (view: tensorboard --logdir {out})")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    export_parser = sub.add_parser("export", help="results in other tools' formats")
    formats = export_parser.add_subparsers(dest="format", required=True, parser_class=type(export_parser))
    tb = formats.add_parser("tensorboard", help="TensorBoard event files of every finished run of a results folder")
    tb.add_argument("dir", metavar="DIR", help="a results folder (frd rl, compare or cls) or an experiment "
                    "(frd run's --out: each cell into L/<cell id>)")
    tb.add_argument("--logdir", metavar="L", help="where the events go (default DIR/tensorboard)")
    tb.set_defaults(run=_export)

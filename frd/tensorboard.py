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
"""The tables read: RL has all four, classification has no ``episodes``."""
SUMMARY_METRICS = ("mission_episodes", "accuracy", "bits_up", "bits_down")
"""``runs.csv`` columns logged once per run as ``run/<column>`` (those the run's domain has): the
metrics of TensorBoard's hparams table [our choice]."""

LiveLog = Callable[[ResultStore, Mapping[str, pd.DataFrame]], None]


def require_tensorboard() -> None:
    """The extra is installed, or a one-line error (checked before anything is written)."""
    if importlib.util.find_spec("tensorboard") is None:
        raise FrdError("TensorBoard logging needs the tensorboard package: install frd[tensorboard]")


def live_logger(logdir: str | Path | None) -> LiveLog:
    """What an experiment driver calls after ``store.save_run(tables)``: writes that run's events
    into ``logdir`` (nothing when it is None)."""
    if logdir is None:
        return lambda store, tables: None
    require_tensorboard()

    def log(store: ResultStore, tables: Mapping[str, pd.DataFrame]) -> None:
        log_run(Path(logdir), _resume_key(store.out), {name: _as_saved(tables[name]) for name in TABLES if name in tables})
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
    from frd.report import recorded_cells  # here: an experiment driver imports this module

    results = Path(results)
    require_tensorboard()
    out = Path(logdir) if logdir is not None else results / "tensorboard"
    cells = recorded_cells(results)
    if cells == []:
        raise FrdError(f"{results} holds no finished runs yet")
    found = [(out, _finished(results))] if cells is None else [(out / c.folder.name, _finished(c.folder)) for c in cells]
    count = 0
    for where, (key, tables) in found:
        for rid in tables[RUNS_TABLE]["run_id"]:
            log_run(where, key, {name: frame[frame["run_id"] == rid].reset_index(drop=True)
                                 for name, frame in tables.items()})
            count += 1
    return out, count


def run_folder(logdir: Path, method: str, seed: int) -> Path:
    return logdir / method / f"seed{seed}"


def log_run(logdir: Path, key: Mapping[str, Any], tables: Mapping[str, pd.DataFrame]) -> Path:
    """One run's events, replacing any written before: its config as text and hparams, per-run
    metrics, and every per-episode and per-round series its tables hold. Returns its folder."""
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
        for tag, series in _series(tables, key["common"]):
            for step, value in series.items():
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


def _series(tables: Mapping[str, pd.DataFrame], common: Mapping[str, Any]) -> list[tuple[str, pd.Series]]:
    """(tag, values indexed by step) of one run, from the tables it has; ``common``: its config."""
    series: list[tuple[str, pd.Series]] = []
    episodes = tables.get("episodes", pd.DataFrame())
    for agent, rows in (episodes.groupby("agent") if not episodes.empty else []):
        scores = rows.sort_values("episode").set_index("episode")["score"]
        average = _mission_average(scores, int(common["window"]))
        series += [(f"score/agent{agent}", scores), (f"mission_average/agent{agent}", average)]
    rounds = tables.get("rounds", pd.DataFrame())
    if "phase" in rounds:  # classification: per evaluated model, after local training and after the exchange
        for (phase, device), rows in rounds.groupby(["phase", "device"]):
            name = "global" if device < 0 else f"device{device}"
            series.append((f"accuracy/{phase}/{name}", rows.set_index("round")["accuracy"]))
    elif not rounds.empty:  # RL distillation (PD, FRD): cross-entropy to the teacher per distilling agent
        for agent, rows in rounds.groupby("agent"):
            series += [(f"distill/{col}/agent{agent}", rows.set_index("round")[col]) for col in ("loss_before", "loss_after")]
    ledger = tables.get("ledger", pd.DataFrame())
    if not ledger.empty:  # every transfer counts, delivered or not (as in the runs' totals)
        bits = ledger.pivot_table(index="round", columns="direction", values="bits", aggfunc="sum", fill_value=0)
        series += [(f"bits/{d}", bits[d] if d in bits else pd.Series(0, bits.index)) for d in ("up", "down")]
    return series


def _mission_average(scores: pd.Series, window: int) -> pd.Series:
    """After each episode, the mean of the latest ``window`` scores (fewer before the window fills),
    as the mission rule reads it (``frd.rl.episode_end.recent_mean``: the same sum in the same
    order, so the same floats; written here so that the core imports no domain)."""
    values = [float(score) for score in scores]
    latest = [values[max(0, i + 1 - window):i + 1] for i in range(len(values))]
    return pd.Series([sum(last) / len(last) for last in latest], scores.index)


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

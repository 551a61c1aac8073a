"""A study's flat record: every run of every cell of an experiment in one CSV, committed beside
the study's tables (an experiment's own record, a folder per cell with every episode and saved
agent, is too large to commit).

RL studies keep one row per run: its ``runs.csv`` row, the cell's axis values and where it
computed (the run's ``provenance.csv`` row). ``flatten`` writes it from an experiment's folder;
``convert`` turns it back into that experiment's record, which ``frd run`` resumes and ``frd
report`` reads, so the committed tables are ``frd report``'s of the committed record.
Classification studies, whose tables come from every round, keep each of a run's tables whole,
one CSV per table with the cell's axis values in front, each named ``cell.<axis>`` (an axis may
share its name with a column, e.g. a ``method`` axis of bundles) (``flatten_tables``, ``convert_tables``).
"""
from __future__ import annotations

import argparse
import gzip
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from frd.domains import get_domain
from frd.experiment_file import CELLS, SKIP_KEY, Cell, read_file, resolve
from frd.results import ResultStore
from frd.sweep import claim, command

RUN_COLUMNS = ["run_id", "method", "seed", "n_agents", "completed", "mission_episodes", "all_agents_episodes",
               "median_agent_episodes", "agents_completed", "mission_env_steps", "compute_s", "comm_s", "rounds",
               "bits_up", "bits_down"]
"""The flat record's columns that are a run's ``runs.csv`` row [those of the RL runs tables the
studies were run with; later columns, e.g. ``algorithm``, are left to the cells' own tables]."""
CLOCK_COLUMNS = ["mission_sim_s", "sim_s"]
"""The virtual clock's runs.csv columns (``frd.clock``): in a flat record when its runs have them."""


def run_columns(runs: pd.DataFrame) -> list[str]:
    """``RUN_COLUMNS``, and the clock's where ``runs`` has them (records written before it have not)."""
    return RUN_COLUMNS + [c for c in CLOCK_COLUMNS if c in runs]
CELL = "cell."
"""Prefix of a flat table's axis columns."""
PROVENANCE = ["python", "frd", "torch", "numba", "gymnasium", "numpy", "pandas", "stable-baselines3", "scikit-learn",
              "code", "cpu"]
"""Where a run computed (``provenance.csv``): package versions, code hash, CPU."""


SIZE_LIMIT = 2_000_000
"""Bytes: a flat table that compresses to more than this is written one file per cell [our
choice: the repository tracks no file over 2 MB, and a study's episodes outgrow that]."""


def _compressed(frame: pd.DataFrame) -> bytes:
    """``frame`` as a gzip-compressed CSV (``pd.read_csv`` reads it back) with no time or name in
    its header, so the same table always gives the same bytes: a large flat record stays small in
    git and a rewrite changes nothing."""
    return gzip.compress(frame.to_csv(index=False).encode(), mtime=0)


def _parts(path: Path) -> tuple[str, str]:
    """``path``'s name split before its first suffix: ``t.csv.gz`` → (``t``, ``csv.gz``)."""
    stem, _, suffix = path.name.partition(".")
    return stem, suffix


def write_flat_table(frame: pd.DataFrame, path: Path) -> list[Path]:
    """A flat table (``flatten_tables``) compressed at ``path`` (``_compressed``), or, where
    that is over ``SIZE_LIMIT``, one file per cell beside it, ``<stem>.<its axis values>.<suffix>``,
    each with the header and its cell's rows in order: together the same CSV text. The other
    form's files go first, so ``read_flat_table`` never mixes an old whole with new parts.
    Returns the files written."""
    stem, suffix = _parts(path)
    for old in [path, *path.parent.glob(f"{stem}.*.{suffix}")]:
        old.unlink(missing_ok=True)
    whole = _compressed(frame)
    if len(whole) <= SIZE_LIMIT:
        path.write_bytes(whole)
        return [path]
    cells = [c for c in frame.columns if c.startswith(CELL)]
    written = []
    for values, rows in frame.groupby(cells, sort=False):
        written.append(path.with_name(f"{stem}.{'-'.join(map(str, values))}.{suffix}"))
        written[-1].write_bytes(_compressed(rows))
    return written


def read_flat_table(path: Path) -> list[pd.DataFrame]:
    """The flat table ``write_flat_table`` wrote at ``path``: the whole, or its cells' files."""
    stem, suffix = _parts(path)
    paths = [path] if path.exists() else sorted(path.parent.glob(f"{stem}.*.{suffix}"))
    if not paths:
        raise FileNotFoundError(f"{path}: no flat table here, whole or one file per cell")
    return [pd.read_csv(p) for p in paths]


def _resolved(experiment_file: Path, out: Path) -> list[tuple[Cell, Any]]:
    """Each cell of the experiment's record in ``out`` (claimed: written if missing) and its config."""
    domain, settings, axes = read_file(experiment_file)
    experiment = resolve(command(get_domain(domain)), settings, axes, f"{experiment_file.name}: ")
    return [(cell, config) for cell, (_, config) in zip(experiment.cells(), claim(experiment, out))]


def cell_configs(experiment_file: Path, out: Path) -> list[tuple[dict[str, object], Any]]:
    """Each cell's axis values and resolved config (e.g. its env's mission target)."""
    return [(dict(cell.values), config) for cell, config in _resolved(experiment_file, out)]


def _cells(experiment_file: Path, out: Path) -> list[tuple[dict[str, object], ResultStore]]:
    """Each cell of the experiment's record in ``out`` with its values."""
    return [(dict(cell.values), ResultStore(out / CELLS / cell.id, config, config.resume_key()))
            for cell, config in _resolved(experiment_file, out)]


def flatten(experiment_file: Path, out: Path) -> pd.DataFrame:
    """The flat record of the experiment in ``out``: its finished runs, cell by cell in the file's
    order, each cell's in run-id order (as its tables hold them)."""
    frames = []
    for values, store in _cells(experiment_file, out):
        runs = store.read("runs")
        where = store.read("provenance").set_index("run_id").reindex(runs["run_id"]).reset_index(drop=True)
        axes = {axis: [value] * len(runs) for axis, value in values.items() if axis not in RUN_COLUMNS}  # method: the run's
        frames.append(pd.concat([pd.DataFrame(axes), runs[run_columns(runs)], where.reindex(columns=PROVENANCE)], axis=1))
    return pd.concat(frames, ignore_index=True)


def flatten_tables(experiment_file: Path, out: Path, tables: Sequence[str]) -> dict[str, pd.DataFrame]:
    """Each of ``tables`` over every cell of the experiment in ``out``, the cell's axis values in
    front as ``cell.<axis>``."""
    frames: dict[str, list[pd.DataFrame]] = {table: [] for table in tables}
    for values, store in _cells(experiment_file, out):
        for table in tables:
            rows = store.read(table)
            axes = pd.DataFrame({CELL + axis: [value] * len(rows) for axis, value in values.items()})
            frames[table].append(pd.concat([axes, rows], axis=1))
    # a cell with no runs yet adds no rows, and must not turn the others' integer columns into floats
    return {table: pd.concat([p for p in parts if len(p)] or parts, ignore_index=True) for table, parts in frames.items()}


def axes_named(frame: pd.DataFrame, axes: Sequence[str]) -> pd.DataFrame:
    """A flat table with its ``cell.<axis>`` columns named ``<axis>``, each replacing a column of
    the run's own of that name (a ``method`` axis: the same value, or a partition's display name)."""
    return frame.drop(columns=[a for a in axes if a in frame]).rename(columns={f"{CELL}{a}": a for a in axes})


def _convert(flat: Mapping[str, Sequence[pd.DataFrame]], experiment_file: Path, out: Path) -> int:
    """Write every run of the flat tables (each one frame or its cells' frames; ``runs`` among
    them, axes as ``cell.<axis>``) into the experiment's record in ``out`` (each cell's folder as
    ``frd run`` writes it: config, parts, manifests); the runs already there stay. Returns how
    many were added."""
    added = 0
    for values, store in _cells(experiment_file, out):
        cell = pd.Series({CELL + axis: value for axis, value in values.items()})
        mine = {table: _rows_of(frames, cell) for table, frames in flat.items()}
        done = store.finished()
        for rid in mine["runs"]["run_id"]:
            if rid not in done:
                store.save_run({table: frame[frame["run_id"] == rid].reset_index(drop=True)
                                for table, frame in mine.items()})
                added += 1
        store.consolidate()
    return added


def _rows_of(frames: Sequence[pd.DataFrame], cell: pd.Series) -> pd.DataFrame:
    """The rows of one cell, its axis columns dropped; from the one frame that holds them where
    the table came one file per cell (a concat would make an integer column beside another
    cell's empty one a float, written back as ``0.0``)."""
    rows = [f[(f[list(cell.index)] == cell).all(axis=1)].drop(columns=list(cell.index)) for f in frames]
    return pd.concat([r for r in rows if len(r)] or rows[:1], ignore_index=True)


def convert_tables(tables: Mapping[str, Path], experiment_file: Path, out: Path) -> int:
    """``_convert`` of the flat tables at ``tables`` (table → where ``write_flat_table`` wrote it)."""
    return _convert({table: read_flat_table(path) for table, path in tables.items()}, experiment_file, out)


def convert(record: Path, experiment_file: Path, out: Path) -> int:
    """``_convert`` of the flat RL ``record``: one CSV, a run a row, its axes unprefixed."""
    runs = pd.read_csv(record)
    axes = [axis for axis in read_file(experiment_file)[2] if axis != SKIP_KEY]
    cell = runs[axes].add_prefix(CELL)
    return _convert({"runs": [pd.concat([cell, runs[run_columns(runs)]], axis=1)],
                     "provenance": [pd.concat([cell, runs[["run_id"]], runs.reindex(columns=PROVENANCE)], axis=1)]},
                    experiment_file, out)


def add_record_arguments(parser: argparse.ArgumentParser, records: str = "record") -> None:
    """A study script's ``--out`` and its two ways with the flat ``records`` committed there:
    ``--flatten`` (write them from the experiment's folder) or ``--convert`` (restore that folder
    from them first)."""
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"), help="tables, flat records and figures")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--flatten", action="store_true",
                      help=f"also write the flat {records} into --out")
    what.add_argument("--convert", action="store_true",
                      help=f"first turn the flat {records} in --out back into --work (frd run resumes it)")

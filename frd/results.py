"""Results that survive interruption: tidy CSV tables plus the resolved config, seed and versions.

A run's rows land in every table at once when the run finishes (temporary file, then rename),
and ``runs.csv`` is written last, so a run counts as finished only when all its rows are there.
Re-running the same command into the same folder skips the finished runs.
"""
from __future__ import annotations

import json
import os
import platform
import sys
from dataclasses import asdict, is_dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from frd.errors import FrdError

RUNS_TABLE = "runs"
_PACKAGES = ("frd", "torch", "gymnasium", "numpy", "pandas", "stable-baselines3", "scikit-learn")


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def atomic_write_csv(frame: pd.DataFrame, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    frame.to_csv(tmp, index=False)
    os.replace(tmp, path)


def _jsonable(config: Any) -> Any:
    return asdict(config) if is_dataclass(config) else dict(config)


class ResultStore:
    """An output folder of tables keyed by ``run_id``; ``runs.csv`` marks finished runs.

    ``resume_key`` is the part of the config that must match for a folder to be resumed
    (everything but the number of seeds, say); a folder holding another experiment is refused.
    """

    def __init__(self, out_dir: str | Path, config: Any, resume_key: Mapping[str, Any]) -> None:
        self.out = Path(out_dir)
        try:
            self.out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise FrdError(f"cannot create output folder {self.out}: {exc.strerror}; choose another --out") from None
        key = json.loads(json.dumps(dict(resume_key), default=str))
        config_path = self.out / "config.json"
        if config_path.exists():
            saved = json.loads(config_path.read_text()).get("resume_key")
            if saved != key:
                raise FrdError(f"{self.out} holds results of a different experiment; "
                               "use another --out or delete that folder")
        atomic_write_text(config_path, json.dumps(
            {"config": _jsonable(config), "resume_key": key, "versions": package_versions(),
             "command": sys.argv}, indent=2, default=str))
        self._drop_unfinished_rows()

    def path(self, table: str) -> Path:
        return self.out / f"{table}.csv"

    def read(self, table: str) -> pd.DataFrame:
        path = self.path(table)
        return pd.read_csv(path) if path.exists() and path.stat().st_size > 0 else pd.DataFrame()

    def finished(self) -> set[str]:
        runs = self.read(RUNS_TABLE)
        return set(runs["run_id"].astype(str)) if "run_id" in runs else set()

    def save_run(self, tables: Mapping[str, pd.DataFrame]) -> None:
        """Append one finished run's rows to every table; ``runs`` must be among them."""
        if RUNS_TABLE not in tables:
            raise ValueError("a finished run needs its runs row")
        for name in [t for t in tables if t != RUNS_TABLE] + [RUNS_TABLE]:
            frame = tables[name]
            old = self.read(name)
            atomic_write_csv(frame if old.empty else pd.concat([old, frame], ignore_index=True), self.path(name))

    def _drop_unfinished_rows(self) -> None:
        """Rows of a run interrupted between two table writes are removed; the run reruns."""
        done = self.finished()
        for path in self.out.glob("*.csv"):
            if path.stem == RUNS_TABLE:
                continue
            frame = self.read(path.stem)
            if "run_id" in frame and not frame["run_id"].astype(str).isin(done).all():
                atomic_write_csv(frame[frame["run_id"].astype(str).isin(done)], path)

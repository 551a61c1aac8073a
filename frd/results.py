"""Results that survive interruption: tidy CSV tables plus the resolved config, seed and versions.

When a run finishes, each of its tables is written as a part file ``parts/<table>/<run_id>.csv``
(temporary file, then rename), its ``runs`` part last: a run counts as finished only once that
exists. ``consolidate`` gathers the finished parts into ``<table>.csv``. Re-running the same
command into the same folder skips the finished runs; parts of an unfinished run are ignored
and overwritten. Each run's row in ``provenance.csv`` records the package versions, a hash of
frd's own sources, the CPU numba compiled for, and the command that produced it; ``config.json``
holds the resolved config and the resume key.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from dataclasses import asdict, dataclass, is_dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from frd.errors import FrdError

RUNS_TABLE = "runs"
PROVENANCE_TABLE = "provenance"
_PACKAGES = ("frd", "torch", "numba", "gymnasium", "numpy", "pandas", "stable-baselines3", "scikit-learn")
SOURCE_PACKAGES = ("frd",)
"""The project's own package (its domains included): the ``code`` of a provenance row hashes its sources."""
PACKAGE_ROOT = Path(__file__).parent.parent
"""Where ``frd`` stands: the checkout, or site-packages. Not resolved: in a checkout ``frd/agents``,
``frd/envs`` and ``frd/classification`` are links to the top-level folders, walked as ``frd.*``."""


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


@lru_cache(maxsize=None)
def source_hash(packages: tuple[str, ...] = SOURCE_PACKAGES, root: Path = PACKAGE_ROOT,
                exclude: tuple[str, ...] = ()) -> str:
    """sha256 of every Python source of ``packages`` under ``root``, with their paths, but for
    those under the folders ``exclude`` names (relative to ``root``).

    frd's version number does not change with every commit; equal hashes mean the same code.
    Read once per process, when the first run is saved: edit the sources while a batch runs and
    its rows name the edited code.
    """
    digest = hashlib.sha256()
    skipped = tuple(root / folder for folder in exclude)
    for path in sorted(p for package in packages for p in _python_files(root / package)):
        if not any(path.is_relative_to(folder) for folder in skipped):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _python_files(folder: Path) -> list[Path]:
    """The ``.py`` files below ``folder``, following the checkout's links (``rglob`` does not)."""
    return [Path(top) / name for top, _, names in os.walk(folder, followlinks=True) for name in names
            if name.endswith(".py")]


def machine_provenance() -> pd.DataFrame:
    """Where a run computes (one row): package versions, ``code`` (the first 16 hex digits of
    :func:`source_hash`), ``cpu``, the target numba compiles the RL kernels for, and
    ``cpu_features``, a digest of the instruction-set features it compiles with (two machines
    both named "rocketlake" gave different CartPole episodes from one commit): the floats are
    exact on one machine and may differ in the last bits on another. A Ray task adds it to the
    tables it returns, so the row describes the worker."""
    from llvmlite import binding  # numba's compiler; imported here, where it is needed

    features = hashlib.sha256(binding.get_host_cpu_features().flatten().encode()).hexdigest()[:12]
    return pd.DataFrame([{**package_versions(), "code": source_hash()[:16], "cpu": binding.get_host_cpu_name(),
                          "cpu_features": features}])


def atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def atomic_write_csv(frame: pd.DataFrame, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    frame.to_csv(tmp, index=False)
    os.replace(tmp, path)


def _jsonable(config: Any) -> Any:
    return asdict(config) if is_dataclass(config) and not isinstance(config, type) else dict(config)


def run_id(method: str, seed: int) -> str:
    """The id of one run (method, seed) in every table of both domains."""
    return f"{method}-seed{seed}"


@dataclass(frozen=True)
class ResumeKey:
    """What must match for a folder to be resumed: the fields every method shares, and per
    method its resolved options. A folder may gather more methods later; a method already in
    it must come with the same options."""

    common: Mapping[str, Any]
    methods: Mapping[str, Mapping[str, Any]]

    def jsonable(self) -> dict[str, Any]:
        return json.loads(json.dumps({"common": dict(self.common), "methods": dict(self.methods)}, default=str))


class ResultStore:
    """An output folder of tables keyed by ``run_id``; a folder holding another experiment is
    refused. Create it only once the config has been validated: it writes ``config.json``."""

    def __init__(self, out_dir: str | Path, config: Any, resume_key: ResumeKey) -> None:
        self.out = Path(out_dir)
        key = resume_key.jsonable()
        config_path = self.out / "config.json"
        saved = json.loads(config_path.read_text()) if config_path.exists() else None
        if saved is not None:
            old = saved.get("resume_key") or {}
            if not isinstance(old, dict) or set(old) != {"common", "methods"}:
                raise FrdError(f"{self.out} was written by an older frd whose results are not comparable; "
                               "use another --out")
            same_methods = all(old["methods"][m] == key["methods"][m] for m in key["methods"] if m in old["methods"])
            if old["common"] != key["common"] or not same_methods:
                raise FrdError(f"{self.out} holds results of a different experiment; "
                               "use another --out or delete that folder")
            key["methods"] = {**old["methods"], **key["methods"]}
            if key == old:
                return
        try:
            self.out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise FrdError(f"cannot create output folder {self.out}: {exc.strerror}; choose another --out") from None
        atomic_write_text(config_path, json.dumps(
            {"config": _jsonable(config), "resume_key": key, "command": sys.argv}, indent=2, default=str))

    def path(self, table: str) -> Path:
        return self.out / f"{table}.csv"

    def _parts(self, table: str) -> Path:
        return self.out / "parts" / table

    def read(self, table: str) -> pd.DataFrame:
        path = self.path(table)
        return pd.read_csv(path) if path.exists() and path.stat().st_size > 0 else pd.DataFrame()

    def finished(self) -> set[str]:
        return {p.stem for p in self._parts(RUNS_TABLE).glob("*.csv")}

    def save_run(self, tables: Mapping[str, pd.DataFrame]) -> None:
        """Write one finished run's tables; ``runs`` (one row, with ``run_id``) must be among them.
        ``provenance`` comes with them when the run computed elsewhere (else it is this machine's)."""
        if RUNS_TABLE not in tables:
            raise ValueError("a finished run needs its runs row")
        rid = str(tables[RUNS_TABLE]["run_id"].iloc[0])
        where = tables[PROVENANCE_TABLE] if PROVENANCE_TABLE in tables else machine_provenance()
        row = {"run_id": rid, **where.iloc[0].to_dict(), "command": " ".join(sys.argv)}
        tables = {**tables, PROVENANCE_TABLE: pd.DataFrame([row])}
        for name in [t for t in tables if t != RUNS_TABLE] + [RUNS_TABLE]:
            folder = self._parts(name)
            folder.mkdir(parents=True, exist_ok=True)
            atomic_write_csv(tables[name], folder / f"{rid}.csv")

    def consolidate(self) -> None:
        """Gather every finished run's parts into ``<table>.csv`` (ordered by run id)."""
        done = sorted(self.finished())
        for folder in sorted(p for p in (self.out / "parts").glob("*") if p.is_dir()):
            frames = [pd.read_csv(folder / f"{rid}.csv") for rid in done if (folder / f"{rid}.csv").exists()]
            frames = [f for f in frames if not f.empty]
            if frames:
                atomic_write_csv(pd.concat(frames, ignore_index=True), self.path(folder.name))

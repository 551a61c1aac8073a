"""Results that survive interruption: tidy CSV tables plus the resolved config, seed and versions.

When a run finishes, its saved models (``models/<run_id>.pt``, where the domain keeps them) and
each of its tables as a part file ``parts/<table>/<run_id>.csv`` are written (temporary file, then
rename), its ``runs`` part next to last, and last its manifest ``parts/manifest/<run_id>.json``:
each part's rows and the sha256 of its bytes, and of the models' file. A run counts as
finished only while its parts match its manifest: one missing, truncated or altered (a crash
during a copy, a sync tool) is named on stderr in one line and the run is done again, and
``consolidate`` gathers only verified parts into ``<table>.csv``. Re-running the same command
into the same folder skips the finished runs; parts of an unfinished run are ignored and
overwritten. Every write goes through :func:`atomic_write_all`: a full disk (any ``OSError``)
leaves the files as they were and is one line. Each run's row in ``provenance.csv`` records the package versions, a hash of
frd's own sources, the CPU numba compiled for, and the command that produced it; ``config.json``
holds the resolved config and the resume key.
"""
from __future__ import annotations

import csv
import errno
import fcntl
import hashlib
import io
import json
import os
import platform
import sys
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, is_dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import pandas as pd

from frd.errors import FrdError
from frd.plugins import source_roots

RUNS_TABLE = "runs"
PROVENANCE_TABLE = "provenance"
MANIFEST = "manifest"
"""``parts/manifest/<run_id>.json``: per table of a finished run, its rows and its part's sha256;
per file beside the parts (its saved models), its sha256."""
MODELS = "models"
"""The entry of a run's tables that holds its final weights: the bytes of one file (``frd.saved``),
written as ``models/<run_id>.pt`` with the run's parts and checked against its manifest like them."""
SHOWN_DIFFERENCES = 3
"""Differing settings a refused folder names before "…" [our choice: one readable line]."""
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
    return pd.DataFrame([{**package_versions(), "code": code_hash(), "cpu": binding.get_host_cpu_name(),
                          "cpu_features": features}])


def code_hash() -> str:
    """The ``code`` of a provenance row: 16 hex digits of frd's ``source_hash``, or, with plug-in
    methods loaded (``frd.plugins``), of a hash over it and each plug-in's sources."""
    roots = source_roots()
    if not roots:
        return source_hash()[:16]
    digest = hashlib.sha256(source_hash().encode())
    for name, root in roots:
        files = [root] if root.is_file() else sorted(_python_files(root))
        for path in files:
            digest.update(f"{name}/{path.relative_to(root.parent)}".encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def atomic_write_all(writes: Mapping[Path, Callable[[Path], object]]) -> None:
    """Write each ``path`` by calling its writer on a temporary file beside it (folders made as
    needed), then rename them all: a failure (a full disk, any ``OSError``) before the renames
    leaves every file as it was and no temporary file, and is one line (``FrdError``). The
    temporary file is this process's own (``<name>.<pid>.tmp``): processes sharing an experiment
    may write one file at once (the same report), and each rename is whole."""
    temporary = {path: path.with_name(f"{path.name}.{os.getpid()}.tmp") for path in writes}
    current = next(iter(writes), Path())
    try:
        for current, write in writes.items():
            current.parent.mkdir(parents=True, exist_ok=True)
            write(temporary[current])
        for current, tmp in temporary.items():
            os.replace(tmp, current)
    except OSError as exc:
        for tmp in temporary.values():
            with suppress(OSError):
                tmp.unlink(missing_ok=True)
        fix = "free some space" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "fix that (or choose another --out)"
        raise FrdError(f"cannot write {current}: {exc.strerror or exc}; the finished runs are kept: {fix} "
                       "and rerun the same command") from None


@contextmanager
def locked(path: Path, wait: bool = True) -> Iterator[bool]:
    """Hold the lock file ``path`` exclusively, for work that one process of several sharing a
    folder must do alone; whether it is held: without ``wait``, False at once when another process
    holds it. A POSIX record lock (``lockf``): this process's own, not its forked children's, and
    released when it ends, however it ends."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as lock:
        try:
            fcntl.lockf(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError as exc:
            if exc.errno not in (errno.EACCES, errno.EAGAIN):
                raise
            yield False
            return
        yield True


def atomic_write(path: Path, write: Callable[[Path], object]) -> None:
    """:func:`atomic_write_all` of one file."""
    atomic_write_all({path: write})


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(text))


def atomic_write_csv(frame: pd.DataFrame, path: Path) -> None:
    atomic_write(path, lambda tmp: frame.to_csv(tmp, index=False))


UNDATED = {"pdf": {"CreationDate": None}}
"""The metadata that keeps a format's file free of the time it was drawn."""


def save_figure(figure: Any, path: Path) -> None:
    """A matplotlib figure as ``path`` (PNG, to look at) and beside it as PDF (for papers): every
    figure frd writes passes here, so none is PNG only [issue 61]. Both are written together like
    every table; the PDF without its creation date, so that a redraw of the same data gives the same bytes."""
    def writer(fmt: str) -> Callable[[Path], None]:
        return lambda tmp: figure.savefig(tmp, dpi=120, format=fmt, metadata=UNDATED.get(fmt))

    atomic_write_all({p: writer(p.suffix[1:]) for p in dict.fromkeys([path, path.with_suffix(".pdf")])})


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _rows_if_well_formed(path: Path, rid: str) -> int | None:
    """The rows of a part written before manifests, if it shows no damage: whole lines, each
    with the header's fields, and only its own run's rows (None: damaged)."""
    text = path.read_text()
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or not text.endswith("\n") or any(len(row) != len(rows[0]) for row in rows):
        return None
    column = rows[0].index("run_id") if "run_id" in rows[0] else None
    if column is not None and any(row[column] != rid for row in rows[1:]):
        return None
    return len(rows) - 1


_UNSET = object()


def _shown(value: Any) -> str:
    return "unset" if value is _UNSET else json.dumps(value)


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """``name: old → new`` for each setting that differs between two resume keys (their common
    fields, then the options of the methods both hold, as ``method.option``)."""
    pairs = [(name, old["common"].get(name, _UNSET), new["common"].get(name, _UNSET))
             for name in dict.fromkeys([*old["common"], *new["common"]])]
    for method in (m for m in new["methods"] if m in old["methods"]):
        was, now = old["methods"][method], new["methods"][method]
        pairs += [(f"{method}.{name}", was.get(name, _UNSET), now.get(name, _UNSET)) for name in dict.fromkeys([*was, *now])]
    return [f"{name}: {_shown(a)} → {_shown(b)}" for name, a, b in pairs if a != b]


def _jsonable(config: Any) -> Any:
    return asdict(config) if is_dataclass(config) and not isinstance(config, type) else dict(config)


def run_id(method: str, seed: int) -> str:
    """The id of one run (method, seed) in every table of both domains."""
    return f"{method}-seed{seed}"


def method_of(rid: str) -> str:
    """The method of a run id (``run_id``'s inverse): what a folder's config runs, read without its tables."""
    return rid.rsplit("-seed", 1)[0]


def resumed(done: int, total: int, out: str | Path) -> str | None:
    """What a rerun says once, on stderr, when ``out`` already holds ``done`` of its ``total`` runs
    (None when it holds none): why it has less to do than the first time, before its progress bar."""
    if done <= 0:
        return None
    rest = total - done
    return f"frd: {done} of {total} runs already done in {out}; " + (f"running the other {rest}" if rest else "nothing to run")


@dataclass(frozen=True)
class ResumeKey:
    """What must match for a folder to be resumed: the fields every method shares, and per
    method its resolved options. A folder may gather more methods later; a method already in
    it must come with the same options."""

    common: Mapping[str, Any]
    methods: Mapping[str, Mapping[str, Any]]
    retired: tuple[str, ...] = ()
    """Common fields a folder written before may hold that no longer enter the key (e.g. a value
    that is now a name in ``methods``): left out of the saved key when comparing, so that folder resumes."""

    def jsonable(self) -> dict[str, Any]:
        return json.loads(json.dumps({"common": dict(self.common), "methods": dict(self.methods)}, default=str))


class ResultStore:
    """An output folder of tables keyed by ``run_id``; a folder holding another experiment is
    refused. Create it only once the config has been validated: it writes ``config.json``."""

    def __init__(self, out_dir: str | Path, config: Any, resume_key: ResumeKey) -> None:
        self.out = Path(out_dir)
        self._noticed: set[str] = set()
        key = resume_key.jsonable()
        config_path = self.out / "config.json"
        old, saved_config = self._saved(config_path)
        if old is not None:
            old["common"] = {k: v for k, v in old["common"].items() if k not in resume_key.retired}
            changed = differences(old, key)
            if changed:
                shown = ", ".join(changed[:SHOWN_DIFFERENCES]) + (", …" if len(changed) > SHOWN_DIFFERENCES else "")
                raise FrdError(f"{self.out} holds results of a different experiment ({shown}); "
                               "use another --out or delete that folder")
            key["methods"] = {**old["methods"], **key["methods"]}
            if key == old and saved_config == json.loads(json.dumps(_jsonable(config), default=str)):
                return  # else the config (its seeds, say) is recorded as this command resolved it
        if not self.out.is_dir() and self.out.exists():
            raise FrdError(f"cannot create output folder {self.out}: it is a file; choose another --out")
        atomic_write_text(config_path, json.dumps(
            {"config": _jsonable(config), "resume_key": key, "command": sys.argv}, indent=2, default=str))

    @classmethod
    def existing(cls, out_dir: str | Path) -> ResultStore:
        """A folder written before, opened to read its finished runs (``frd report``, ``frd eval``):
        no config is checked or written."""
        store = cls.__new__(cls)
        store.out, store._noticed = Path(out_dir), set()
        return store

    def _saved(self, path: Path) -> tuple[dict[str, Any] | None, Any]:
        """The resume key and config ``config.json`` holds, if there is one; a damaged or foreign
        one is refused."""
        if not path.exists():
            return None, None
        try:
            saved = json.loads(path.read_text())
        except (OSError, ValueError) as exc:  # ValueError: JSONDecodeError, UnicodeDecodeError
            reason = exc.strerror if isinstance(exc, OSError) else str(exc).splitlines()[0]
            raise FrdError(f"{path} cannot be read ({reason}): if {self.out} holds this very experiment, move "
                           "config.json aside and rerun to keep its finished runs; else use another --out") from None
        if not isinstance(saved, dict) or "config" not in saved:
            raise FrdError(f"{path} was not written by frd; move it aside or use another --out")
        old = saved.get("resume_key") or {}
        if not isinstance(old, dict) or set(old) != {"common", "methods"} or not isinstance(old["common"], dict) \
                or not isinstance(old["methods"], dict) or not all(isinstance(o, dict) for o in old["methods"].values()):
            raise FrdError(f"{self.out} was written by an older frd whose results are not comparable; "
                           "use another --out")
        return old, saved["config"]

    def path(self, table: str) -> Path:
        return self.out / f"{table}.csv"

    def _parts(self, table: str) -> Path:
        return self.out / "parts" / table

    def read(self, table: str) -> pd.DataFrame:
        path = self.path(table)
        return pd.read_csv(path) if path.exists() and path.stat().st_size > 0 else pd.DataFrame()

    def _manifest(self, rid: str) -> Path:
        return self._parts(MANIFEST) / f"{rid}.json"

    def models(self, rid: str) -> Path:
        """Where run ``rid``'s saved models are (:data:`MODELS`)."""
        return self.out / MODELS / f"{rid}.pt"

    def _table_names(self) -> list[str]:
        return sorted(p.name for p in (self.out / "parts").glob("*") if p.is_dir() and p.name != MANIFEST)

    def finished(self) -> set[str]:
        """The runs whose parts are verified (:meth:`verified`)."""
        return set(self.verified())

    def verified(self, left_out: str = "is run again") -> dict[str, list[str]]:
        """Each finished run whose parts (and files) match its manifest, with its tables. A run whose
        manifest or parts are missing, truncated or altered is named on stderr (one line, once:
        ``frd: <run> <left_out>: <what is wrong>``) and left out, to be run again. A run finished
        before manifests existed is checked as far as its parts show (:func:`_well_formed`) and
        then given its manifest."""
        ids = {p.stem for p in self._parts(RUNS_TABLE).glob("*.csv")} | {p.stem for p in self._parts(MANIFEST).glob("*.json")}
        runs = {}
        for rid in sorted(ids):
            tables, problem = self._check(rid) if self._manifest(rid).exists() else self._adopt(rid)
            if problem is None:
                runs[rid] = tables
            elif rid not in self._noticed:
                self._noticed.add(rid)
                print(f"frd: {rid} {left_out}: {problem}", file=sys.stderr)
        return runs

    def _check(self, rid: str) -> tuple[list[str], str | None]:
        """The tables of ``rid``'s manifest, and what is wrong with its parts (None: nothing)."""
        manifest = self._manifest(rid)
        try:
            saved = json.loads(manifest.read_text())
            recorded = {str(name): str(entry["sha256"]) for name, entry in saved["tables"].items()}
            files = {str(name): str(entry["sha256"]) for name, entry in saved.get("files", {}).items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return [], f"{manifest.relative_to(self.out)} is damaged"
        if RUNS_TABLE not in recorded:
            return [], f"{manifest.relative_to(self.out)} is damaged"
        paths = {self._parts(name) / f"{rid}.csv": digest for name, digest in recorded.items()}
        for path, digest in {**paths, **{self.out / name: digest for name, digest in files.items()}}.items():
            where = path.relative_to(self.out)
            try:
                if _sha256(path) != digest:
                    return [], f"{where} is truncated or altered (its sha256 differs from its manifest's)"
            except FileNotFoundError:
                return [], f"{where} is missing"
            except OSError as exc:
                return [], f"{where} cannot be read ({exc.strerror})"
        return list(recorded), None

    def _adopt(self, rid: str) -> tuple[list[str], str | None]:
        """A run finished before manifests: its parts, if well formed, and a manifest for them."""
        tables = [name for name in self._table_names() if (self._parts(name) / f"{rid}.csv").exists()]
        if RUNS_TABLE not in tables:
            return [], f"{self._parts(RUNS_TABLE).relative_to(self.out) / (rid + '.csv')} is missing"
        rows = {}
        for name in tables:
            part = self._parts(name) / f"{rid}.csv"
            try:
                count = _rows_if_well_formed(part, rid)
            except (OSError, ValueError, csv.Error) as exc:  # ValueError: not text
                return [], f"{part.relative_to(self.out)} cannot be read ({exc})"
            if count is None:
                return [], f"{part.relative_to(self.out)} is truncated or altered (written before manifests)"
            rows[name] = count
        self._write_manifest(rid, rows)
        return tables, None

    def _write_manifest(self, rid: str, rows: Mapping[str, int], files: tuple[Path, ...] = ()) -> None:
        entries = {name: {"rows": count, "sha256": _sha256(self._parts(name) / f"{rid}.csv")} for name, count in rows.items()}
        manifest: dict[str, Any] = {"run_id": rid, "tables": entries}
        if files:
            manifest["files"] = {str(path.relative_to(self.out)): {"sha256": _sha256(path)} for path in files}
        atomic_write_text(self._manifest(rid), json.dumps(manifest, indent=1))

    def save_run(self, tables: Mapping[str, Any]) -> None:
        """Write one finished run's tables; ``runs`` (one row, with ``run_id``) must be among them.
        ``provenance`` comes with them when the run computed elsewhere (else it is this machine's;
        its ``command``, where it has one, is kept: a record restored from a flat copy still names
        the command that ran it, else it is this process's), its saved models (bytes) when it has
        any (:data:`MODELS`). A run saved before (then found damaged) first stops counting as finished."""
        if RUNS_TABLE not in tables:
            raise ValueError("a finished run needs its runs row")
        models: bytes | None = tables.get(MODELS)
        tables = {name: frame for name, frame in tables.items() if name != MODELS}
        rid = str(tables[RUNS_TABLE]["run_id"].iloc[0])
        where = tables[PROVENANCE_TABLE] if PROVENANCE_TABLE in tables else machine_provenance()
        row = {"run_id": rid, **where.iloc[0].to_dict()}
        row.setdefault("command", " ".join(sys.argv))
        tables = {**tables, PROVENANCE_TABLE: pd.DataFrame([row])}
        try:
            self._manifest(rid).unlink(missing_ok=True)
            (self._parts(RUNS_TABLE) / f"{rid}.csv").unlink(missing_ok=True)
        except OSError as exc:
            raise FrdError(f"cannot replace the parts of {rid} in {self.out}: {exc.strerror}; "
                           "fix the folder or choose another --out") from None
        files: tuple[Path, ...] = ()
        if models is not None:
            data, files = models, (self.models(rid),)
            atomic_write(files[0], lambda tmp: tmp.write_bytes(data))
        for name in [t for t in tables if t != RUNS_TABLE] + [RUNS_TABLE]:
            atomic_write_csv(tables[name], self._parts(name) / f"{rid}.csv")
        self._write_manifest(rid, {name: len(frame) for name, frame in tables.items()}, files)

    def consolidate(self) -> None:
        """Gather every verified run's parts into ``<table>.csv`` (ordered by run id); a table no
        verified run has rows of is removed. All tables change together or none does."""
        runs = self.verified()
        writes, stale = {}, []
        for name in sorted(set(self._table_names()) | {t for tables in runs.values() for t in tables}):
            parts = [self._parts(name) / f"{rid}.csv" for rid in sorted(runs) if name in runs[rid]]
            if any(_has_rows(part) for part in parts):
                writes[self.path(name)] = _concatenated(parts)
            elif self.path(name).exists():
                stale.append(self.path(name))
        atomic_write_all(writes)
        for path in stale:
            with suppress(FileNotFoundError):
                path.unlink()


def _has_rows(part: Path) -> bool:
    with part.open() as f:
        return sum(1 for _ in zip(range(2), f)) > 1


def _concatenated(parts: list[Path]) -> Callable[[Path], None]:
    """A writer of the parts' rows as one table (read when it writes: one table in memory at a time)."""
    def write(path: Path) -> None:
        frames = [frame for frame in map(pd.read_csv, parts) if not frame.empty]
        pd.concat(frames, ignore_index=True).to_csv(path, index=False)
    return write

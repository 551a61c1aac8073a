"""Where runs execute: ``local`` (in this process, one group) or ``ray`` (groups of runs as Ray
tasks over a machine's cores or a cluster), whatever their domain: a domain says how one group of
its runs executes (``Runs``; RL: one batch of the engine), a backend deals the groups out.

A Ray task runs the domain's own group code and streams each finished run's tables back
the moment it finishes (a streaming generator); the driver saves it through ``ResultStore`` as a
local run would. So results live with the driver (no shared filesystem), and resume, Ctrl-C and
``kill`` behave as they do locally: a run counts once its tables are saved, a run in flight is
redone. The backend is recorded in ``config.json`` but is no part of the resume key: a sweep
started on one backend resumes on the other.

Engine settings are set here, not left to the environment: no usage statistics, a capped object
store, a short temp dir (Unix socket paths must stay short) and, on one machine, loopback only.

A Ray started here (``--address local``) ends with frd however frd ends: a reaper (``frd.reaper``)
ends Ray's processes and removes its temp dir if frd is killed (``kill -9`` left Ray's agents
running before). A worker that dies mid-task has its group run again by Ray (``TASK_RETRIES``);
the driver saves each run once, as it arrives, so the tables are those of a run without the fault.
"""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import warnings
from dataclasses import asdict, dataclass, is_dataclass
from typing import Any, Callable, Iterator, Protocol, Sequence

from frd import reaper
from frd.errors import FrdError
from frd.remote import Link
from frd.results import PROVENANCE_TABLE, machine_provenance
from frd.workers import in_processes

BACKENDS = ("local", "ray")
OBJECT_STORE_BYTES = 256 * 1024 ** 2
"""Object store of a Ray started here: tables and a dataset fit; Ray's default is 30 % of RAM in /dev/shm."""
MISSING_RAY = "--backend ray needs Ray: pip install 'frd[ray]'"
TASK_RETRIES = 3
"""Times Ray runs a group again whose worker died (Ray's default for tasks, made explicit: a
group's runs are deterministic, so a rerun streams the same tables)."""

Tables = dict  # {"runs": DataFrame, ...}: one finished run


class Runs(Protocol):
    """How a domain's runs execute, as a backend deals them out: ``shared`` is what every run of a
    sweep shares (RL: the config; classification: the dataset), an item is one run."""

    def threads(self, shared: Any, items: Sequence[Any]) -> int:
        """CPUs one group of ``items`` keeps busy (a Ray task's share)."""

    def run_group(self, shared: Any, items: Sequence[Any], on_step: Callable[[], object],
                  on_status: Callable[[str], None]) -> Iterator[tuple[int, Tables]]:
        """(index into ``items``, tables) of each run of one group, in this process, as it finishes;
        ``on_step`` after each step of a run (a classification round), ``on_status`` says what runs."""

    def run_remote(self, shared: Any, item: Any, link: Link, on_step: Callable[[], object]) -> Tables:
        """One run with its participants reached over ``link`` (Flower): its tables plus ``transport``."""


@dataclass(frozen=True)
class Backend:
    name: str = "local"             # local or ray
    address: str = "local"          # ray: local (start one here), auto, or HOST:PORT of a running cluster
    groups: int | None = None       # ray: tasks per sweep (default CPUs ÷ threads)
    cpus: int | None = None         # ray with address local: CPUs of the Ray started here (default all)
    workers: int = 1                # local: processes that split the runs (1: this process, one batch)

    def __post_init__(self) -> None:
        if self.name not in BACKENDS:
            raise FrdError(f"unknown backend {self.name!r}; choose {' or '.join(BACKENDS)}")
        for option, value in (("groups", self.groups), ("cpus", self.cpus), ("workers", self.workers)):
            if value is not None and value < 1:
                raise FrdError(f"--{option} must be at least 1, got {value}")
        if self.name == "local" and (self.address != "local" or self.groups or self.cpus):
            raise FrdError("--address, --groups and --cpus need --backend ray")
        if self.name == "ray" and self.workers != 1:
            raise FrdError("--workers splits the local backend's runs over processes; on Ray, --groups does")
        if self.address not in ("local", "auto"):
            host, _, port = self.address.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise FrdError(f"--address is local, auto or HOST:PORT (e.g. 10.0.0.5:6379), got {self.address!r}")
        if self.cpus is not None and self.address != "local":
            raise FrdError("--cpus sizes a Ray started here (--address local); a cluster's nodes set "
                           "theirs with ray start --num-cpus")

    @property
    def local(self) -> bool:
        """One batch in this process."""
        return self.name == "local" and self.workers == 1

    def record(self, config: Any) -> dict:
        """``config`` as saved in config.json, with this backend beside it (not in the resume key)."""
        saved = asdict(config) if is_dataclass(config) and not isinstance(config, type) else dict(config)
        return {**saved, "backend": asdict(self)}

    def execute(self, runs: Runs, shared: Any, items: Sequence[Any], on_step: Callable[[], object] = lambda: None,
                on_status: Callable[[str], None] = lambda text: None) -> Iterator[tuple[int, Tables]]:
        """(index into ``items``, tables) of each run as it finishes. Locally one group, in this
        process, or ``workers`` groups in processes of their own (``frd.workers``); on Ray in
        groups, ``shared`` put once. ``on_step`` is called in this process only (a worker's or a
        task's callbacks stay where it runs)."""
        if self.local:
            yield from runs.run_group(shared, items, on_step, on_status)
            return
        if not items:
            return
        if self.name == "local":
            groups = group_runs(list(range(len(items))), self.workers)
            for g, i, tables in in_processes(_group, runs, shared, [[items[i] for i in group] for group in groups],
                                             on_status):
                yield groups[g][i], tables
            return
        threads = runs.threads(shared, items)
        with RaySession(self) as session:
            groups = group_runs(list(range(len(items))), session.groups(threads, len(items)))
            on_status(f"ray: {len(groups)} groups on {session.cpus:g} CPUs")
            task = session.ray.remote(_group).options(num_returns="streaming", num_cpus=threads,
                                                     max_retries=TASK_RETRIES)
            shared_ref = session.ray.put(shared)
            gens = [task.remote(runs, shared_ref, [items[i] for i in group]) for group in groups]
            for g, (i, tables) in session.stream(gens):
                yield groups[g][i], tables


class Executor(Protocol):
    """Where a sweep's runs execute: a ``Backend``, or a Flower grid (``frd.flower.apps``)."""

    @property
    def local(self) -> bool:
        """This process: RL then runs its sweep as one batch that resumes from its checkpoint
        (``frd.rl.experiment``) rather than through ``execute``."""

    def record(self, config: Any) -> dict: ...

    def execute(self, runs: Runs, shared: Any, items: Sequence[Any], on_step: Callable[[], object] = lambda: None,
                on_status: Callable[[str], None] = lambda text: None) -> Iterator[tuple[int, Tables]]: ...


LOCAL = Backend()
"""This process, one batch: the default backend."""


def group_runs(runs: Sequence, groups: int) -> list[list]:
    """Deal ``runs`` (method-major, as the sweeps list them) round-robin into at most ``groups``
    groups, so that every group mixes methods and seeds and the costly methods spread evenly."""
    groups = max(1, min(groups, len(runs)))
    return [list(runs[g::groups]) for g in range(groups)]


# -- Ray ---------------------------------------------------------------------------------------
def _is_loopback(address: str) -> bool:
    host = address.rpartition(":")[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")


def _check_listening(address: str, timeout: float = 5.0) -> None:
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise FrdError(f"no Ray head answers at --address {address} ({exc.strerror or exc}); "
                       f"start one there with: ray start --head --port {port}") from None


def _keep_loopback() -> None:
    """Keep a loopback address on loopback: the node address 127.0.0.1, not the LAN's.

    Ray rewrites 127.0.0.1 in an address to this machine's LAN address unless
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` is 0, and reads that variable once, when Ray is imported.
    With Ray imported before frd set it (by the caller, or an earlier test), a driver joining
    127.0.0.1:PORT was sent to LAN-IP:PORT, where no GCS listens, and retried for minutes (seen:
    a test's 300 s timeout). So the variable is set for the processes Ray starts, and Ray's
    already-read copy too (Ray 2.55: ``ray_constants.ENABLE_RAY_CLUSTER``) [our choice]."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    from ray._private import ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = False


def _let_workers_set_their_title() -> None:
    """Let the workers of a Ray started here take their titles (``ray::<task>``, what ``ps`` shows).

    Importing Ray sets ``RAY_CLIENT_MODE=0``, in a worker before it sets its title. A worker
    inherited the variable from this process, and where the raylet's hash map put it first in the
    worker's environment (1 Ray start in 78 measured, by the other variables), setting it pointed
    ``environ[0]`` at a copy on the heap; Ray's setproctitle finds argv by walking back from
    ``environ[0]``, so it gave up and the worker kept its command line while it ran its task (a test
    waited 180 s for ``ray::_group``). Without the variable here, the worker's import appends it."""
    os.environ.pop("RAY_CLIENT_MODE", None)  # Ray reads it at its import only, done by now


def import_ray():
    """Ray, or a one-line error naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise FrdError(MISSING_RAY) from None
    return ray


class RaySession:
    """Ray for the length of a sweep: started here (address local) and stopped after, or joined
    (auto, HOST:PORT) and left running. A Ray already initialised in this process is used as is."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.connected = False  # this process called ray.init: shut down (disconnect) after
        self.started = False    # …and that started Ray here: the shutdown stops it too
        self.temp_dir: str | None = None
        self.reaper: subprocess.Popen | None = None

    def __enter__(self) -> "RaySession":
        os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
        os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")  # silences a FutureWarning
        # Ray runs its workers at nice 15 by default, so on a shared machine any other job starves
        # the sweep (measured: a 180 s run took 920 s beside one busy process); run them like the local backend.
        os.environ.setdefault("RAY_worker_niceness", "0")
        address = self.backend.address
        self.ray = ray = import_ray()
        if address == "local" or _is_loopback(address):
            _keep_loopback()
        if not ray.is_initialized():
            options: dict[str, Any] = dict(logging_level=logging.WARNING, log_to_driver=True)
            if address == "local":
                self.temp_dir = tempfile.mkdtemp(prefix="frdray", dir="/tmp")
                self.reaper = reaper.start(remove=(self.temp_dir,))
                _let_workers_set_their_title()
                options.update(address="local", num_cpus=self.backend.cpus or os.cpu_count() or 1,
                               object_store_memory=OBJECT_STORE_BYTES, include_dashboard=False,
                               _temp_dir=self.temp_dir, _node_ip_address="127.0.0.1")
            else:
                if address != "auto":
                    _check_listening(address)  # Ray itself would retry an absent head forever
                options.update(address=address)
            on_sigterm = signal.getsignal(signal.SIGTERM)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", FutureWarning)
                    ray.init(**options)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                self._cleanup()
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise FrdError(f"cannot start or reach Ray at --address {address}: {first}") from None
            finally:  # ray.init makes SIGTERM exit at once; kill must stop a sweep like Ctrl-C, as locally
                if on_sigterm is not None and threading.current_thread() is threading.main_thread():
                    signal.signal(signal.SIGTERM, on_sigterm)
            self.connected, self.started = True, address == "local"
        self.cpus = float(ray.cluster_resources().get("CPU", 1))
        self.pending: list = []
        return self

    def groups(self, threads: int, runs: int) -> int:
        return min(self.backend.groups or max(1, int(self.cpus // threads)), runs)

    def stream(self, generators: list) -> Iterator[Any]:
        """(generator index, item) of every item of the streaming ``generators``, as they arrive."""
        ray = self.ray
        index = {id(gen): i for i, gen in enumerate(generators)}
        self.pending = list(generators)
        while self.pending:
            ready, _ = ray.wait(self.pending, num_returns=1)
            for gen in ready:
                try:
                    ref = next(gen)
                except StopIteration:
                    self.pending.remove(gen)
                    continue
                yield index[id(gen)], ray.get(ref)

    def __exit__(self, *exc_info) -> None:
        if not self.started:  # interrupted on a cluster that stays up: stop the groups still running
            for gen in self.pending:  # (a Ray started here stops with everything it runs)
                try:
                    self.ray.cancel(gen)
                except Exception:  # noqa: BLE001 — finished or gone meanwhile
                    pass
        self.pending = []
        self._cleanup()

    def _cleanup(self) -> None:
        if self.connected:
            self.ray.shutdown()  # stops the processes this init started, if any
            self.connected = self.started = False
        if self.temp_dir:
            for _ in range(10):  # Ray's last exits may still write logs
                shutil.rmtree(self.temp_dir, ignore_errors=True)
                if not os.path.exists(self.temp_dir):
                    break
                time.sleep(0.2)
            self.temp_dir = None
        reaper.stop(self.reaper)
        self.reaper = None


def _group(runs: Runs, shared: Any, items: list[Any]) -> Iterator[tuple[int, Tables]]:
    """A Ray task or a worker process: one group of runs, each run's tables yielded, with where it ran, as it finishes."""
    for i, tables in runs.run_group(shared, items, lambda: None, lambda text: None):
        yield i, {**tables, PROVENANCE_TABLE: machine_provenance()}


# -- CLI ---------------------------------------------------------------------------------------
def add_backend_arguments(parser: argparse.ArgumentParser, default: str = "local") -> None:
    group = parser.add_argument_group("backend (where runs execute)")
    group.add_argument("--backend", choices=BACKENDS, default=default,
                       help=f"local: this process; ray: groups of runs as Ray tasks (default {default})")
    group.add_argument("--address", default="local",
                       help="ray: local (start Ray here, stopped after), auto (the running cluster, "
                            "e.g. under ray job submit) or HOST:PORT of its head (default local)")
    group.add_argument("--groups", type=int, help="ray: Ray tasks, each one batch of runs (default CPUs ÷ --threads)")
    group.add_argument("--cpus", type=int, help="ray with --address local: CPUs Ray may use (default all)")
    group.add_argument("--workers", type=int, default=1, metavar="N",
                       help="local: processes that split the runs, e.g. one per core (tables as one batch's; "
                            "default 1: this process, one batch that resumes mid-run)")


def backend_from_args(args: argparse.Namespace) -> Backend:
    """The backend the options ask for; bad values raise a one-line ``FrdError``."""
    return Backend(args.backend, args.address, args.groups, args.cpus, args.workers)

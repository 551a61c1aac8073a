"""``--workers N``: the local backend's runs dealt over N processes of this machine, so that one
experiment keeps every core busy without Ray.

Each worker is a fresh (spawned) Python process that runs one group of runs with the domain's own
group code (``Runs.run_group``, as a Ray task does) and sends each run's tables back the moment it
finishes; the driver saves them as they arrive. A run's tables depend on that run alone (batch
independence, tested), so they are those of one batch in this process, whatever the split. What a
worker leaves unfinished when the driver stops (Ctrl-C, ``kill``) is redone by the next call,
as on Ray: the mid-run checkpoint is the single batch's (``--workers 1``).

No worker outlives the driver: each asks the kernel for SIGKILL when the driver dies
(``PR_SET_PDEATHSIG``), ignores Ctrl-C (the driver stops it), and the driver kills every worker
still running when it leaves, by its PID.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import os
import pickle
import queue
import signal
import sys
import traceback
from typing import Any, Callable, Iterator, Sequence

from frd.errors import FrdError

PR_SET_PDEATHSIG = 1
"""prctl(2) option: the signal this process gets when the thread that started it ends."""
POLL_S = 0.5
"""How often the driver, waiting for tables, checks that its workers are alive."""
DONE = -1
"""The run index of a worker's last message: its group is finished."""


def _end_with(parent: int) -> None:
    """This process gets SIGKILL when ``parent`` dies, and ends now if it already has."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def _work(group: Callable[..., Iterator[tuple[int, Any]]], runs: Any, shared: Any, items: list, index: int,
          out: Any, parent: int) -> None:
    """A worker: run ``group(runs, shared, items)`` and put (group index, run index, tables) on
    ``out`` for each run, then ``DONE``; a failure goes to the driver as the exception and its traceback."""
    _end_with(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        for i, tables in group(runs, shared, items):
            out.put((index, i, tables))
        out.put((index, DONE, None))
    except BaseException as exc:  # noqa: BLE001 — every failure must reach the driver, which re-raises it
        try:
            pickle.dumps(exc)
        except Exception:  # noqa: BLE001 — an exception that cannot cross still sends its traceback
            exc = RuntimeError(str(exc))
        out.put((index, DONE, (exc, traceback.format_exc())))


def in_processes(group: Callable[..., Iterator[tuple[int, Any]]], runs: Any, shared: Any,
                 groups: Sequence[Sequence[Any]], on_status: Callable[[str], None]) -> Iterator[tuple[int, int, Any]]:
    """(group index, run index in its group, tables) of each run of ``groups``, each group in a
    worker process of its own, as the runs finish. A worker's ``FrdError`` is raised here as it is;
    any other failure, or a worker that died, is a ``RuntimeError`` with the worker's traceback."""
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    workers = [context.Process(target=_work, args=(group, runs, shared, list(items), g, out, os.getpid()), daemon=True)
               for g, items in enumerate(groups)]
    on_status(f"{len(workers)} worker processes")
    try:
        for worker in workers:
            worker.start()
        running = set(range(len(workers)))
        while running:
            try:
                g, i, tables = out.get(timeout=POLL_S)
            except queue.Empty:
                dead = [g for g in running if workers[g].exitcode not in (None, 0)]
                if dead:
                    raise RuntimeError(f"worker process {workers[dead[0]].pid} died "
                                       f"(exit code {workers[dead[0]].exitcode})") from None
                continue
            if i != DONE:
                yield g, i, tables
                continue
            running.discard(g)
            if tables is not None:
                exc, trace = tables
                if isinstance(exc, FrdError):
                    raise exc
                raise RuntimeError(f"a worker process failed:\n{trace}")
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.kill()
        for worker in workers:
            worker.join()
        out.close()

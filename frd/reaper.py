"""No orphans: a watchdog process that ends what an frd process started once that process is gone,
however it ended (``kill -9`` included).

Flower's simulation and a Ray started here run processes that are not frd's children: Flower's
SuperExec starts its simulation process in a session of its own and that process starts Ray; Ray's
raylet starts agents. ``PR_SET_PDEATHSIG`` (``frd.flower.launch``) reaches only direct children,
and these grandchildren outlived a ``kill -9`` of frd (measured: Flower's simulation process and its
Ray stayed, and a local Ray's dashboard and runtime-env agents stayed). So, while a command that
starts such processes runs, a reaper runs beside it: in a session of its own (a signal to frd's
process group does not reach it), it notes frd's descendants every ``POLL_S`` and, once frd is
gone, sends SIGTERM to each of them and to everything in the sessions they lead, SIGKILL after
``GRACE_S``, and removes the folders it was given (a Ray temp dir, a Flower home). Linux only (it
reads /proc); elsewhere ``start`` starts nothing. [our choice, after Ray's own reaper process]

frd's own children are spared the SIGTERM: each was started with a death signal, which the kernel
has already sent (ours SIGTERM, ``frd.flower.launch``; Ray's fate-shared processes SIGKILL). A
second SIGTERM ends a SuperNode before it leaves its SuperLink: Flower's handler restores the
default action on the first signal, and the second, 60 ms later, killed it mid-shutdown, so the
run learnt of the lost participant only from its missed heartbeats, 53 s later instead of 3
(measured with strace, Flower 1.42). They still get SIGKILL after ``GRACE_S``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

POLL_S = 0.2
"""How often the reaper notes the descendants and looks for its parent."""
GRACE_S = 6.0
"""How long a process has after SIGTERM (a SuperNode leaving its SuperLink) before SIGKILL: a little
more than Flower's own force exit (``FORCE_EXIT_TIMEOUT_SECONDS``, 5 s), so that a SuperNode that can
still deactivate itself does. One killed at 3 s mid-run left the SuperLink to notice it by its missing
heartbeats (45 s)."""

Identity = tuple[int, int]
"""(pid, start time in clock ticks): a PID that the kernel has since given to another process differs."""


def _stat(pid: int) -> tuple[int, int, int, str] | None:
    """(parent pid, session id, start time, state) of ``pid``, None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), int(fields[3]), int(fields[19]), fields[0]


def processes() -> dict[int, tuple[int, int, int, str]]:
    """Every process of this machine: pid -> (parent pid, session id, start time, state)."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            table[int(entry)] = stat
    return table


def descendants(root: int, table: dict[int, tuple[int, int, int, str]] | None = None) -> set[Identity]:
    """The processes below ``root``, each with its start time."""
    table = processes() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (parent, *_rest) in table.items():
        children.setdefault(parent, []).append(pid)
    found, stack = set(), list(children.get(root, []))
    while stack:
        pid = stack.pop()
        found.add((pid, table[pid][2]))
        stack.extend(children.get(pid, []))
    return found


def alive(identities: set[Identity]) -> set[Identity]:
    """Those of ``identities`` still running (a zombie has ended)."""
    return {(pid, start) for pid, start in identities
            if (stat := _stat(pid)) is not None and stat[2] == start and stat[3] != "Z"}


def _signal(identities: set[Identity], sig: signal.Signals) -> None:
    for pid, _ in alive(identities):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def reap(noted: set[Identity], signalled: set[Identity]) -> None:
    """SIGTERM to ``noted`` and to every process in a session one of them leads, except those the
    kernel has ``signalled`` (see the module's docstring); SIGKILL to what is left after ``GRACE_S``."""
    table = processes()
    sessions = {pid for pid, start in noted if pid in table and table[pid][1:3] == (pid, start)}  # leaders, not a reused PID
    targets = alive(noted) | {(pid, stat[2]) for pid, stat in table.items() if stat[1] in sessions and pid != os.getpid()}
    _signal(targets - signalled, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while alive(targets) and time.monotonic() < deadline:
        time.sleep(0.05)
    _signal(targets, signal.SIGKILL)


def watch(parent: int, remove: list[str]) -> None:
    """Note ``parent``'s descendants until it is gone, then reap them, its own children aside from
    the SIGTERM, and remove ``remove``."""
    noted: set[Identity] = set()
    children: set[Identity] = set()
    while os.getppid() == parent:
        table = processes()
        below = {(pid, start) for pid, start in descendants(parent, table) if pid != os.getpid()}
        noted = alive(noted) | below
        children = alive(children) | {(pid, start) for pid, start in below if table[pid][0] == parent}
        time.sleep(POLL_S)
    reap(noted, children)
    for folder in remove:
        shutil.rmtree(folder, ignore_errors=True)


def start(remove: tuple[str, ...] = ()) -> subprocess.Popen | None:
    """A reaper for this process; ``stop`` it when what it guards has ended cleanly."""
    if not sys.platform.startswith("linux"):
        return None
    command = [sys.executable, "-m", "frd.reaper", "--parent", str(os.getpid())]
    for folder in remove:
        command += ["--remove", folder]
    return subprocess.Popen(command, start_new_session=True, stdin=subprocess.DEVNULL)


def stop(reaper: subprocess.Popen | None) -> None:
    """End ``reaper`` without reaping (its parent lives on)."""
    if reaper is not None:
        reaper.kill()
        reaper.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m frd.reaper", description=__doc__.splitlines()[0])
    parser.add_argument("--parent", type=int, required=True, help="the frd process whose descendants to end when it is gone")
    parser.add_argument("--remove", action="append", default=[], help="a folder to remove after (repeatable)")
    args = parser.parse_args(argv)
    watch(args.parent, args.remove)


if __name__ == "__main__":
    main()

"""Processes that a test starts as a user would (``frd`` as a command) and the processes below them,
found through /proc, so that a test can ``kill -9`` one and see that nothing it started lives on."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from frd.reaper import Identity, alive, descendants

FRD = str(Path(sys.executable).with_name("frd"))
ENDED_S = 10.0
"""How long the processes below a killed frd may take to end."""


def start_frd(args: list[str], log: Path) -> subprocess.Popen:
    """``frd *args`` in a session of its own (as from another terminal), output to ``log``."""
    return subprocess.Popen([FRD, *args], stdout=log.open("w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)


def wait_for(ready, process: subprocess.Popen, log: Path, what: str, timeout_s: float = 180.0) -> None:
    """Until ``ready()``; ``process`` exiting first or ``timeout_s`` passing fails the test, and a
    timed-out ``process`` is killed first (its reaper then ends what runs below it), so that a
    failing test leaves nothing running."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert process.poll() is None, f"{what}: the process exited ({process.returncode}): {log.read_text()[-2000:]}"
        if time.monotonic() >= deadline:
            process.kill()
            process.wait()
            raise AssertionError(f"{what}: not within {timeout_s:.0f} s: {log.read_text()[-2000:]}")
        time.sleep(0.1)


def kill_9(process: subprocess.Popen) -> set[Identity]:
    """``kill -9`` of ``process`` alone; returns what ran below it, noted just before."""
    below = descendants(process.pid)
    assert below, "nothing ran below the process"
    process.kill()
    process.wait()
    return below


def left_after(below: set[Identity], seconds: float = ENDED_S) -> list[str]:
    """The command lines of ``below`` still running ``seconds`` later (at once when none are)."""
    deadline = time.monotonic() + seconds
    while alive(below) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [f"{pid} {title(pid)}" for pid, _ in alive(below)]


def command_line(pid: int) -> list[str]:
    """A process's command line, word by word; empty once it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def title(pid: int) -> str:
    """A process's title: its command line's first word (Ray titles a busy worker ``ray::<task>``)."""
    return next(iter(command_line(pid)), "").strip()


def running(root: int, name: str) -> list[int]:
    """The processes below ``root`` titled ``name``."""
    return [pid for pid, _ in descendants(root) if title(pid) == name]


def kill_all(*processes: subprocess.Popen) -> None:
    """Cleanup: SIGKILL to each still running and to everything below it."""
    for process in processes:
        below = descendants(process.pid)
        if process.poll() is None:
            process.kill()
        process.wait()
        for pid, _ in alive(below):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

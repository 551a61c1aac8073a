"""A local RL batch pickled at safe points, so that one cut off mid-way resumes where it was.

Finished runs are saved the moment they finish; without this, the runs still going when a
batch is cut off (a session ends, Ctrl-C, a crash) start again from their first episode, and an
8-agent Acrobot batch of the sharing study takes longer than a working session. Every ``every``
seconds, at a safe point between updates and after the finished runs were handed out, the
whole batch (networks, optimizers, envs, generators, strategies, rounds so far) is written to
one file; the next run of the same experiment continues from it, bit for bit (tested), and the
file goes once its batch has finished.

A checkpoint is only taken up when it was written by the same code (a hash of the engine's
sources) for the same experiment, and holds every run still to do; a damaged one is named on
stderr and the batch starts again (to the same tables).
"""
from __future__ import annotations

import json
import pickle
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from frd.results import atomic_write, source_hash
from frd.rl.config import RLConfig

if TYPE_CHECKING:
    from frd.rl.runner import RLBatch

EVERY = 600.0
"""Seconds between two checkpoints of a batch [our choice: a few seconds of pickling per 10 minutes]."""
ENGINE_EXCLUDES = ("frd/classification",)
"""The sources a batch's results do not depend on: all of ``frd`` but classification counts."""


def code_hash() -> str:
    """A hash of every Python source of the engine's packages."""
    return source_hash(exclude=ENGINE_EXCLUDES)


class BatchCheckpoint:
    """The checkpoint file of one experiment folder."""

    def __init__(self, path: Path, config: RLConfig, every: float | None = None) -> None:
        self.path, self.every = path, EVERY if every is None else every
        self.key = json.dumps({"experiment": config.resume_key().jsonable(), "code": code_hash()}, sort_keys=True)
        self.last = time.monotonic()

    def resume(self, runs: Sequence[tuple[str, int]]) -> RLBatch | None:
        """The batch saved here, if it is this experiment's, by this code, and holds ``runs``."""
        if not self.path.exists():
            return None
        try:
            with self.path.open("rb") as f:
                saved = pickle.load(f)
            if saved["key"] != self.key or not set(runs) <= set(saved["runs"]):
                return None
        except Exception as exc:  # noqa: BLE001 - unpickling damaged bytes can raise anything; the batch is redone
            print(f"frd: {self.path} is damaged ({type(exc).__name__}); the batch starts again from its first episode",
                  file=sys.stderr)
            return None
        self.last = time.monotonic()
        return saved["batch"]

    def __call__(self, batch: RLBatch) -> None:
        """Save ``batch`` if the last save is ``every`` seconds old (call it at a safe point)."""
        if time.monotonic() - self.last < self.every:
            return
        runs = [(run.method, run.seed) for run in batch.runs]
        saved = {"key": self.key, "runs": runs, "batch": batch}

        def write(tmp: Path) -> None:  # streamed: a batch can be large
            with tmp.open("wb") as f:
                pickle.dump(saved, f, protocol=pickle.HIGHEST_PROTOCOL)
        atomic_write(self.path, write)
        self.last = time.monotonic()

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)

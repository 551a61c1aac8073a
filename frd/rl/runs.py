"""How RL runs execute on a backend: a group of (method, seed) runs is one batch of the engine
(``frd.rl.runner``), a remote run has agent k on participant k of a link (``frd.rl.remote``)."""
from __future__ import annotations

from typing import Callable, Iterator, Sequence

from frd.backends import Runs, Tables
from frd.remote import Link
from frd.results import run_id
from frd.rl import remote
from frd.rl.config import RLConfig
from frd.rl.runner import iter_simulate

Run = tuple[str, int]
"""One run: (method, seed)."""


class RLRuns:
    """The ``frd.backends.Runs`` of RL: what every run shares is the config."""

    def threads(self, config: RLConfig, runs: Sequence[Run]) -> int:
        return config.threads

    def run_group(self, config: RLConfig, runs: Sequence[Run], on_step: Callable[[], object],
                  on_status: Callable[[str], None]) -> Iterator[tuple[int, Tables]]:
        index = {run_id(method, seed): i for i, (method, seed) in enumerate(runs)}
        for tables in iter_simulate(config, runs, on_status):
            yield index[str(tables["runs"]["run_id"].iloc[0])], tables

    def run_remote(self, config: RLConfig, run: Run, link: Link, on_step: Callable[[], object]) -> Tables:
        return remote.run_remote(config, *run, link)


RUNS: Runs = RLRuns()

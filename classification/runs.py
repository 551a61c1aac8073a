"""How classification seeds execute on a backend: a group is its seeds one after the other
(``frd.classification.runner``), a remote run has device k on participant k of a link
(``frd.classification.remote``)."""
from __future__ import annotations

from typing import Callable, Iterator, Sequence

import torch

from frd.backends import Runs, Tables
from frd.classification import remote
from frd.classification.config import ClsConfig
from frd.classification.data import Dataset
from frd.classification.runner import run_seed
from frd.remote import Link

Run = tuple[ClsConfig, int]
"""One run: (config, seed); a study's grid mixes configs over one dataset."""


class ClsRuns:
    """The ``frd.backends.Runs`` of classification: what every run shares is the dataset."""

    def threads(self, data: Dataset, runs: Sequence[Run]) -> int:
        return max(config.threads for config, _ in runs)

    def run_group(self, data: Dataset, runs: Sequence[Run], on_step: Callable[[], object],
                  on_status: Callable[[str], None]) -> Iterator[tuple[int, Tables]]:
        for i, (config, seed) in enumerate(runs):
            torch.set_num_threads(config.threads)
            yield i, run_seed(config, seed, data, on_round=on_step)

    def run_remote(self, data: Dataset, run: Run, link: Link, on_step: Callable[[], object]) -> Tables:
        config, seed = run
        return remote.run_remote(config, seed, data, link, on_step)


RUNS: Runs = ClsRuns()

"""One classification experiment: the seeds of a config on a backend, each saved as it finishes."""
from __future__ import annotations

from pathlib import Path

import torch
from tqdm import tqdm

from frd.backends import LOCAL, Executor
from frd.classification.config import ClsConfig
from frd.classification.data import load_dataset
from frd.classification.runner import build_run
from frd.classification.runs import RUNS
from frd.results import ResultStore, run_id
from frd.tensorboard import live_logger


def run_experiment(config: ClsConfig, out_dir: str | Path, progress: bool = True,
                   backend: Executor = LOCAL, tensorboard: str | Path | None = None) -> ResultStore:
    """Every seed of ``config`` not already finished in ``out_dir``, on ``backend``; results are
    saved per seed.

    The dataset, partition, model and method are built and checked (on seed 0) before the
    results folder is touched, so a fixable error leaves nothing behind that blocks the rerun.
    ``tensorboard``: also write each finished seed's events there (``frd.tensorboard``).
    """
    log = live_logger(tensorboard)
    data = load_dataset(config.dataset, config.data_dir, download=config.download,
                        test_fraction=config.test_fraction, split_seed=config.split_seed)
    torch.set_num_threads(config.threads)
    build_run(config, 0, data)
    store = ResultStore(out_dir, backend.record(config), config.resume_key())
    done = store.finished()  # verified once: it reads every part
    todo = [s for s in config.run_seeds if run_id(config.method, s) not in done]
    try:
        if todo:
            with tqdm(total=len(todo) * config.rounds, disable=not progress, unit="round",
                      desc=f"{config.method} on {config.dataset}") as bar:
                ticked = 0  # rounds of the seed in progress the bar has shown (none from a Ray task)

                def tick() -> None:
                    nonlocal ticked
                    ticked += 1
                    bar.update()

                for _, tables in backend.execute(RUNS, data, [(config, seed) for seed in todo], on_step=tick):
                    store.save_run(tables)
                    log(store, tables)
                    bar.update(config.rounds - ticked)
                    ticked = 0
    finally:
        store.consolidate()  # also after Ctrl-C: the tables hold every finished seed
    return store

"""One classification experiment: the seeds of one or several methods' configs on a backend, each
run saved as it finishes."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

import torch
from tqdm import tqdm

from frd.backends import LOCAL, Executor
from frd.classification.config import ClsConfig, as_configs, experiment_record, shared_key
from frd.classification.data import load_dataset
from frd.classification.runner import build_run
from frd.classification.runs import RUNS
from frd.classification.series import tensorboard_series
from frd.results import ResultStore, resumed, run_id
from frd.tensorboard import live_logger


def run_experiment(configs: ClsConfig | Sequence[ClsConfig], out_dir: str | Path, progress: bool = True,
                   backend: Executor = LOCAL, tensorboard: str | Path | None = None) -> ResultStore:
    """Every seed of every config (one per method) not already finished in ``out_dir``, on
    ``backend``; results are saved per run, all methods in one folder.

    The configs are checked to differ only in their method, and the dataset, partition, model and
    method are built and checked (on seed 0) before the results folder is touched, so a fixable
    error leaves nothing behind that blocks the rerun. ``tensorboard``: also write each finished
    run's events there (``frd.tensorboard``).
    """
    configs = as_configs(configs)
    key = shared_key(configs)
    log = live_logger(tensorboard, tensorboard_series)
    first = configs[0]
    data = load_dataset(first.dataset, first.data_dir, download=first.download,
                        test_fraction=first.test_fraction, split_seed=first.split_seed)
    torch.set_num_threads(first.threads)
    for config in configs:
        build_run(config, 0, data)
    store = ResultStore(out_dir, backend.record(experiment_record(configs)), key)
    done = store.finished()  # verified once: it reads every part
    todo = [(c, s) for c in configs for s in c.run_seeds if run_id(c.method, s) not in done]
    total = sum(len(c.run_seeds) for c in configs)
    note = resumed(total - len(todo), total, store.out)
    if progress and note:
        print(note, file=sys.stderr)
    try:
        if todo:
            with tqdm(total=len(todo) * first.rounds, disable=not progress, unit="round",
                      desc=f"{','.join(c.method for c in configs)} on {first.dataset}") as bar:
                ticked = 0  # rounds of the run in progress the bar has shown (none from a Ray task)

                def tick() -> None:
                    nonlocal ticked
                    ticked += 1
                    bar.update()

                for _, tables in backend.execute(RUNS, data, todo, on_step=tick):
                    store.save_run(tables)
                    log(store, tables)
                    bar.update(first.rounds - ticked)
                    ticked = 0
    finally:
        store.consolidate()  # also after Ctrl-C: the tables hold every finished run
    return store

"""The classification round loop — the only one — and the experiment driver around it."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from frd.backends import Backend
from frd.channel import make_channel
from frd.exchange import Exchange, run_round
from frd.ledger import Ledger
from frd.results import ResultStore
from frd.seeding import derive_seed
from classification.config import ClsConfig
from classification.context import CHANNEL_STREAM, RunContext, run_id
from classification.data import Dataset, load_dataset
from classification.methods import GLOBAL, METHODS, Method
from classification.models import count_parameters
from classification.training import evaluate

ROUND_COLUMNS = ["run_id", "seed", "round", "device", "iteration", "accuracy", "loss", "compute_s", "comm_s"]
"""rounds.csv: one row per evaluated model per round (device −1 = global model). Round 0 is the
initial model (after any setup transfer); compute_s is the round's measured wall-clock time of
local training and server work, comm_s the channel time of its transfers."""


def _evaluate(ctx: RunContext, method: Method, round_: int, compute_s: float, comm_s: float) -> list[dict]:
    rows = []
    for device, model in method.models_to_evaluate().items():
        accuracy, loss = evaluate(model, ctx.data.x_test, ctx.data.y_test)
        rows.append(dict(run_id=ctx.run_id, seed=ctx.seed, round=round_, device=device,
                         iteration=round_ * ctx.config.iterations_per_round, accuracy=accuracy, loss=loss,
                         compute_s=compute_s, comm_s=comm_s))
    return rows


def run_seed(config: ClsConfig, seed: int, data: Dataset,
             on_round: Callable[[], object] = lambda: None) -> dict[str, pd.DataFrame]:
    """One seed of ``config``: the runs, rounds and ledger tables of that run."""
    method_class = METHODS[config.method]
    config = getattr(method_class, "resolve", lambda c: c)(config)  # an entry may be any factory of a Method
    ctx = RunContext.build(config, seed, data)
    method = method_class(ctx)
    ledger = Ledger()
    channel = make_channel(config.channel, derive_seed(seed, CHANNEL_STREAM), **config.channel_options)
    participants = list(range(config.devices))

    def exchange(what: Exchange, round_: int) -> float:
        return run_round(what, participants, run_id=ctx.run_id, round_=round_, ledger=ledger, channel=channel).comm_s

    rows: list[dict] = []
    compute_total = comm_total = 0.0

    def close_round(round_: int, started: float, comm_s: float) -> None:
        nonlocal compute_total, comm_total
        compute_s = time.perf_counter() - started
        compute_total, comm_total = compute_total + compute_s, comm_total + comm_s
        rows.extend(_evaluate(ctx, method, round_, compute_s, comm_s))

    started = time.perf_counter()
    setup = method.setup_exchange()
    close_round(0, started, exchange(setup, 0) if setup is not None else 0.0)
    for round_ in range(1, config.rounds + 1):
        started = time.perf_counter()
        method.local_train(round_)
        close_round(round_, started, exchange(method, round_))
        on_round()

    rounds = pd.DataFrame(rows, columns=ROUND_COLUMNS)
    final = rounds[rounds["round"] == config.rounds].set_index("device")["accuracy"]
    runs = pd.DataFrame([dict(
        run_id=ctx.run_id, seed=seed, method=config.method, dataset=config.dataset, partition=config.partition,
        devices=config.devices, samples=int(ctx.sample_counts.sum()), parameters=count_parameters(ctx.devices.template),
        rounds=config.rounds, iterations=config.rounds * config.iterations_per_round,
        accuracy=final.get(config.reference_device, np.nan), global_accuracy=final.get(GLOBAL, np.nan),
        **ledger.totals(ctx.run_id), compute_s=compute_total, comm_s=comm_total, **method.run_summary())])
    return {"runs": runs, "rounds": rounds, "ledger": ledger.frame()}


def run_experiment(config: ClsConfig, out_dir: str | Path, progress: bool = True,
                   backend: Backend = Backend()) -> ResultStore:
    """Every seed of ``config`` not already finished in ``out_dir``; results are saved per seed."""
    store = ResultStore(out_dir, backend.record(config), config.resume_key())
    todo = [s for s in range(config.seeds) if run_id(config, s) not in store.finished()]
    try:
        if todo:
            data = load_dataset(config.dataset, config.data_dir, download=config.download,
                                test_fraction=config.test_fraction, split_seed=config.split_seed)
            torch.set_num_threads(config.threads)
            with tqdm(total=len(todo) * config.rounds, disable=not progress, unit="round",
                      desc=f"{config.method} on {config.dataset}") as bar:
                for _, tables in backend.iter_cls([(config, seed) for seed in todo], data, bar.update):
                    store.save_run(tables)
    finally:
        store.consolidate()  # also after Ctrl-C: the tables hold every finished seed
    return store

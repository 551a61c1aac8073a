"""The classification round loop — the only one (the experiment driver around it: ``frd.classification.experiment``)."""
from __future__ import annotations

import time
from typing import Callable

import numpy as np
import pandas as pd

from frd.channel import make_channel
from frd.classification.config import ClsConfig
from frd.classification.context import RunContext
from frd.classification.data import Dataset
from frd.classification.methods import GLOBAL, Method, get_method
from frd.classification.models import count_parameters
from frd.classification.participation import sampled_devices
from frd.classification.saved import run_models_file
from frd.classification.training import evaluate
from frd.clock import Devices, VirtualClock
from frd.codecs.link import codec_link
from frd.errors import FrdError
from frd.exchange import Exchange, run_round
from frd.ledger import Ledger
from frd.results import MODELS
from frd.seeding import Stream, derive_seed

ROUND_COLUMNS = ["run_id", "seed", "round", "phase", "device", "iteration", "accuracy", "loss", "compute_s",
                 "comm_s", "sim_s"]
"""rounds.csv: one row per evaluated model per round and phase (device −1 = global model). Each
round r ≥ 1 is evaluated twice: phase ``local`` after local training (before upload; compute_s
is that training's wall-clock time) and phase ``exchanged`` after the download (compute_s the
exchange's server work, comm_s the channel time of its transfers). Round 0 is the initial model
after any setup transfer (phase ``exchanged``). ``sim_s``: the virtual clock at that point (``frd.clock``):
after local training, when the round's last device finished it; after the exchange, when the round ended
(its last download in)."""

PHASES = ("local", "exchanged")
"""The two evaluation points of a round, in order."""


def _evaluate(ctx: RunContext, method: Method, round_: int, phase: str, compute_s: float, comm_s: float,
              sim_s: float) -> list[dict]:
    rows = []
    for device, model in method.models_to_evaluate().items():
        accuracy, loss = evaluate(model, ctx.data.x_test, ctx.data.y_test)
        rows.append(dict(run_id=ctx.run_id, seed=ctx.seed, round=round_, phase=phase, device=device,
                         iteration=round_ * ctx.config.iterations_per_round, accuracy=accuracy, loss=loss,
                         compute_s=compute_s, comm_s=comm_s, sim_s=sim_s))
    return rows


def build_run(config: ClsConfig, seed: int, data: Dataset) -> tuple[RunContext, Method]:
    """One seed's context (partition, devices' models) and method, with ``config`` resolved by the
    method (e.g. its model for ``--model auto``)."""
    method_class = get_method(config.method)
    if config.partial_participation and not method_class.partial_participation:
        raise FrdError(f"{config.method} does not support partial participation (--clients-per-round, --fraction); "
                       "run it with every device taking part")
    ctx = RunContext.build(method_class.resolve(config), seed, data)
    return ctx, method_class(ctx)


def run_seed(config: ClsConfig, seed: int, data: Dataset, on_round: Callable[[], object] = lambda: None,
             wrap: Callable[[Method], Method] = lambda method: method) -> dict:
    """One seed of ``config``: the runs, rounds and ledger tables of that run, and its saved models
    (``frd.results.MODELS``). ``wrap`` may put the method's devices elsewhere
    (``frd.classification.remote.RemoteMethod``)."""
    ctx, method = build_run(config, seed, data)
    method = wrap(method)
    config = ctx.config
    ledger = Ledger()
    channel = make_channel(config.channel, derive_seed(seed, Stream.CLS_CHANNEL), **config.channel_options)
    devices = Devices(config.clock(), seed, config.devices)
    sampled = [sampled_devices(config, seed, round_) for round_ in range(config.rounds + 2)]
    sampled = [sampled[0], *(devices.online(r, part) for r, part in enumerate(sampled[1:], 1))]
    codec = codec_link(config.codecs(), seed, method.participants_code)
    local_flops = method.local_flops()
    clock = VirtualClock(devices, config.devices, counting=local_flops is not None)

    def exchange(what: Exchange, round_: int) -> float:
        """Round ``round_``'s devices upload, each once its work is done (``clock``); the answer goes to
        the next round's (``frd.classification.participation``)."""
        report = run_round(what, sampled[round_], run_id=ctx.run_id, round_=round_, ledger=ledger, channel=channel,
                           receivers=sampled[round_ + 1], codec=codec, timing=clock.timing(sampled[round_]))
        clock.advance(report.times)
        return report.comm_s

    rows: list[dict] = []
    compute_total = comm_total = 0.0

    def close_phase(round_: int, phase: str, started: float, comm_s: float, sim_s: float) -> None:
        nonlocal compute_total, comm_total
        compute_s = time.perf_counter() - started
        compute_total, comm_total = compute_total + compute_s, comm_total + comm_s
        rows.extend(_evaluate(ctx, method, round_, phase, compute_s, comm_s, sim_s))

    started = time.perf_counter()
    setup = method.setup_exchange()
    close_phase(0, "exchanged", started, exchange(setup, 0) if setup is not None else 0.0, clock.now)
    for round_ in range(1, config.rounds + 1):
        started = time.perf_counter()
        ctx.training = sampled[round_]
        if ctx.training:  # every sampled device may be offline (--availability)
            method.local_train(round_)
        close_phase(round_, "local", started, 0.0, clock.trained(ctx.training, local_flops or 0.0))
        started = time.perf_counter()
        close_phase(round_, "exchanged", started, exchange(method, round_), clock.now)
        on_round()

    rounds = pd.DataFrame(rows, columns=ROUND_COLUMNS)
    last = rounds[rounds["round"] == config.rounds]
    final = last[last["phase"] == "exchanged"].set_index("device")["accuracy"]
    after_local = last[last["phase"] == "local"].set_index("device")["accuracy"]
    runs = pd.DataFrame([dict(
        run_id=ctx.run_id, seed=seed, method=config.method, dataset=config.dataset, partition=config.partition,
        devices=config.devices, samples=int(ctx.sample_counts.sum()), parameters=count_parameters(ctx.devices.template),
        rounds=config.rounds, iterations=config.rounds * config.iterations_per_round,
        accuracy=final.get(config.reference_device, np.nan), global_accuracy=final.get(GLOBAL, np.nan),
        local_accuracy=after_local.get(config.reference_device, np.nan),
        **ledger.totals(ctx.run_id), compute_s=compute_total, comm_s=comm_total, sim_s=clock.now,
        **method.run_summary())])
    return {"runs": runs, "rounds": rounds, "ledger": ledger.frame(), MODELS: run_models_file(ctx, method.saved_models())}

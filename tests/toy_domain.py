"""A third domain in a few lines, added the documented way (the tests add its registry line, as an
entry point would): federated mean estimation. Each participant holds its own samples and
uploads their mean and count; the server averages them, weighted by count, and sends the
average back, through the one exchange contract (``run_round``) and the payload ledger. It has
one command, ``frd mean``, which runs locally or on Ray like any other; it leaves out the
protocol's Flower side (``frd.domains.Domain``: a participant's reply, a remote run)."""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd

from frd.backends import Tables, add_backend_arguments, backend_from_args
from frd.exchange import broadcast, run_round
from frd.ledger import Ledger
from frd.options import add_config_flags, given_config
from frd.payload import FLOAT_BITS, Payload
from frd.results import ResultStore, ResumeKey, run_id
from frd.seeding import derive_seed


@dataclass(frozen=True)
class MeanConfig:
    participants: int = 3
    """Participants, each drawing its own samples around its own centre."""
    samples: int = 20
    """Samples per participant."""
    seeds: int = 2
    """Runs, seeds 0..seeds-1."""
    threads: int = 1
    """CPUs a group of runs keeps busy."""

    def resume_key(self) -> ResumeKey:
        return ResumeKey({"participants": self.participants, "samples": self.samples}, {"mean": {}})


class MeanExchange:
    """One round: upload (mean, count) → weighted average → the average to everyone."""

    def __init__(self, samples: Mapping[int, np.ndarray]) -> None:
        self.samples, self.estimates = samples, {}

    def upload(self, p: int) -> Payload:
        return Payload.of("mean", 1, mean=(np.float32([self.samples[p].mean()]), FLOAT_BITS),
                          count=(np.int32([len(self.samples[p])]), 32))

    def aggregate(self, uploads: Mapping[int, Payload], participants: Sequence[int]) -> dict[int, Payload]:
        total = sum(float(u["mean"][0]) * int(u["count"][0]) for u in uploads.values())
        average = total / sum(int(u["count"][0]) for u in uploads.values())
        return broadcast(Payload.of("mean", 1, mean=(np.float32([average]), FLOAT_BITS)), participants)

    def download(self, p: int, payload: Payload) -> None:
        self.estimates[p] = float(payload["mean"][0])

    def finish_round(self) -> None:
        pass


def run_seed(config: MeanConfig, seed: int) -> Tables:
    rid, ledger = run_id("mean", seed), Ledger()
    samples = {p: np.random.default_rng(derive_seed(seed, p)).normal(p, 1.0, config.samples)
               for p in range(config.participants)}
    exchange = MeanExchange(samples)
    run_round(exchange, list(samples), run_id=rid, round_=1, ledger=ledger)
    truth = float(np.concatenate(list(samples.values())).mean())
    runs = pd.DataFrame([dict(run_id=rid, seed=seed, estimate=exchange.estimates[0], truth=truth, **ledger.totals(rid))])
    return {"runs": runs, "ledger": ledger.frame()}


class MeanDomain:
    """Its runs (``frd.backends.Runs``: what every run shares is the config, an item is a seed) and its command."""

    name = "mean"
    methods: dict = {}  # none that ``frd flower --method`` could pick: it has no Flower side

    def threads(self, config: MeanConfig, seeds: Sequence[int]) -> int:
        return config.threads

    def run_group(self, config: MeanConfig, seeds: Sequence[int], on_step: Callable[[], object],
                  on_status: Callable[[str], None]) -> Iterator[tuple[int, Tables]]:
        for i, seed in enumerate(seeds):
            yield i, run_seed(config, seed)

    def register(self, subparsers: argparse._SubParsersAction) -> None:
        p = subparsers.add_parser("mean", help="federated mean estimation (a test's toy domain)")
        add_config_flags(p, MeanConfig)
        p.add_argument("--out", required=True)
        add_backend_arguments(p)
        p.set_defaults(run=self.run)

    def run(self, args: argparse.Namespace) -> int:
        config, backend = MeanConfig(**given_config(args, MeanConfig)), backend_from_args(args)
        store = ResultStore(args.out, backend.record(config), config.resume_key())
        todo = [s for s in range(config.seeds) if run_id("mean", s) not in store.finished()]
        for _, tables in backend.execute(self, config, todo):
            store.save_run(tables)
        store.consolidate()
        print(pd.read_csv(store.path("runs"))[["seed", "estimate", "truth"]].to_string(index=False))
        return 0


DOMAIN = MeanDomain()

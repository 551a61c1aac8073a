"""Which devices take part in a classification round: partial participation [McMahan et al. 2017].

A run samples ``participants_per_round`` devices for each round r, without replacement, from a
stream of its own keyed by (run seed, r): the sample depends on nothing else, so a run draws the
same devices alone or beside other seeds and methods, and the methods of one folder see the same
samples on a seed, as they see the same partitions.

Round r's sampled devices train (or distil), and only they upload. The server's answer goes to the
devices sampled for round r + 1: FedAvg's server sends the current model to the clients it selects
as the round starts [McMahan et al. 2017, Algorithm 1], and the ledger has always charged a round's
download at the end of the round before [our reading]. So at full participation nothing changes,
and every sampled device starts its round from the newest model. Round 0 (a method's one-off
setup, e.g. the FLD family's seed samples) samples its devices the same way.
"""
from __future__ import annotations

import numpy as np

from frd.classification.config import ClsConfig
from frd.seeding import Stream, derive_seed


def sampled_devices(config: ClsConfig, seed: int, round_: int) -> list[int]:
    """The devices (ascending) that take part in round ``round_`` of seed ``seed``'s run: every
    one at full participation (no draw), else ``participants_per_round`` of them at random."""
    if not config.partial_participation:
        return list(range(config.devices))
    rng = np.random.default_rng(derive_seed(seed, Stream.CLS_PARTICIPATION, round_))
    return sorted(int(d) for d in rng.choice(config.devices, config.participants_per_round, replace=False))

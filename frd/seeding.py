"""Seeds derived from (run seed, stream, …) so each use of randomness has a stream of its own.

Every stream key of the suite is named here, so no two uses can share one by accident. The
values are historical (changing one changes every result that draws from it).
"""
from __future__ import annotations

from enum import IntEnum

import numpy as np


class Stream(IntEnum):
    """Stream keys: ``derive_seed(run_seed, Stream.X, …)``."""

    # RL: derive_seed(run seed, key) unless noted
    RL_INIT = 0x1417          # initial actor and critic weights shared by a run's agents (--init separate:
                              # derive_seed(run seed, agent, RL_INIT), one per agent)
    RL_CHANNEL = 0xC4A        # the run's channel
    RL_EXCHANGE = 0xD15       # a round's method draws: derive_seed(run seed, round, RL_EXCHANGE)
    RL_PARTICIPANTS = 0x9A27  # which agents take part in each round (--agents-per-round): one generator per run,
                              # drawn from at the start of every round's period
    RL_ACTIONS = 0x5EED       # XOR-ed into a lane's seed for its action draws
    RL_EVAL_STATES = 0xE7A1   # frd eval: an episode's first state, derive_seed(eval seed, episode, key)
    RL_EVAL_ACTIONS = 0xE7A2  # frd eval: that episode's sampled actions, the same way
    # Codecs (both domains): derive_seed(run seed, CODEC, round, participant, direction 0 up / 1 down)
    CODEC = 0xC0DEC
    # Channel: mixed with the channel's own seed for the fading draws
    FADING = 0xC4A77E1
    # Virtual clock (both domains, ``frd.clock``): a device's rate, derive_seed(run seed, DEVICES, participant);
    # who is online for a round, derive_seed(run seed, AVAILABILITY, round)
    DEVICES = 0xDE71CE
    AVAILABILITY = 0xA7A1
    # Classification: derive_seed(run seed, key, …)
    CLS_PARTITION = 1
    CLS_INIT = 2
    CLS_BATCHES = 3           # with the device id
    CLS_CHANNEL = 4
    CLS_METHOD = 5            # with the method's own keys (below)
    CLS_PARTICIPATION = 6     # the devices sampled for a round: with the round


class MethodStream(IntEnum):
    """Classification methods' own keys under ``Stream.CLS_METHOD``."""

    SEED_PICK = 1             # FLD family: a device's choice of seed samples (with the device id)
    SERVER_DRAW = 2           # FLD family: the server's draws (inverse-Mixup candidates, KD minibatches)
    LABEL_PAIRS = 3           # MixFLD / Mix2FLD: the run's shared list of mirrored label pairs
    DD_CLIENT = 0             # FedDM / FedDualMatch: client d's generator (with d)
    DD_SERVER = 1             # FedDM / FedDualMatch: the server's generator (an alias of SEED_PICK's value)


def derive_seed(*keys: int) -> int:
    """A 32-bit seed that depends on every key and on nothing else."""
    return int(np.random.SeedSequence([int(k) for k in keys]).generate_state(1)[0])

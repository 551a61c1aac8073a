"""Two methods added the documented way, each one file plus one registry line (the tests add
the line): an RL strategy with one option that keeps state across rounds, and a
classification method with one option."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from frd.classification.methods.base import load_weights
from frd.classification.methods.fl import FedAvg
from frd.errors import FrdError
from frd.options import at_least
from frd.payload import Payload
from frd.rl.methods.frl import FederatedRL, FRLOptions


@dataclass(frozen=True)
class PartialFRLOptions(FRLOptions):
    """FRL's options, and how far each agent moves towards the average."""

    partial_mix: float = 0.5
    """Share of the averaged actor an agent takes (1: plain FRL; 0: keeps its own)."""

    def __post_init__(self) -> None:
        at_least(self, partial_mix=0)


class PartialFRL(FederatedRL):
    """FRL whose agents move only ``partial_mix`` of the way to the average; counts its rounds
    and its agents' local updates (state a strategy keeps across rounds)."""

    description = "FRL, agents move part of the way to the average"
    Options = PartialFRLOptions  # type: ignore[assignment]

    def __init__(self, options, setup) -> None:
        super().__init__(options, setup)
        self.rounds_seen = 0
        self.updates_seen = 0

    def download(self, agent: int, payload: Payload) -> None:
        pop, row, mix = self.round.population, self.round.rows[agent], self.options.partial_mix
        own = pop.actor_state(row)
        pop.load_actor_state(row, {k: (1 - mix) * own[k] + mix * payload[f"actor.{k}"] for k in own})

    def finish_round(self) -> None:
        self.rounds_seen += 1

    def after_update(self, population, rows) -> None:
        self.updates_seen += 1


@dataclass(frozen=True)
class KeepShareOptions:
    """How much of its own model a device keeps."""

    keep_share: float = 0.0
    """Share of its own weights a device keeps when it downloads the average (0: plain FL)."""

    def __post_init__(self) -> None:
        if not 0 <= self.keep_share < 1:
            raise FrdError(f"--keep-share must lie in [0, 1), got {self.keep_share}")


class KeepShareFL(FedAvg):
    """FedAvg whose devices blend the average into their own weights."""

    Options = KeepShareOptions

    def download(self, device: int, payload: Payload) -> None:
        keep = self.options.keep_share
        own = self.ctx.devices.flat(device)
        blended = (keep * own + (1 - keep) * payload["weights"]).astype(np.float32)
        load_weights(self.ctx, device, Payload.of("weights", blended.size, weights=(blended, 32)))

"""What PD and FRD share: the downloaded memory is distilled into every receiver's actor."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from frd.options import at_least, positive
from frd.payload import Payload
from frd.rl.methods.base import RoundContext, RunSetup, Strategy


@dataclass(frozen=True)
class DistillOptions:
    """How an agent distils a downloaded memory [seed 001 eq. 26/28; optimizer ours]."""

    distill_epochs: int = 1
    """Passes over the downloaded memory per round."""
    distill_batch: int = 64
    """Minibatch size of that distillation."""
    distill_lr: float = 1e-4
    """Learning rate of the distillation's own per-lane Adam (the RL optimizer's moments stay clean)."""

    def __post_init__(self) -> None:
        at_least(self, distill_epochs=1, distill_batch=1)
        positive(self, "distill_lr")


class DistillingStrategy(Strategy):
    """Downloads are collected; ``finish_round`` distils all receivers of one memory together."""

    records_memory = True

    def __init__(self, options: Any, setup: RunSetup) -> None:
        super().__init__(options, setup)
        self.received: dict[int, Payload] = {}

    def begin_round(self, ctx: RoundContext) -> None:
        super().begin_round(ctx)
        self.received = {}

    def download(self, agent: int, payload: Payload) -> None:
        self.received[agent] = payload

    def target(self, payload: Payload) -> tuple[np.ndarray, np.ndarray]:
        """(states, action probabilities) to distil towards."""
        raise NotImplementedError

    def finish_round(self) -> None:
        ctx, o = self.round, self.options
        groups: dict[int, list[int]] = {}
        for agent, payload in self.received.items():
            groups.setdefault(id(payload), []).append(agent)
        for agents in groups.values():
            states, probs = self.target(self.received[agents[0]])
            if len(states):
                ctx.population.distill([ctx.rows[a] for a in agents], states, probs, ctx.rng,
                                       epochs=o.distill_epochs, batch=o.distill_batch, lr=o.distill_lr)

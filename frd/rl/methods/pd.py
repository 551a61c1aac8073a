"""PD [Seo et al. 2022, §4]: the raw experience memory (states, action probabilities) up; the concatenation
of all agents' memories down; each agent distils it (eq. 26)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from frd.payload import FLOAT_BITS, Payload
from frd.rl.methods.distilling import DistillingStrategy, DistillOptions


@dataclass(frozen=True)
class PDOptions(DistillOptions):
    """PD has only the distillation options."""


class PolicyDistillation(DistillingStrategy):
    description = "policy distillation: share raw experience memories"
    Options = PDOptions

    def upload(self, agent: int) -> Payload:
        states, probs = self.memory(agent)
        return self.with_score(agent, Payload.of("memory", len(states), states=(states, FLOAT_BITS),
                                                 probs=(probs, FLOAT_BITS)))

    def merge(self, uploads: Sequence[Payload]) -> Payload:
        """The concatenation of the memories."""
        return Payload.of("global_memory", sum(u.entries for u in uploads),
                          states=(np.concatenate([u["states"] for u in uploads]), FLOAT_BITS),
                          probs=(np.concatenate([u["probs"] for u in uploads]), FLOAT_BITS))

    def target(self, payload: Payload) -> tuple[np.ndarray, np.ndarray]:
        return payload["states"], payload["probs"]

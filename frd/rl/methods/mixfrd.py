"""MixFRD: FRD whose uploaded proxy memory is interpolated with Mixup, after the journal extension
of FRD ("Proxy Experience Replay", 2020), which reports a smaller payload and a lower variance of
mission time. Its full text was not available; this is [our reading] of [Cha et al. 2020]:

* each agent pairs its visited cells at random (disjoint pairs; an odd one out stays as it is)
  and uploads one entry per pair: proxy state s = λ·s_i + (1−λ)·s_j and policy
  π = λ·π_i + (1−λ)·π_j with λ ~ Beta(α, α), so about half the entries go up;
* the mixed states are no longer cell midpoints, so they go up as state floats (the paper
  codec) and are charged as sent;
* the server puts each mixed entry in the cell its state falls in and averages per cell as FRD
  does; agents distil the global proxy memory at the cell midpoints.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from frd.errors import FrdError
from frd.options import positive
from frd.payload import FLOAT_BITS, Payload
from frd.rl.methods.base import RunSetup
from frd.rl.methods.frd import FederatedReinforcementDistillation, FRDOptions, local_proxy_memory


@dataclass(frozen=True)
class MixFRDOptions(FRDOptions):
    """FRD's options plus the Mixup of the proxy memory."""

    mix_alpha: float = 0.4
    """α of λ ~ Beta(α, α), the interpolation weight of two proxy entries [our choice]."""

    def __post_init__(self) -> None:
        super().__post_init__()
        positive(self, "mix_alpha")


def mix_proxy_entries(states: np.ndarray, policy: np.ndarray, alpha: float,
                      rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One entry per random disjoint pair of entries, λ ~ Beta(α, α) on state and policy alike;
    an odd one out is kept as it is."""
    order = rng.permutation(len(states))
    pairs, single = order[:len(order) // 2 * 2].reshape(-1, 2), order[len(order) // 2 * 2:]
    lam = rng.beta(alpha, alpha, size=(len(pairs), 1)).astype(np.float32)
    mixed_s = lam * states[pairs[:, 0]] + (1 - lam) * states[pairs[:, 1]]
    mixed_p = lam * policy[pairs[:, 0]] + (1 - lam) * policy[pairs[:, 1]]
    return np.concatenate([mixed_s, states[single]]), np.concatenate([mixed_p, policy[single]])


class MixFRD(FederatedReinforcementDistillation):
    description = "FRD with a Mixup-interpolated proxy memory (about half the uplink)"
    Options = MixFRDOptions
    draws_at_upload = True

    @classmethod
    def check(cls, options: Any, setup: RunSetup) -> None:
        super().check(options, setup)
        if options.proxy_layout != "paper":
            raise FrdError("mixfrd uploads mixed proxy states, which are not cell midpoints: it needs --proxy-layout paper")
        if options.weighting != "mean":
            raise FrdError("mixfrd uploads no visit counts (its entries are mixes): use --frd-weighting mean")

    def upload(self, agent: int) -> Payload:
        cells, policy, _ = local_proxy_memory(self.grid, *self.memory(agent))
        states, mixed = mix_proxy_entries(self.grid.midpoints(cells), policy, self.options.mix_alpha, self.round.rng)
        return self.with_score(agent, Payload.of("mixed_proxy_memory", len(states), policy=(mixed, FLOAT_BITS),
                                                 states=(states, FLOAT_BITS)))

"""FRD [Seo et al. 2022, §4]: states are quantized into a grid of clusters; per visited cell the mean policy
goes up; per cell the mean of the agents' means comes down (count-weighted as an option); each
agent distils it at the cell midpoints (eq. 28)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

import numpy as np

from frd.envs.grid import StateGrid, grid_for
from frd.options import at_least
from frd.payload import FLOAT_BITS, Payload, index_bits
from frd.rl.methods.base import RunSetup
from frd.rl.methods.distilling import DistillingStrategy, DistillOptions


def parse_bounds(text: str) -> tuple[tuple[float, float], ...]:
    """``"-2.4,2.4;-3,3"`` → ((-2.4, 2.4), (-3.0, 3.0)); each pair lo,hi with lo < hi."""
    bounds = []
    for pair in text.split(";"):
        values = tuple(float(v) for v in pair.split(","))
        if len(values) != 2 or not values[0] < values[1]:
            raise ValueError(f"{pair!r} is not lo,hi with lo < hi")
        bounds.append(values)
    return tuple(bounds)


@dataclass(frozen=True)
class FRDOptions(DistillOptions):
    """The grid, the proxy payload's layout and the server's average."""

    grid: int = field(default=30, metadata={"metavar": "S"})
    """S: intervals per observation dimension [Seo et al. 2022, §4: 30]."""
    grid_bounds: tuple[tuple[float, float], ...] | None = field(
        default=None, metadata={"parse": parse_bounds, "form": "'lo,hi;lo,hi;…' (one pair per dimension)"})
    """Grid bounds per dimension; None: CartPole's, else the observation space's finite bounds."""
    proxy_layout: Literal["paper", "compact"] = field(default="paper", metadata={"was": "codec"})
    """Proxy payload's layout: paper (proxy-state floats + policy floats) or compact (cell index + policy); how its
    floats are encoded is --codec-up's."""
    weighting: Literal["mean", "count"] = field(default="mean", metadata={"flag": "frd-weighting"})
    """Server average per cell: mean of the agents' cell means, or count-weighted (counts uploaded)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least(self, grid=1)


def local_proxy_memory(grid: StateGrid, states: np.ndarray, probs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(visited cells, mean policy per cell, visits per cell) [Seo et al. 2022, §4, FRD steps 1–2]."""
    cells, inverse, counts = np.unique(grid.cell_index(states), return_inverse=True, return_counts=True)
    sums = np.zeros((len(cells), probs.shape[1]), np.float64)
    np.add.at(sums, inverse, probs)
    return cells, (sums / counts[:, None]).astype(np.float32), counts


def global_proxy_memory(memories: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
                        weighting: str) -> tuple[np.ndarray, np.ndarray]:
    """Per cell, the mean of the local mean policies of the agents that visited it
    [Seo et al. 2022, §4, FRD step 4]; ``count`` weights each agent by its visits instead."""
    cells = np.concatenate([m[0] for m in memories])
    policy = np.concatenate([m[1] for m in memories]).astype(np.float64)
    weight = (np.concatenate([m[2] for m in memories]).astype(np.float64) if weighting == "count"
              else np.ones(len(cells)))
    unique, inverse = np.unique(cells, return_inverse=True)
    sums = np.zeros((len(unique), policy.shape[1]))
    np.add.at(sums, inverse, policy * weight[:, None])
    return unique, (sums / np.bincount(inverse, weight)[:, None]).astype(np.float32)


class FederatedReinforcementDistillation(DistillingStrategy):
    description = "federated reinforcement distillation: share per-cluster mean policies"
    Options = FRDOptions

    @classmethod
    def check(cls, options: Any, setup: RunSetup) -> None:
        cls.grid_of(options, setup)

    @staticmethod
    def grid_of(options: FRDOptions, setup: RunSetup) -> StateGrid:
        return grid_for(setup.env_id, setup.observation_space, options.grid, options.grid_bounds)

    def __init__(self, options: FRDOptions, setup: RunSetup) -> None:
        super().__init__(options, setup)
        self.grid = self.grid_of(options, setup)

    def _encode(self, kind: str, cells: np.ndarray, policy: np.ndarray, counts: np.ndarray | None) -> Payload:
        arrays = {"policy": (policy, FLOAT_BITS)}
        if self.options.proxy_layout == "paper":
            arrays["states"] = (self.grid.midpoints(cells), FLOAT_BITS)
        else:
            arrays["cells"] = (cells, index_bits(self.grid.n_cells))
        if counts is not None:
            arrays["counts"] = (counts, FLOAT_BITS)
        return Payload.of(kind, len(cells), **arrays)

    def _cells(self, payload: Payload) -> np.ndarray:
        return payload["cells"] if "cells" in payload.arrays else self.grid.cell_index(payload["states"])

    def upload(self, agent: int) -> Payload:
        cells, policy, counts = local_proxy_memory(self.grid, *self.memory(agent))
        return self.with_score(agent, self._encode("proxy_memory", cells, policy,
                                                   counts if self.options.weighting == "count" else None))

    def merge(self, uploads: Sequence[Payload]) -> Payload:
        """Per cell, the mean of the agents' cell means (count-weighted as an option)."""
        local = [(self._cells(u), u["policy"], u["counts"] if "counts" in u.arrays else np.ones(u.entries))
                 for u in uploads]
        cells, policy = global_proxy_memory(local, self.options.weighting)
        return self._encode("global_proxy_memory", cells, policy, None)

    def target(self, payload: Payload) -> tuple[np.ndarray, np.ndarray]:
        return self.grid.midpoints(self._cells(payload)), payload["policy"]

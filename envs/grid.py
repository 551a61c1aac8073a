"""The FRD state grid: S equal intervals per observation dimension; a cluster is one cell.

Values outside the bounds are clipped into the edge cells; a cell's proxy state is its
midpoint [Seo et al. 2022, §4: S = 30, d = 4, midpoints].
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import gymnasium as gym
import numpy as np

from frd.errors import FrdError

CARTPOLE_BOUNDS = ((-2.4, 2.4), (-3.0, 3.0), (-0.2095, 0.2095), (-3.5, 3.5))
"""[our choice] cart position, cart velocity, pole angle (rad), pole angular velocity."""


@dataclass(frozen=True)
class StateGrid:
    low: np.ndarray   # [d]
    high: np.ndarray  # [d]
    intervals: int    # S

    def __post_init__(self) -> None:
        if self.intervals < 1:
            raise FrdError(f"the state grid needs at least 1 interval per dimension, got {self.intervals}")
        if not np.all(self.high > self.low):
            raise FrdError(f"state-grid bounds need high > low in every dimension, got {self.low} .. {self.high}")

    @property
    def dims(self) -> int:
        return int(self.low.shape[0])

    @property
    def n_cells(self) -> int:
        return int(self.intervals) ** self.dims

    def cell_coords(self, states: np.ndarray) -> np.ndarray:
        """[..., d] states → [..., d] interval numbers in 0..S-1 (clipped into edge cells)."""
        scaled = (np.asarray(states, np.float64) - self.low) / (self.high - self.low) * self.intervals
        return np.clip(np.floor(scaled), 0, self.intervals - 1).astype(np.int64)

    def cell_index(self, states: np.ndarray) -> np.ndarray:
        """[..., d] states → [...] flat cell indices (row-major over dimensions)."""
        coords = self.cell_coords(states)
        return np.ravel_multi_index(np.moveaxis(coords, -1, 0), (self.intervals,) * self.dims)

    def midpoints(self, cells: np.ndarray) -> np.ndarray:
        """[...] flat cell indices → [..., d] proxy states (cell midpoints)."""
        coords = np.stack(np.unravel_index(np.asarray(cells), (self.intervals,) * self.dims), axis=-1)
        width = (self.high - self.low) / self.intervals
        return (self.low + (coords + 0.5) * width).astype(np.float32)


def grid_for(env_id: str, space: gym.spaces.Box, intervals: int,
             bounds: Sequence[Sequence[float]] | None = None) -> StateGrid:
    """Bounds from config, else CartPole's defaults, else the observation space's finite bounds."""
    if bounds is None and env_id == "CartPole-v1":
        bounds = CARTPOLE_BOUNDS
    if bounds is None:
        if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
            raise FrdError(f"{env_id} has unbounded observations ({space.low} .. {space.high}); "
                           "give state-grid bounds, e.g. --grid-bounds='-1,1;-2,2;...' (one lo,hi per dimension)")
        bounds = list(zip(space.low, space.high))
    array = np.asarray(bounds, np.float64)
    if array.shape != (space.shape[0], 2):
        raise FrdError(f"{env_id} observations have {space.shape[0]} dimensions but {len(array)} grid bounds were given")
    return StateGrid(array[:, 0], array[:, 1], int(intervals))

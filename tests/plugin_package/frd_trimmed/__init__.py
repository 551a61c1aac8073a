"""Two plug-in methods for frd, one per domain, installed from outside the repository
(``pip install tests/plugin_package``): the server averages what it receives after dropping the
``trim`` share of the largest and smallest values of each coordinate (a trimmed mean, robust to a
faulty participant). Each is a method class with its options dataclass beside it, declared under
its domain's entry-point group in ``pyproject.toml`` (one module per domain: a classification
user's frd imports no RL); frd adds ``--trim`` to ``frd rl`` and ``frd cls`` by itself."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from frd.errors import FrdError


def trimmed_mean(values: Sequence[np.ndarray], trim: float) -> np.ndarray:
    """Per coordinate, the mean of ``values`` without the ⌊trim·n⌋ largest and smallest, as float32."""
    stacked = np.sort(np.stack(values).astype(np.float64), axis=0)
    cut = int(trim * len(values))
    return stacked[cut:len(values) - cut].mean(axis=0).astype(np.float32)


@dataclass(frozen=True)
class TrimOptions:
    """How much the server trims."""

    trim: float = 0.25
    """Share of the values of each coordinate dropped at each end before averaging (0: the mean)."""

    def __post_init__(self) -> None:
        if not 0 <= self.trim < 0.5:
            raise FrdError(f"--trim must lie in [0, 0.5), got {self.trim}")

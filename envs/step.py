"""What one step of a set of lanes returns, and what the runner needs of any lane set."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import gymnasium as gym
import numpy as np


@dataclass
class LaneStep:
    obs: np.ndarray        # [L, d] state to act on next (a fresh episode's first state after a done)
    final_obs: np.ndarray  # [L, d] the state this step actually reached
    reward: np.ndarray     # [L]
    terminated: np.ndarray  # [L] bool
    truncated: np.ndarray  # [L] bool


class Lanes(Protocol):
    """What the runner needs of any vectorization path."""

    obs_dim: int
    n_actions: int
    observation_space: gym.spaces.Box

    def reset(self) -> np.ndarray: ...

    def step(self, actions: np.ndarray, active: np.ndarray) -> LaneStep: ...

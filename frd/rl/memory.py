"""Per-period experience memories: each lane's visited states and the action probabilities
its actor had when it acted there [Seo et al. 2022, §4, PD step 1]."""
from __future__ import annotations

import numpy as np


class ExperienceMemory:
    """A growable ``[lanes, capacity, ·]`` buffer with one write pointer per lane."""

    def __init__(self, lanes: int, obs_dim: int, n_actions: int, capacity: int = 1024) -> None:
        self.states = np.zeros((lanes, capacity, obs_dim), np.float32)
        self.probs = np.zeros((lanes, capacity, n_actions), np.float32)
        self.size = np.zeros(lanes, np.int64)

    def add(self, lanes: np.ndarray, states: np.ndarray, probs: np.ndarray) -> None:
        """Append one step for each of ``lanes`` (``states``/``probs`` indexed like them)."""
        if len(lanes) == 0:
            return
        self.reserve(1)
        at = self.size[lanes]
        self.states[lanes, at] = states
        self.probs[lanes, at] = probs
        self.size[lanes] += 1

    def extend(self, lane: int, states: np.ndarray, probs: np.ndarray) -> None:
        """Append several steps of one lane (an SB3 agent's collection)."""
        self.reserve(len(states))
        at = self.size[lane]
        self.states[lane, at:at + len(states)] = states
        self.probs[lane, at:at + len(states)] = probs
        self.size[lane] += len(states)

    def reserve(self, steps: int) -> None:
        """Room for ``steps`` more steps of every lane (capacity doubles as needed)."""
        while self.size.max() + steps > self.states.shape[1]:
            grow = self.states.shape[1]
            self.states = np.concatenate([self.states, np.zeros_like(self.states[:, :grow])], axis=1)
            self.probs = np.concatenate([self.probs, np.zeros_like(self.probs[:, :grow])], axis=1)

    def take(self, lane: int) -> tuple[np.ndarray, np.ndarray]:
        """The lane's memory since the last take; the lane starts a new one."""
        n = self.size[lane]
        self.size[lane] = 0
        return self.states[lane, :n].copy(), self.probs[lane, :n].copy()

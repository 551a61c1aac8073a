"""A plain reading of the mission rule [Seo et al. 2022, §4], independent of the engine's jitted one
(``frd.rl.episode_end``): the tests check the runner's tables against it."""
from __future__ import annotations

from collections import deque
from typing import Iterable, Sequence


class MissionWindow:
    """One agent's latest scores; ``add`` says whether the mission is now complete."""

    def __init__(self, target: float = 490.0, window: int = 10) -> None:
        self.target, self.window = target, window
        self.scores: deque[float] = deque(maxlen=window)

    def mean(self) -> float:
        """Mean of the latest scores (−inf before the first episode)."""
        return sum(self.scores) / len(self.scores) if self.scores else float("-inf")

    def add(self, score: float) -> bool:
        self.scores.append(float(score))
        return len(self.scores) == self.window and sum(self.scores) / self.window >= self.target


def mission_episode(scores: Iterable[float], target: float = 490.0, window: int = 10) -> int | None:
    """The 1-based episode at which ``scores`` first completes the mission, or None."""
    tracker = MissionWindow(target, window)
    for episode, score in enumerate(scores, start=1):
        if tracker.add(score):
            return episode
    return None


def first_completion(per_agent: Sequence[Sequence[float]], target: float = 490.0, window: int = 10) -> int | None:
    """For a run's agents scored in lockstep, the episode count of the first to complete."""
    done = [e for e in (mission_episode(s, target, window) for s in per_agent) if e is not None]
    return min(done) if done else None

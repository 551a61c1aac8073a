"""The episode-end and barrier rule, once, in numba: what an episode's end does to its lane and run.

An episode's end is counted and its score joins the lane's mission window; then the mission is
completed (the window's mean reaches the target: under ``until first`` the run ends, else the
lane retires), or the lane reaches the episode cap (it retires), or, for a method that exchanges,
a lane that takes part in the coming round reaches its barrier, ``period`` episodes after the
round's period opened (it waits for its round; with every agent taking part, every ``period``
episodes). A lane that takes no part in it never waits (``next_round``). A run ends when
its last lane retires; an episode that ends after its run has ended, at the same step, is
dropped. The lockstep runner, the fused period (``frd.rl.fused``) and the server of a remote run
(``frd.rl.remote``, from its agents' reports) all call ``end_episode``, so the three cannot decide
differently.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from frd.jit import compiled
from frd.rl.config import RLConfig

GOES_ON, COMPLETED, CAPPED, AT_BARRIER = 0, 1, 2, 3
"""What an episode's end did to its lane."""
ENDS_RUN = 4
"""Added to ``COMPLETED`` or ``CAPPED`` when the end also ended the lane's run (its last event)."""
DROPPED = -1
"""The episode ended after its run had ended, at the same step: it does not count."""
LANE = 3
"""The bits of what an end did that say what it did to its lane: ``what & LANE``."""


class Mission(NamedTuple):
    """The rule's numbers: lanes per run (a run's lanes are consecutive), the target mean over the
    window, the episode cap, and whether the first completion ends its run (each lane's next
    barrier is in ``Standing``)."""

    agents: int
    target: float
    max_episodes: int
    until_first: bool


class Standing(NamedTuple):
    """Where each lane and run stands, as the rule reads and writes it: per lane, stepping, at the
    barrier, retired (capped or completed), episodes so far, its latest scores as a ring
    [L, window] and how many went in, and the episode at which it waits for the coming round (0:
    it takes no part in it); per run, ended, and whether its method exchanges at a barrier."""

    active: np.ndarray
    waiting: np.ndarray
    capped: np.ndarray
    episode: np.ndarray
    recent: np.ndarray
    recent_n: np.ndarray
    barrier: np.ndarray
    finished: np.ndarray
    exchanges: np.ndarray


def mission(config: RLConfig, agents: int) -> Mission:
    """``config``'s rule for runs of ``agents`` lanes."""
    return Mission(agents, float(config.target), config.max_episodes, config.until == "first")


def standing(exchanges: np.ndarray, agents: int, window: int, period: int) -> Standing:
    """Runs (one per entry of ``exchanges``) of ``agents`` lanes each, at their start: every lane
    stepping, no episode yet, each taking part in the first round (``next_round`` narrows that)."""
    lanes = len(exchanges) * agents
    return Standing(active=np.ones(lanes, np.bool_), waiting=np.zeros(lanes, np.bool_),
                    capped=np.zeros(lanes, np.bool_), episode=np.zeros(lanes, np.int64),
                    recent=np.zeros((lanes, window)), recent_n=np.zeros(lanes, np.int64),
                    barrier=np.full(lanes, period, np.int64),
                    finished=np.zeros(len(exchanges), np.bool_), exchanges=np.asarray(exchanges, np.bool_))


def next_round(standing: Standing, lanes: np.ndarray, participants: np.ndarray, period: int) -> None:
    """Open the period of a run's next round: of the run's ``lanes``, those waiting at the barrier
    step again; ``participants`` wait next once they have played ``period`` more episodes, the
    others take no part in the round (they go on learning alone and wait nowhere)."""
    live = lanes[~standing.capped[lanes]]
    standing.waiting[live], standing.active[live] = False, True
    standing.barrier[lanes] = 0
    standing.barrier[participants] = standing.episode[participants] + period


def participating(standing: Standing, lanes: np.ndarray) -> np.ndarray:
    """Of ``lanes``, those not retired that take part in the coming round."""
    return lanes[~standing.capped[lanes] & (standing.barrier[lanes] > 0)]


def recent_mean(standing: Standing, lane: int) -> float:
    """The mean of ``lane``'s latest scores (−inf before its first episode)."""
    n = int(standing.recent_n[lane])
    return float("-inf") if n == 0 else float(window_mean(standing.recent, lane, n))


@compiled(error_model="numpy")
def window_mean(recent, lane, n):
    """The mission rule's average, in one place: the mean of ``lane``'s latest min(n, W) scores in
    its ring ``recent[lane]`` (W wide, ``n`` scores so far), summed oldest first."""
    W = recent.shape[1]
    k = min(n, W)
    total = 0.0
    for j in range(n - k, n):
        total += recent[lane, j % W]
    return total / k


@compiled(error_model="numpy")
def window_means(scores, W):
    """After each of an agent's ``scores`` (in episode order), the mission rule's average (of fewer
    before the window fills): the same floats the rule read (``window_mean``)."""
    ring = np.zeros((1, W))
    out = np.empty(len(scores))
    for i in range(len(scores)):
        ring[0, i % W] = scores[i]
        out[i] = window_mean(ring, 0, i + 1)
    return out


@compiled(error_model="numpy")
def end_episode(lane, score, mission, standing):
    """``lane``'s episode ended with ``score``: count it, add the score to its window and decide
    (the module's rule); returns what it did (``GOES_ON`` … ``AT_BARRIER``, plus ``ENDS_RUN``), or
    ``DROPPED``."""
    A, target, max_episodes, until_first = mission
    active, waiting, capped, episode, recent, recent_n, barrier, finished, exchanges = standing
    run = lane // A
    if finished[run]:  # another lane ended the run at this very step
        return DROPPED
    episode[lane] += 1
    W = recent.shape[1]
    recent[lane, recent_n[lane] % W] = score
    recent_n[lane] += 1
    if recent_n[lane] >= W:
        if window_mean(recent, lane, recent_n[lane]) >= target:
            if until_first:
                _end_run(run, A, active, waiting, finished)
                return COMPLETED + ENDS_RUN
            return COMPLETED + _retire(lane, run, A, active, waiting, capped, finished)
    if episode[lane] >= max_episodes:
        return CAPPED + _retire(lane, run, A, active, waiting, capped, finished)
    if exchanges[run] and episode[lane] == barrier[lane]:
        waiting[lane] = True
        active[lane] = False
        return AT_BARRIER
    return GOES_ON


@compiled(error_model="numpy")
def _retire(lane, run, A, active, waiting, capped, finished):
    """The lane stops for good; the run ends with its last lane (then returns ``ENDS_RUN``, else 0)."""
    capped[lane] = True
    active[lane] = False
    for k in range(A):
        if not capped[run * A + k]:
            return 0
    _end_run(run, A, active, waiting, finished)
    return ENDS_RUN


@compiled(error_model="numpy")
def _end_run(run, A, active, waiting, finished):
    finished[run] = True
    for k in range(A):
        active[run * A + k] = False
        waiting[run * A + k] = False

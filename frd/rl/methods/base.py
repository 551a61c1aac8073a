"""The RL method contract: one persistent strategy object per run (Flower's ``Strategy``
pattern), built once, owning its state across rounds.

A strategy declares what it needs from the runner (``exchanges``, ``records_memory``), checks
its options against the environment before anything is written (``check``), and follows the
exchange contract of :mod:`frd.exchange` each round: ``begin_round`` hands it the round's view
of the run, then ``upload`` → ``aggregate`` → ``download`` → ``finish_round``. ``after_update``
is the learner hook: called after each local A2C update of the run's agents, so a method that
changes local learning is still one file.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Sequence

import gymnasium as gym
import numpy as np

from frd.agents.a2c import A2CPopulation
from frd.agents.grouped import GroupedPopulation
from frd.agents.sb3 import MixedPopulation
from frd.options import NoOptions
from frd.payload import Payload

Population = A2CPopulation | GroupedPopulation | MixedPopulation
"""What a strategy is handed: one population's rows, grouped or not, SB3 agents among them or not."""


@dataclass(frozen=True)
class RunSetup:
    """What a strategy knows of its run from the start."""

    env_id: str
    observation_space: gym.spaces.Box
    n_actions: int
    agents: int
    seed: int
    widths: tuple[int, ...] = ()  # each agent's hidden width (empty: not known to the caller)
    algorithms: tuple[str, ...] = ()     # each agent's learner, ``algo=`` (frd, ppo, a2c-sb3, dqn)
    architectures: tuple[str, ...] = ()  # each agent's averaged network, e.g. "actor 4-64-64-2 tanh"


@dataclass(frozen=True)
class RoundContext:
    """The run as one exchange round sees it."""

    population: Population
    rows: Mapping[int, int]                                # live agent → population row
    memories: Mapping[int, tuple[np.ndarray, np.ndarray]]  # agent → (states, probs) of the period
    rng: np.random.Generator                               # the round's own draws
    recent_scores: Mapping[int, float] = field(default_factory=dict)  # agent → mean of its latest window


class Strategy:
    """Base of every RL method; ``independent`` is this class with its defaults."""

    description: ClassVar[str]
    Options: ClassVar[type] = NoOptions
    exchanges: ClassVar[bool] = True        # agents wait at the barrier every period for a round
    records_memory: ClassVar[bool] = False  # the runner records each agent's (state, policy) memory
    draws_at_upload: ClassVar[bool] = False  # uploads draw from the round's generator, agent after agent

    @classmethod
    def check(cls, options: Any, setup: RunSetup) -> None:
        """Refuse options that cannot work with this environment (``FrdError``); default: none."""

    def __init__(self, options: Any, setup: RunSetup) -> None:
        self.options, self.setup = options, setup
        self._round: RoundContext | None = None
        self.log: list[dict] = []  # per-round rows (agent, …) the runner moves into rounds.csv

    @property
    def round(self) -> RoundContext:
        assert self._round is not None, "begin_round() comes first"
        return self._round

    def begin_round(self, ctx: RoundContext) -> None:
        self._round = ctx

    def upload(self, agent: int) -> Payload:
        raise NotImplementedError

    def aggregate(self, uploads: Mapping[int, Payload], participants: Sequence[int]) -> dict[int, Payload]:
        raise NotImplementedError

    def download(self, agent: int, payload: Payload) -> None:
        raise NotImplementedError

    def finish_round(self) -> None:
        """After every download of the round; default: nothing left to do."""

    def finish_rng_states(self, received: Mapping[int, Payload], recent_scores: Mapping[int, float],
                          rng: np.random.Generator) -> dict[int, Mapping[str, Any]]:
        """For agents that run remotely: the state of the round's generator (``rng``, fresh) at
        which each receiver's ``finish_round`` starts drawing in process, given the delivered
        downloads; default: ``finish_round`` draws nothing."""
        return {}

    def after_update(self, population: Population, rows: Sequence[int]) -> None:
        """Learner hook, after a local A2C update of the run's agents at population ``rows`` (agents
        whose recipes update at different intervals: whenever they all just have); default: none
        (the runner skips strategies that do not override it)."""

    @classmethod
    def hooks_updates(cls) -> bool:
        return cls.after_update is not Strategy.after_update


class Independent(Strategy):
    """No exchange: the lower baseline."""

    description = "no exchange (lower baseline)"
    exchanges = False

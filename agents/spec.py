"""Heterogeneous populations (``--agent-spec``): each agent's learner, hidden width, learning rate
and recipe, given as ``;``-separated entries cycled over the agents (agent i gets entry i mod n).
A key an entry leaves out is the common ``--hidden`` / ``--recipe`` / the recipe's rates.

``algo=`` picks the learner: ``frd`` (our n-step A2C, the default) or a Stable-Baselines3
algorithm (``ppo``, ``a2c-sb3``, ``dqn``; ``frd.agents.sb3``), whose rl-zoo hyperparameters
``sb3.<name>=value`` pairs override (e.g. ``algo=ppo,sb3.n_epochs=10``) and whose hidden layers
``h`` sets ([h, h]; left out: the zoo's). ``qtemp`` is a DQN agent's τ in softmax(Q/τ), and
``qstudent`` the τ of the softmax it distils a teacher into (left out: ``qtemp``)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from frd.agents.a2c import RECIPES, A2CConfig
from frd.agents.a2c import recipe as a2c_recipe
from frd.agents.sb3 import ALGORITHMS, FRD, SB3Config, sb3_config
from frd.errors import FrdError

KEYS = {"h": "hidden", "lr": "lr", "recipe": "recipe", "algo": "algo", "qtemp": "q_temperature",
        "qstudent": "q_student_temperature"}
"""Key in ``--agent-spec`` → field of ``AgentSpec`` (and ``sb3.<name>``: one of its ``sb3`` pairs)."""
SB3_PREFIX = "sb3."


@dataclass(frozen=True)
class AgentSpec:
    """One agent's departures from the common learner (None: the common value)."""

    hidden: int | None = None  # width h of the actor's and the critic's hidden layers
    lr: float | None = None    # Adam rate of the actor and the critic alike (None: the recipe's own rates)
    recipe: str | None = None  # A2C recipe, one of frd.agents.a2c.RECIPES
    algo: str | None = None    # learner: frd (None) or an SB3 algorithm of frd.agents.sb3.ALGORITHMS
    sb3: tuple[tuple[str, Any], ...] = ()  # SB3 hyperparameters over the zoo's, (name, value)
    q_temperature: float | None = None    # a DQN agent's τ (None: frd.agents.sb3.Q_TEMPERATURE)
    q_student_temperature: float | None = None  # the τ it distils into (None: q_temperature)

    def __post_init__(self) -> None:
        if self.hidden is not None and self.hidden < 1:
            raise FrdError(f"--agent-spec: h must be at least 1, got {self.hidden}")
        if self.lr is not None and not (math.isfinite(self.lr) and self.lr > 0):
            raise FrdError(f"--agent-spec: lr must be a finite number > 0, got {self.lr}")
        if self.recipe is not None and self.recipe not in RECIPES:
            raise FrdError(f"--agent-spec: unknown recipe {self.recipe!r}; choose one of {', '.join(RECIPES)}")
        if self.algo is not None and self.algo not in ALGORITHMS and self.algo != FRD:
            raise FrdError(f"--agent-spec: unknown algo {self.algo!r}; choose one of {', '.join([FRD, *ALGORITHMS])}")
        if not self.is_sb3 and (self.sb3 or self.q_temperature is not None or self.q_student_temperature is not None):
            raise FrdError("--agent-spec: sb3.<name>, qtemp and qstudent are for Stable-Baselines3 learners (algo=ppo, "
                           "a2c-sb3 or dqn)")
        if self.is_sb3 and self.recipe is not None:
            raise FrdError(f"--agent-spec: recipe is one of our A2C's; algo={self.algo} takes sb3.<name> pairs")
        for key, tau in (("qtemp", self.q_temperature), ("qstudent", self.q_student_temperature)):
            if tau is not None and not (math.isfinite(tau) and tau > 0):
                raise FrdError(f"--agent-spec: {key} must be a finite number > 0, got {tau}")

    @property
    def is_sb3(self) -> bool:
        """Whether this agent is a Stable-Baselines3 learner."""
        return self.algo is not None and self.algo != FRD

    @property
    def algorithm(self) -> str:
        """Its ``algo=`` name (``frd`` for ours)."""
        return self.algo if self.is_sb3 else FRD  # type: ignore[return-value]

    def sb3_config(self, env_id: str) -> SB3Config:
        """This SB3 agent's resolved learner (``frd.agents.sb3.sb3_config``)."""
        assert self.algo is not None
        return sb3_config(self.algo, env_id, self.hidden, self.lr, self.sb3, self.q_temperature,
                          self.q_student_temperature)

    def a2c(self, recipe: str, hidden: int, activation: str) -> A2CConfig:
        """This agent's A2C config, the common ``recipe``, ``hidden`` and ``activation`` filling the gaps."""
        rates = {} if self.lr is None else {"actor_lr": self.lr, "critic_lr": self.lr}
        return a2c_recipe(self.recipe if self.recipe is not None else recipe,
                          hidden=self.hidden if self.hidden is not None else hidden, activation=activation, **rates)


def parse_agent_spec(text: str) -> tuple[AgentSpec, ...]:
    """``"h=32;h=64,lr=3e-4;recipe=rlcode"`` → one ``AgentSpec`` per entry; ``""`` → none
    (every agent is the common learner)."""
    if not text.strip():
        return ()
    return tuple(_entry(entry.strip()) for entry in text.split(";"))


def _entry(text: str) -> AgentSpec:
    values: dict[str, Any] = {}
    sb3: dict[str, Any] = {}
    for pair in text.split(","):
        key, sep, value = (part.strip() for part in pair.partition("="))
        if not (key and sep and value):
            raise FrdError(f"--agent-spec: expected KEY=VALUE pairs such as h=64,lr=3e-4, got {pair.strip()!r}")
        if key.startswith(SB3_PREFIX) and len(key) > len(SB3_PREFIX):
            if key[len(SB3_PREFIX):] in sb3:
                raise FrdError(f"--agent-spec: {key} is given twice in {text!r}")
            sb3[key[len(SB3_PREFIX):]] = _literal(value)
            continue
        if key not in KEYS:
            raise FrdError(f"--agent-spec: unknown key {key!r}; the keys are {', '.join(KEYS)} and sb3.<name>")
        if KEYS[key] in values:
            raise FrdError(f"--agent-spec: {key} is given twice in {text!r}")
        values[KEYS[key]] = _value(key, value)
    return AgentSpec(**values, sb3=tuple(sb3.items()))


def _value(key: str, text: str) -> int | float | str:
    try:
        return int(text) if key == "h" else float(text) if key in ("lr", "qtemp", "qstudent") else text
    except ValueError:
        raise FrdError(f"--agent-spec: {key} takes {'an integer' if key == 'h' else 'a number'}, got {text!r}") from None


def _literal(text: str) -> Any:
    """An ``sb3.<name>`` value: an integer, a number, true/false/none, else the text (``lin_0.001``)."""
    words = {"true": True, "false": False, "none": None}
    if text.lower() in words:
        return words[text.lower()]
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def agent_specs(specs: tuple[AgentSpec, ...], agents: int) -> list[AgentSpec]:
    """Each of ``agents`` agents' entry: the specs cycled."""
    cycle = specs or (AgentSpec(),)
    return [cycle[a % len(cycle)] for a in range(agents)]


def agent_configs(specs: tuple[AgentSpec, ...], agents: int, recipe: str, hidden: int, activation: str) -> list[A2CConfig]:
    """The A2C config of each of ``agents`` agents: the specs cycled, the common values filling the
    gaps (an SB3 agent's is the common learner's: a placeholder row of the population that never steps)."""
    return [(AgentSpec() if spec.is_sb3 else spec).a2c(recipe, hidden, activation) for spec in agent_specs(specs, agents)]

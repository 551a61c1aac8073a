"""Heterogeneous populations (``--agent-spec``): each agent's hidden width, learning rate and
recipe, given as ``;``-separated entries cycled over the agents (agent i gets entry i mod n).
A key an entry leaves out is the common ``--hidden`` / ``--recipe`` / the recipe's rates."""
from __future__ import annotations

import math
from dataclasses import dataclass

from frd.agents.a2c import RECIPES, A2CConfig
from frd.agents.a2c import recipe as a2c_recipe
from frd.errors import FrdError

KEYS = {"h": "hidden", "lr": "lr", "recipe": "recipe"}
"""Key in ``--agent-spec`` → field of ``AgentSpec``."""


@dataclass(frozen=True)
class AgentSpec:
    """One agent's departures from the common learner (None: the common value)."""

    hidden: int | None = None  # width h of the actor's and the critic's hidden layers
    lr: float | None = None    # Adam rate of the actor and the critic alike (None: the recipe's own rates)
    recipe: str | None = None  # A2C recipe, one of frd.agents.a2c.RECIPES

    def __post_init__(self) -> None:
        if self.hidden is not None and self.hidden < 1:
            raise FrdError(f"--agent-spec: h must be at least 1, got {self.hidden}")
        if self.lr is not None and not (math.isfinite(self.lr) and self.lr > 0):
            raise FrdError(f"--agent-spec: lr must be a finite number > 0, got {self.lr}")
        if self.recipe is not None and self.recipe not in RECIPES:
            raise FrdError(f"--agent-spec: unknown recipe {self.recipe!r}; choose one of {', '.join(RECIPES)}")

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
    values: dict[str, int | float | str] = {}
    for pair in text.split(","):
        key, sep, value = (part.strip() for part in pair.partition("="))
        if not (key and sep and value):
            raise FrdError(f"--agent-spec: expected KEY=VALUE pairs such as h=64,lr=3e-4, got {pair.strip()!r}")
        if key not in KEYS:
            raise FrdError(f"--agent-spec: unknown key {key!r}; the keys are {', '.join(KEYS)}")
        if KEYS[key] in values:
            raise FrdError(f"--agent-spec: {key} is given twice in {text!r}")
        values[KEYS[key]] = _value(key, value)
    return AgentSpec(**values)  # type: ignore[arg-type]


def _value(key: str, text: str) -> int | float | str:
    try:
        return int(text) if key == "h" else float(text) if key == "lr" else text
    except ValueError:
        raise FrdError(f"--agent-spec: {key} takes {'an integer' if key == 'h' else 'a number'}, got {text!r}") from None


def agent_configs(specs: tuple[AgentSpec, ...], agents: int, recipe: str, hidden: int, activation: str) -> list[A2CConfig]:
    """The A2C config of each of ``agents`` agents: the specs cycled, the common values filling the gaps."""
    cycle = specs or (AgentSpec(),)
    return [cycle[a % len(cycle)].a2c(recipe, hidden, activation) for a in range(agents)]

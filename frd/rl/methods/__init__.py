"""RL methods by name. A new method is one module here (its strategy and options) plus one line
below, or a package's entry point (``frd.plugins``); its options become CLI flags of ``frd rl``
and ``frd compare`` by themselves."""
from __future__ import annotations

from frd.errors import FrdError
from frd.plugins import RL_GROUP, plugged_in
from frd.rl.methods.base import Independent, RoundContext, RunSetup, Strategy
from frd.rl.methods.frd import FederatedReinforcementDistillation
from frd.rl.methods.frl import FederatedRL
from frd.rl.methods.mixfrd import MixFRD
from frd.rl.methods.pd import PolicyDistillation

RL_METHODS: dict[str, type[Strategy]] = {
    "independent": Independent,
    "frl": FederatedRL,
    "pd": PolicyDistillation,
    "frd": FederatedReinforcementDistillation,
    "mixfrd": MixFRD,
}
"""``RL_METHODS[name](options, setup)`` builds the strategy of one run."""
RL_METHODS.update(plugged_in(RL_GROUP, RL_METHODS))  # methods installed from outside (``frd.plugins``)


def get_method(name: str) -> type[Strategy]:
    if name not in RL_METHODS:
        raise FrdError(f"unknown RL method {name!r}; choose from {', '.join(RL_METHODS)}")
    return RL_METHODS[name]


__all__ = ["RL_METHODS", "RoundContext", "RunSetup", "Strategy", "get_method"]

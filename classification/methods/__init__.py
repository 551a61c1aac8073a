"""Classification methods by name. A new method is one module here plus one entry below."""
from __future__ import annotations

from classification.methods.base import GLOBAL, Method
from classification.methods.fd import FederatedDistillation
from classification.methods.feddualmatch import FedDM, FedDualMatch
from classification.methods.fl import FedAvg
from classification.methods.fld import FederatedLearningAfterDistillation, Mix2FLD, MixFLD

METHODS: dict[str, type[Method]] = {
    "fl": FedAvg,
    "fd": FederatedDistillation,
    "feddm": FedDM,
    "feddualmatch": FedDualMatch,
    "fld": FederatedLearningAfterDistillation,
    "mixfld": MixFLD,
    "mix2fld": Mix2FLD,
}
"""``METHODS[name](ctx)`` builds the method for one run."""

__all__ = ["GLOBAL", "METHODS", "Method"]

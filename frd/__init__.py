"""frd: what each way of sharing knowledge costs on the wire, and what it buys.

The Python API, one example per domain (each returns a numeric ``pandas.DataFrame``, one row per
method, and saves its tables, ``summary.csv`` and figures in ``out``)::

    import frd
    summary = frd.rl.run(frd.rl_config("frd,independent", agents=2, seeds=2, max_episodes=200), out="results/api-rl")
    summary = frd.classification.run(frd.cls_configs("fl,fd", rounds=2, devices=3), out="results/api-cls")

Names are imported on first use (PEP 562), so ``import frd`` stays light: Ray and Flower
workers import it without pulling in torch, numba or matplotlib.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "rl": ("frd.rl", None),
    "classification": ("frd.classification", None),
    "RLConfig": ("frd.rl.config", "RLConfig"),
    "rl_config": ("frd.rl.config", "rl_config"),
    "ClsConfig": ("frd.classification.config", "ClsConfig"),
    "cls_config": ("frd.classification.methods", "cls_config"),
    "cls_configs": ("frd.classification.methods", "cls_configs"),
    "FrdError": ("frd.errors", "FrdError"),
}
"""Public name → (module, attribute in it; None: the module itself)."""

__all__ = ["ClsConfig", "FrdError", "RLConfig", "classification", "cls_config", "cls_configs", "rl", "rl_config"]

if TYPE_CHECKING:
    from frd import classification, rl
    from frd.classification.config import ClsConfig
    from frd.classification.methods import cls_config, cls_configs
    from frd.errors import FrdError
    from frd.rl.config import RLConfig, rl_config


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'frd' has no attribute {name!r}")
    module, attribute = _EXPORTS[name]
    value = importlib.import_module(module)
    return value if attribute is None else getattr(value, attribute)


def __dir__() -> list[str]:
    return sorted([*__all__, "__version__"])

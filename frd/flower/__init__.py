"""frd over a real Flower deployment: a ServerApp that runs the unchanged round loop through a
remote exchange, a ClientApp per participant, and the processes that host them.

``flwr`` is an optional dependency (``pip install 'frd[flower]'``); only ``frd.flower.apps`` imports it.
"""
from __future__ import annotations

from importlib import util

from frd.errors import FrdError

MISSING_FLWR = "Flower is not installed: pip install 'frd[flower]'"


def require_flwr() -> None:
    """One line naming the extra when flwr is missing."""
    if util.find_spec("flwr") is None:
        raise FrdError(MISSING_FLWR)

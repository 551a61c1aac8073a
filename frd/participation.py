"""Partial participation, one rule for both domains: K of N participants per round, or a fraction
C of them [McMahan et al. 2017, FedAvg's C: m = max(C·K, 1); Flower's ``fraction_train`` with
``min_available_nodes``]."""
from __future__ import annotations

import math

from frd.errors import FrdError

FRACTION_SLACK = 1e-9
"""Added to C·N before rounding down, so that a share written in decimal (0.7 × 10 = 7.000…01,
0.57 × 100 = 56.99…) gives the count it names."""


def check_participation(total: int, per_round: int | None, fraction: float | None, *, total_flag: str,
                        per_round_flag: str) -> None:
    """K within 1 … N, C within (0, 1], not both; each with the domain's flag names."""
    if per_round is not None and fraction is not None:
        raise FrdError(f"give {per_round_flag} or --fraction, not both")
    if per_round is not None and not 1 <= per_round <= total:
        raise FrdError(f"{per_round_flag} must lie in 1..{total} ({total_flag}), got {per_round}")
    if fraction is not None and not 0 < fraction <= 1:
        raise FrdError(f"--fraction must lie in (0, 1], got {fraction}")


def participants(total: int, per_round: int | None, fraction: float | None, least: int = 1) -> int:
    """How many take part in a round: ``per_round``, else ⌊C·N⌋ but at least ``least``, else all."""
    if per_round is not None:
        return per_round
    if fraction is not None:
        return max(math.floor(fraction * total + FRACTION_SLACK), least)
    return total

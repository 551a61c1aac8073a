"""What goes on the wire: named arrays with a declared bit width per element.

The size of a payload is always computed from the arrays actually sent, never from a hand
formula, so every method is charged for exactly what it transmits.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

FLOAT_BITS = 32
"""A float32 weight, output, state or policy entry [FD / Mix2FLD papers]."""
PIXEL_BITS = 8
"""A raw 8-bit image pixel."""


def index_bits(n: int) -> int:
    """Bits for an integer index among ``n`` values: ceil(log2(n)), at least 1."""
    if n < 1:
        raise ValueError(f"an index needs at least one possible value, got n={n}")
    return max(1, math.ceil(math.log2(n)))


@dataclass(frozen=True)
class Array:
    """One named array of a payload and the bits each of its elements costs."""

    values: np.ndarray
    bits_per_element: int

    @property
    def bits(self) -> int:
        return int(np.asarray(self.values).size) * int(self.bits_per_element)


@dataclass(frozen=True)
class Payload:
    """A message between a participant and the server.

    ``kind`` names what it carries (``weights``, ``memory``, ``proxy_memory``, ``outputs`` …);
    ``entries`` is its logical row count (memory entries, labels, samples), for the ledger.
    """

    kind: str
    arrays: Mapping[str, Array] = field(default_factory=dict)
    entries: int = 0
    crossed: Payload | None = field(default=None, compare=False, repr=False)
    """A decoded payload's encoded form, as it crossed the link (``frd.codecs.link``); the wire
    carries that. None: it crossed as it is."""

    @property
    def bits(self) -> int:
        return sum(a.bits for a in self.arrays.values())

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name].values

    @classmethod
    def of(cls, kind: str, entries: int, **arrays: tuple[np.ndarray, int]) -> "Payload":
        """Build from ``name=(array, bits_per_element)`` pairs."""
        return cls(kind, {k: Array(np.asarray(v), b) for k, (v, b) in arrays.items()}, int(entries))

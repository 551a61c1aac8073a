"""What every codec is: a float32 vector in, named parts with their bit widths out, and back.

A codec sees one payload array at a time, flattened (``frd.codecs.link`` decides which arrays
and reshapes them). The parts are what a transport would send, so the ledger charges their bits
(``frd.payload.Array.bits``): values, indices and side values alike, never a formula.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from frd.payload import Array

Parts = dict[str, Array]
"""An encoded array: part name → values and bits per element (e.g. ``codes``, ``lo``, ``hi``)."""

FINITE = "finite"
"""The part that marks the finite entries (1 bit each), sent only by a codec that cannot carry
NaN itself and only when the array holds a non-finite value (FD's outputs for an unseen label)."""


class Codec:
    """One encoding of float32 vectors. Subclasses set ``spec`` and ``lossless`` and implement
    ``pack`` / ``unpack`` for vectors of finite values; a codec whose encoding holds
    NaN itself (the float formats) sets ``carries_nan``."""

    spec: str = ""
    """The codec's text, as ``--codec-up`` takes it."""
    lossless: bool = False
    """decode(encode(x)) == x for every float32 x: error feedback would carry nothing."""
    carries_nan: bool = False
    """Non-finite entries survive the encoding itself (no ``finite`` mask needed)."""

    def encode(self, x: np.ndarray, rng: np.random.Generator) -> Parts:
        """``x`` (float32, one dimension) as parts. Non-finite entries decode as NaN."""
        if self.carries_nan or np.isfinite(x).all():
            return self.pack(x, rng)
        finite = np.isfinite(x)
        return {FINITE: Array(finite.astype(np.uint8), 1), **self.pack(x[finite], rng)}

    def decode(self, parts: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        """The float32 vector of ``n`` entries that ``parts`` encode."""
        if FINITE not in parts:
            return self.unpack(parts, n)
        finite = parts[FINITE].astype(bool)
        out = np.full(n, np.nan, np.float32)
        out[finite] = self.unpack(parts, int(finite.sum()))
        return out

    def pack(self, x: np.ndarray, rng: np.random.Generator) -> Parts:
        raise NotImplementedError

    def unpack(self, parts: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        raise NotImplementedError

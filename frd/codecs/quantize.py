"""``q<b>``: unbiased stochastic uniform quantization to 2^b levels, b = 1 … 16 [Suresh et al.
2017, "Distributed Mean Estimation with Limited Communication", §3 (stochastic k-level
quantization, k = 2^b)].

Each array is one vector [our reading of "per array": per tensor, as the paper quantizes each
client's vector as a whole]: its min and max are sent at 32 bits each and every entry as a
b-bit level index between them. An entry between levels B(r) and B(r+1) = B(r) + s goes up with
probability (x − B(r)) / s, so E[decode] = x; the error of one entry is below s = (max − min) /
(2^b − 1). Per row block would cut the error of arrays whose rows differ in range (a layer's
weights and its biases are already separate arrays here) at 64 side bits a block; the arrays frd
sends are small enough that one range each is the cheaper choice [our choice]. The draws come from
the generator ``frd.codecs.link`` gives each (run, round, participant, direction).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from frd.codecs.base import Codec, Parts
from frd.payload import FLOAT_BITS, Array

MAX_BITS = 16


class Quantized(Codec):
    def __init__(self, bits: int) -> None:
        self.bits = bits
        self.spec = f"q{bits}"

    @property
    def step_count(self) -> int:
        """Steps between the 2^b levels."""
        return (1 << self.bits) - 1

    def _step(self, lo: np.float32, hi: np.float32) -> float:
        return (float(hi) - float(lo)) / self.step_count

    def pack(self, x: np.ndarray, rng: np.random.Generator) -> Parts:
        lo, hi = (np.float32(x.min()), np.float32(x.max())) if x.size else (np.float32(0), np.float32(0))
        step = self._step(lo, hi)
        if step > 0:
            scaled = (x.astype(np.float64) - float(lo)) / step
            below = np.floor(scaled)
            codes = np.minimum(below + (rng.random(x.size) < scaled - below), self.step_count)
        else:
            codes = np.zeros(x.size)
        dtype = np.uint8 if self.bits <= 8 else np.uint16
        return {"codes": Array(codes.astype(dtype), self.bits),
                "lo": Array(np.array([lo], np.float32), FLOAT_BITS), "hi": Array(np.array([hi], np.float32), FLOAT_BITS)}

    def unpack(self, parts: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        lo, hi = parts["lo"][0], parts["hi"][0]
        return (float(lo) + parts["codes"].astype(np.float64) * self._step(lo, hi)).astype(np.float32)

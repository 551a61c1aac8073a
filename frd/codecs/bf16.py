"""``bf16``: bfloat16, float32's sign and 8-bit exponent with a 7-bit fraction, 16 bits a value,
rounded to nearest (even) as ``torch.bfloat16`` does: float32's range at 2–3 significant digits."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from frd.codecs.base import Codec, Parts
from frd.payload import Array


class BFloat16(Codec):
    spec = "bf16"
    carries_nan = True

    def pack(self, x: np.ndarray, rng: np.random.Generator) -> Parts:
        bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        nan = np.isnan(x)
        rounded[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)  # a quiet NaN stays NaN, not inf
        return {"values": Array(rounded, 16)}

    def unpack(self, parts: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        return (parts["values"].astype(np.uint32) << 16).view(np.float32)

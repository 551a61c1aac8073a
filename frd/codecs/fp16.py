"""``fp16``: IEEE half precision, 16 bits a value, rounded to nearest (even). Values beyond
±65,504 become ±inf and those below 6·10⁻⁸ in magnitude become 0, as on any half-precision link."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from frd.codecs.base import Codec, Parts
from frd.payload import Array


class Float16(Codec):
    spec = "fp16"
    carries_nan = True

    def pack(self, x: np.ndarray, rng: np.random.Generator) -> Parts:
        with np.errstate(over="ignore"):
            return {"values": Array(x.astype(np.float16), 16)}

    def unpack(self, parts: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        return parts["values"].astype(np.float32)

"""``fp32``: the values as they are, 32 bits each: frd's encoding before codecs, the default."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from frd.codecs.base import Codec, Parts
from frd.payload import FLOAT_BITS, Array


class Float32(Codec):
    spec = "fp32"
    lossless = True
    carries_nan = True

    def pack(self, x: np.ndarray, rng: np.random.Generator) -> Parts:
        return {"values": Array(x.astype(np.float32), FLOAT_BITS)}

    def unpack(self, parts: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        return parts["values"].astype(np.float32)

"""``topk:<f>`` and ``topk:<f>+<value codec>``: the ⌈f·n⌉ entries of largest magnitude, each as
its index (⌈log2 n⌉ bits, ``frd.payload.index_bits``) and its value in the value codec (fp32
unless one follows ``+``); the rest decode as 0 [Aji & Heafield 2017, "Sparse Communication for
Distributed Gradient Descent", §2]. Ties in magnitude go to the lower index, so the choice is
deterministic. What it drops is what error feedback (``--error-feedback``) carries over.
"""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from frd.codecs.base import Codec, Parts
from frd.payload import Array, index_bits

VALUES = "values."
"""Prefix of the value codec's parts."""


class TopK(Codec):
    def __init__(self, fraction: float, values: Codec) -> None:
        self.fraction, self.values = fraction, values
        self.spec = f"topk:{fraction:g}" + ("" if values.spec == "fp32" else f"+{values.spec}")

    def kept(self, n: int) -> int:
        """⌈f·n⌉ entries of ``n`` (all of them when f = 1)."""
        return min(n, math.ceil(self.fraction * n))

    def pack(self, x: np.ndarray, rng: np.random.Generator) -> Parts:
        order = np.argsort(-np.abs(x), kind="stable")[:self.kept(x.size)]
        index = np.sort(order).astype(np.uint32)
        parts = {"index": Array(index, index_bits(max(x.size, 1)))}
        parts.update({VALUES + k: v for k, v in self.values.encode(x[index], rng).items()})
        return parts

    def unpack(self, parts: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        index = parts["index"].astype(np.int64)
        out = np.zeros(n, np.float32)
        out[index] = self.values.decode({k[len(VALUES):]: v for k, v in parts.items() if k.startswith(VALUES)},
                                        len(index))
        return out

"""Codecs: how a payload's float arrays are encoded on the wire (``--codec-up``, ``--codec-down``).

A codec's text names it: ``fp32`` (the default: the values as they are), ``fp16``, ``bf16``,
``q<b>`` for b = 1 … 16 (stochastic uniform quantization) and ``topk:<f>`` with f in (0, 1],
optionally followed by a value codec, e.g. ``topk:0.01+q8``. Each is one file of this package and
one line of ``CODECS`` (a prefix and how it reads the rest of the text). ``frd.codecs.link`` puts
them between a round's payloads and the ledger.
"""
from __future__ import annotations

import re
from typing import Callable

from frd.codecs.base import Codec
from frd.codecs.bf16 import BFloat16
from frd.codecs.fp16 import Float16
from frd.codecs.fp32 import Float32
from frd.codecs.quantize import MAX_BITS, Quantized
from frd.codecs.topk import TopK
from frd.errors import FrdError

FORMS = "fp32, fp16, bf16, q<b> (b = 1 … 16) or topk:<f> (0 < f ≤ 1), optionally topk:<f>+<codec>"
"""The codec texts, for error messages and help."""


def _plain(codec: type[Codec]) -> Callable[[str], Codec | None]:
    return lambda rest: None if rest else codec()


def _quantized(rest: str) -> Codec | None:
    if not re.fullmatch(r"[0-9]+", rest):
        return None
    if not 1 <= int(rest) <= MAX_BITS:
        raise FrdError(f"q<b> takes b = 1 … {MAX_BITS} bits, got q{rest}")
    return Quantized(int(rest))


def _top_k(rest: str) -> Codec | None:
    if not rest.startswith(":"):
        return None
    fraction, plus, values = rest[1:].partition("+")
    try:
        f = float(fraction)
    except ValueError:
        raise FrdError(f"topk takes a fraction, as topk:0.01, got topk{rest}") from None
    if not 0 < f <= 1:
        raise FrdError(f"topk's fraction must lie in (0, 1], got {f:g}")
    value_codec = parse_codec(values) if plus else Float32()
    if isinstance(value_codec, TopK):
        raise FrdError(f"topk's values take a value codec (fp32, fp16, bf16, q<b>), not {values}")
    return TopK(f, value_codec)


CODECS: dict[str, Callable[[str], Codec | None]] = {
    "fp32": _plain(Float32),
    "fp16": _plain(Float16),
    "bf16": _plain(BFloat16),
    "q": _quantized,
    "topk": _top_k,
}
"""Name → the codec of the text after the name (None: that text is not one of its forms)."""


def parse_codec(text: str) -> Codec:
    """The codec ``text`` names; an ``FrdError`` naming the forms otherwise."""
    text = text.strip()
    for name, make in CODECS.items():
        if text.startswith(name) and (codec := make(text[len(name):])) is not None:
            return codec
    raise FrdError(f"unknown codec {text!r}; choose {FORMS}")


__all__ = ["CODECS", "FORMS", "Codec", "parse_codec"]

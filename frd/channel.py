"""Channel models: how many seconds a transfer of so many bits takes, and whether it arrives.

``ideal`` delivers everything instantly. The wireless model of SPEC §2 plugs in through the same
two calls, so both RL and classification rounds can run over it unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Protocol


@dataclass(frozen=True)
class Transfer:
    latency_s: float
    delivered: bool


class Channel(Protocol):
    """Uplink: the participants share the band; downlink: the server sends to each receiver."""

    def uplink(self, bits: Mapping[int, int]) -> dict[int, Transfer]: ...

    def downlink(self, bits: Mapping[int, int]) -> dict[int, Transfer]: ...


class IdealChannel:
    """Every transfer arrives at once: payload is counted, time on the wire is zero."""

    name = "ideal"

    def uplink(self, bits: Mapping[int, int]) -> dict[int, Transfer]:
        return {p: Transfer(0.0, True) for p in bits}

    def downlink(self, bits: Mapping[int, int]) -> dict[int, Transfer]:
        return {p: Transfer(0.0, True) for p in bits}


CHANNELS = {"ideal": lambda seed, **options: IdealChannel()}
"""Channel factories by name: ``CHANNELS[name](seed, **options)`` gives one run's channel."""


def make_channel(name: str, seed: int, **options) -> Channel:
    from frd.errors import FrdError

    if name not in CHANNELS:
        raise FrdError(f"unknown channel {name!r}; choose one of {', '.join(sorted(CHANNELS))}")
    return CHANNELS[name](seed, **options)

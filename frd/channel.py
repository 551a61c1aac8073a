"""Channel models: how many seconds a transfer of so many bits takes, and whether it arrives.

``ideal`` delivers everything instantly. The wireless model of the Mix2FLD letter [Oh et al. 2020] plugs in through the same
two calls, so both RL and classification rounds can run over it unchanged.

Registered names (``make_channel(name, seed, **options)``):

- ``ideal`` — no options.
- ``wireless`` — ``preset`` (``asymmetric``, the default, or ``symmetric``) plus any
  :class:`WirelessChannel` field as an override, e.g. ``make_channel("wireless", 7, p_up_dbm=15)``.
- ``wireless-asymmetric`` / ``wireless-symmetric`` — the same with the preset in the name, for
  configs that can only carry a name.
"""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field, fields
from functools import partial
from typing import Callable, Mapping, Protocol

import numpy as np

from frd.errors import FrdError
from frd.seeding import Stream, derive_seed


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


BOUNDARY_RTOL = 1e-9
"""Relative float slack so that SNR == θ and bits == capacity count as met despite rounding."""

SLOT_BLOCK = 64
"""Slots drawn per vectorized step; only unfinished transfers draw the next block."""


def dbm_to_watt(dbm: float) -> float:
    return 10.0 ** (dbm / 10.0) / 1e3


@dataclass
class WirelessChannel:
    """Slotted Rayleigh-fading link of the Mix2FLD letter [Oh et al. 2020: its parameters; the equations are our choice].

    Per slot of ``slot_s`` and per device, SNR = P·g·d^−α / (N0·B) with power gain g ~ Exp(1)
    drawn afresh each slot (g = 1 when ``fading`` is off). A slot with SNR ≥ θ carries
    τ·B·log2(1 + SNR) bits, one below θ carries nothing. A transfer lasts the whole slots until
    its bits are through; one needing more than ``t_max_s`` fails (latency = ``t_max_s``).
    Uplink access, for the |D| devices of the transfer that send bits:

    - ``fdma``: they share ``n_channels``·``bandwidth_hz`` by frequency division, B = N_ch·W/|D|,
      for the whole T_max.
    - ``tdma``: they take turns on the N_ch channels of W each inside T_max (dealt round-robin
      over the channels): each gets B = W for a turn of N_ch·T_max/|D| (20 slots of 10 MHz for
      10 devices); a transfer that does not fit its turn fails. A device's latency is the turns
      before it on its channel plus its own airtime.

    ``rate``: ``shannon`` (a slot carries τ·B·log2(1 + SNR)) or ``fixed`` (τ·B·log2(1 + θ), the
    rate the threshold guarantees). Downlink: a broadcast, every receiver gets B = N_ch·W with
    its own fading. Defaults are the letter's asymmetric setting with our fdma/shannon reading.
    """

    n_channels: int = 2
    bandwidth_hz: float = 10e6
    slot_s: float = 1e-3
    p_up_dbm: float = 23.0
    p_dn_dbm: float = 40.0
    distance_m: float = 1000.0
    pathloss_exp: float = 4.0
    n0_dbm_per_hz: float = -174.0
    theta_up: float = 3.0
    theta_dn: float = 3.0
    t_max_s: float = 0.1
    fading: bool = True
    access: str = "fdma"
    rate: str = "shannon"
    seed: int = 0
    name: str = "wireless"
    rng: np.random.Generator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for f in ("n_channels", "bandwidth_hz", "slot_s", "distance_m", "t_max_s"):
            if not getattr(self, f) > 0:
                raise FrdError(f"wireless channel: {f} must be positive, got {getattr(self, f)!r}")
        if not math.isfinite(self.t_max_s):
            raise FrdError("wireless channel: t_max_s must be finite; give the longest transfer to allow")
        for name, value, known in (("access", self.access, ACCESS), ("rate", self.rate, RATES)):
            if value not in known:
                raise FrdError(f"--channel-opt {name} takes {' or '.join(known)}, got {value!r}")
        self.rng = np.random.default_rng(derive_seed(self.seed, Stream.FADING))

    @property
    def max_slots(self) -> int:
        """Whole slots a transfer may use before it counts as failed."""
        return self._slots_in(self.t_max_s)

    def _slots_in(self, seconds: float) -> int:
        return max(1, int(math.floor(seconds / self.slot_s + 1e-9)))

    def tdma_turn_slots(self, senders: int) -> int:
        """Slots of one device's turn under tdma: N_ch·T_max/|D|."""
        return self._slots_in(self.n_channels * self.t_max_s / max(senders, 1))

    def mean_snr(self, power_dbm: float, band_hz: float) -> float:
        """SNR with g = 1: P·d^−α / (N0·B)."""
        noise_w = dbm_to_watt(self.n0_dbm_per_hz) * band_hz
        return dbm_to_watt(power_dbm) * self.distance_m ** (-self.pathloss_exp) / noise_w

    def uplink(self, bits: Mapping[int, int]) -> dict[int, Transfer]:
        senders = [p for p, b in bits.items() if b > 0]
        if self.access == "fdma":
            band = self.n_channels * self.bandwidth_hz / max(len(senders), 1)
            return self._transfers(bits, self.p_up_dbm, band, self.theta_up)
        turn = self.tdma_turn_slots(len(senders))
        own = self._transfers(bits, self.p_up_dbm, self.bandwidth_hz, self.theta_up, max_slots=turn)
        waited = [0.0] * self.n_channels  # airtime already used on each channel
        out = dict(own)
        for k, p in enumerate(senders):
            channel = k % self.n_channels
            airtime = own[p].latency_s
            out[p] = Transfer(waited[channel] + airtime, own[p].delivered)
            waited[channel] += airtime
        return out

    def downlink(self, bits: Mapping[int, int]) -> dict[int, Transfer]:
        return self._transfers(bits, self.p_dn_dbm, self.n_channels * self.bandwidth_hz, self.theta_dn)

    def _transfers(self, bits: Mapping[int, int], power_dbm: float, band_hz: float,
                   theta: float, max_slots: int | None = None) -> dict[int, Transfer]:
        """Slots needed by each transfer (at most ``max_slots``, default T_max's), drawn in blocks
        for all unfinished ones at once."""
        limit = self.max_slots if max_slots is None else max_slots
        parts = [p for p, b in bits.items() if b > 0]
        left = np.array([bits[p] for p in parts], dtype=float)
        slots = np.zeros(len(parts), dtype=np.int64)
        done = np.zeros(len(parts), dtype=bool)
        snr0 = self.mean_snr(power_dbm, band_hz)
        used = 0
        while used < limit and not done.all():
            todo = np.flatnonzero(~done)
            n = min(SLOT_BLOCK, limit - used)
            g = self.rng.exponential(size=(todo.size, n)) if self.fading else np.ones((todo.size, n))
            snr = snr0 * g
            capacity = self.slot_s * band_hz * np.log2(1.0 + (snr if self.rate == "shannon" else theta))
            carried = np.where(snr >= theta * (1 - BOUNDARY_RTOL), capacity, 0.0).cumsum(axis=1)
            through = carried >= left[todo, None] * (1 - BOUNDARY_RTOL)
            finished = through.any(axis=1)
            slots[todo[finished]] = used + through[finished].argmax(axis=1) + 1
            done[todo[finished]] = True
            left[todo] -= carried[:, -1]
            used += n
        sent = {p: Transfer(float(slots[k] * self.slot_s), True) if done[k] else Transfer(limit * self.slot_s, False)
                for k, p in enumerate(parts)}
        return {p: sent.get(p, Transfer(0.0, True)) for p in bits}


ACCESS = ("fdma", "tdma")
"""Uplink access readings of the letter's channel (its equations were not retrievable)."""
RATES = ("shannon", "fixed")
"""Bits a slot above the SNR threshold carries: at the slot's SNR, or at the threshold's."""

WIRELESS_PRESETS: dict[str, dict[str, float]] = {
    "asymmetric": {},
    "symmetric": {"p_up_dbm": 40.0, "p_dn_dbm": 40.0},
}
"""Named settings of the letter: asymmetric (P_up 23 dBm, P_dn 40 dBm) and symmetric (both 40 dBm)."""


def make_wireless(seed: int, preset: str = "asymmetric", **overrides) -> WirelessChannel:
    """A wireless channel from a preset, with any field overridden (``p_up_dbm=15``, ``fading=False``)."""
    if preset not in WIRELESS_PRESETS:
        raise FrdError(f"unknown wireless preset {preset!r}; "
                       f"choose one of {', '.join(sorted(WIRELESS_PRESETS))}")
    allowed = {f.name for f in fields(WirelessChannel) if f.init and f.name not in ("seed", "name")}
    unknown = sorted(set(overrides) - allowed)
    if unknown:
        raise FrdError(f"unknown wireless channel option(s) {', '.join(unknown)}; "
                       f"valid options: preset, {', '.join(sorted(allowed))}")
    for name, value in overrides.items():
        _check_option_value(name, value)
    return WirelessChannel(**{**WIRELESS_PRESETS[preset], **overrides}, seed=seed, name=f"wireless-{preset}")


def _check_option_value(name: str, value: object) -> None:
    """A wireless option's value has the field's type: a flag for ``fading``, a finite number
    (a whole one for ``n_channels``) for the rest."""
    if name == "fading":
        if not isinstance(value, bool):
            raise FrdError(f"--channel-opt fading takes true or false, got {value!r}")
        return
    if name in ("access", "rate"):
        return  # words, checked by the channel itself
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise FrdError(f"--channel-opt {name} takes a finite number, got {value!r}")
    if name == "n_channels" and value != int(value):
        raise FrdError(f"--channel-opt n_channels takes a whole number, got {value!r}")


def _ideal(seed: int, **options: object) -> IdealChannel:
    if options:
        raise FrdError(f"the ideal channel has no options (got {', '.join(sorted(options))}); "
                       "choose --channel wireless to set them")
    return IdealChannel()


CHANNELS: dict[str, Callable[..., Channel]] = {
    "ideal": _ideal,
    "wireless": make_wireless,
    **{f"wireless-{p}": partial(make_wireless, preset=p) for p in WIRELESS_PRESETS},
}
"""Channel factories by name: ``CHANNELS[name](seed, **options)`` gives one run's channel."""


def make_channel(name: str, seed: int, **options) -> Channel:
    if name not in CHANNELS:
        raise FrdError(f"unknown channel {name!r}; choose one of {', '.join(sorted(CHANNELS))}")
    return CHANNELS[name](seed, **options)


def check_channel(name: str, options: Mapping[str, object]) -> None:
    """Build the channel once, so a bad name or option fails before anything is written."""
    make_channel(name, 0, **options)


def parse_channel_option(text: str) -> tuple[str, float | bool | str]:
    """``p_up_dbm=15`` → a number, ``fading=false`` → a flag, ``preset=symmetric`` → a word."""
    name, sep, value = text.partition("=")
    if not (name and sep and value):
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    if value.lower() in ("true", "false"):
        return name, value.lower() == "true"
    try:
        return name, float(value)
    except ValueError:
        return name, value  # a word (preset=symmetric); each channel checks its options' types

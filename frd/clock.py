"""The virtual clock: how long a participant's work and transfers take on a device, not on this machine.

``seconds`` measured here say how fast the simulator is; a device's time is its work in floating-point
operations at its rate, plus the channel's latency of each of its transfers (``frd.channel``). Both
domains count their work in FLOPs (``frd.rl.flops``, ``frd.classification.flops``) and hand each
round's start times to ``frd.exchange.run_round``, which closes the round by the round policy and
says when each participant resumes (``RoundTiming`` → ``RoundTimes``).

Devices (``Devices``): each participant's rate is ``device_flops`` × exp(σ z), z ~ N(0, 1) from its
own stream (``Stream.DEVICES``, keyed by participant), so the median device runs at the default
[our choice: lognormal, as FLGo's and FedScale's heterogeneous rates are heavy-tailed]; each round a
participant is online with probability ``availability`` (``Stream.AVAILABILITY``, keyed by round).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from frd.errors import FrdError
from frd.seeding import Stream, derive_seed

DEVICE_FLOPS = 1e9
"""A device's default rate, FLOP/s [our choice: a Raspberry Pi 4 sustains 0.81 GFLOP/s on Linpack from
Python (sci-pi.org.uk/bench/linpack.html) and about 8 on HPL over its 4 cores (Feiereisen 2022); small
models run far below peak, as ours do here at ~10 % (benchmarks/reports/cls-flops.md)]."""
SERVER_FLOPS = 1e11
"""The server's rate, FLOP/s [our choice: an edge server's CPU, 100× a device]."""

CLOCK_DEFAULTS: dict[str, float | str] = {"speed_spread": 0.0, "availability": 1.0, "round_policy": "sync",
                                           "device_flops": DEVICE_FLOPS, "server_flops": SERVER_FLOPS}
"""The clock's settings at their defaults, as config fields: in a resume key only when set otherwise."""

POLICIES = ("sync", "deadline:<s>")
"""The round policies, as written on the command line."""


@dataclass(frozen=True)
class RoundPolicy:
    """How a round closes: ``sync`` when the last upload is in; ``deadline`` at ``deadline_s`` after it
    opened, leaving later uploads out of the aggregate (marked late in the ledger)."""

    name: str
    deadline_s: float | None = None

    def __str__(self) -> str:
        return self.name if self.deadline_s is None else f"{self.name}:{self.deadline_s:g}"


def parse_policy(text: str) -> RoundPolicy:
    """``sync`` or ``deadline:<s>`` (s > 0), else one line naming the forms."""
    name, colon, rest = text.partition(":")
    if name == "sync" and not colon:
        return RoundPolicy("sync")
    if name == "deadline" and colon:
        try:
            seconds = float(rest)
        except ValueError:
            raise FrdError(f"deadline takes seconds, as deadline:2.5, got {text!r}") from None
        if not (seconds > 0 and math.isfinite(seconds)):
            raise FrdError(f"a round's deadline must be positive seconds, got {text!r}")
        return RoundPolicy("deadline", seconds)
    raise FrdError(f"unknown round policy {text!r}; choose {' or '.join(POLICIES)}")


@dataclass(frozen=True)
class ClockSettings:
    """The device model and round policy of a run (flags ``--speed-spread``, ``--availability``,
    ``--round-policy``, ``--device-flops``, ``--server-flops``)."""

    speed_spread: float = 0.0
    availability: float = 1.0
    round_policy: str = "sync"
    device_flops: float = DEVICE_FLOPS
    server_flops: float = SERVER_FLOPS

    @property
    def is_default(self) -> bool:
        return self == ClockSettings()

    def validate(self) -> None:
        """Each setting in its range, one line each (before anything is written)."""
        if not (self.speed_spread >= 0 and math.isfinite(self.speed_spread)):
            raise FrdError(f"--speed-spread is a lognormal sigma >= 0, got {self.speed_spread:g}")
        if not 0 < self.availability <= 1:
            raise FrdError(f"--availability is a probability in (0, 1], got {self.availability:g}")
        for flag, value in (("--device-flops", self.device_flops), ("--server-flops", self.server_flops)):
            if not (value > 0 and math.isfinite(value)):
                raise FrdError(f"{flag} must be a positive rate in FLOP/s, got {value:g}")
        parse_policy(self.round_policy)

    @property
    def policy(self) -> RoundPolicy:
        return parse_policy(self.round_policy)


class Devices:
    """One run's devices: each participant's rate and, per round, whether it is online."""

    def __init__(self, settings: ClockSettings, seed: int, participants: int) -> None:
        self.settings = settings
        self.seed = seed
        sigma = settings.speed_spread
        self.rates = np.array([settings.device_flops * (math.exp(sigma * np.random.default_rng(
            derive_seed(seed, Stream.DEVICES, p)).standard_normal()) if sigma > 0 else 1.0)
            for p in range(participants)])

    def seconds(self, participant: int, flops: float) -> float:
        """How long ``flops`` of work take on ``participant``'s device."""
        return float(flops / self.rates[participant])

    def server_seconds(self, flops: float) -> float:
        return float(flops / self.settings.server_flops)

    def online(self, round_: int, participants: list[int]) -> list[int]:
        """Those of ``participants`` online for round ``round_`` (every one at availability 1: no draw)."""
        if self.settings.availability >= 1:
            return list(participants)
        draws = np.random.default_rng(derive_seed(self.seed, Stream.AVAILABILITY, round_)).random(len(self.rates))
        return [p for p in participants if draws[p] < self.settings.availability]


@dataclass(frozen=True)
class RoundTiming:
    """A round on the virtual clock, as ``run_round`` needs it: when it opened, when each participant's
    upload leaves (its work done), and how the server's work is timed."""

    opened: float
    ready: Mapping[int, float]
    devices: Devices

    @property
    def policy(self) -> RoundPolicy:
        return self.devices.settings.policy


@dataclass(frozen=True)
class RoundTimes:
    """What the clock says of a round: when it closed (aggregation starts), when it ended (the last
    download in), each transfer's arrival, who was late, and when each receiver resumes."""

    closed: float
    ended: float
    arrived_up: Mapping[int, float]
    arrived_down: Mapping[int, float]
    late: frozenset[int]
    resume: Mapping[int, float]


def close_round(timing: RoundTiming, up_latency: Mapping[int, float],
                delivered: Mapping[int, bool]) -> tuple[float, frozenset[int]]:
    """When the round closes and whose uploads are late. ``sync``: at the last delivered arrival (the
    opening if none); ``deadline``: uploads arriving after opened + deadline are late, and the round
    closes at the deadline if any upload is late or lost, else at the last arrival [our reading: the
    server cannot know sooner that one will not come]."""
    arrival = {p: timing.ready[p] + up_latency[p] for p in up_latency}
    policy = timing.policy
    if policy.deadline_s is None:
        return max((arrival[p] for p in arrival if delivered[p]), default=timing.opened), frozenset()
    due = timing.opened + policy.deadline_s
    late = frozenset(p for p in arrival if delivered[p] and arrival[p] > due)
    on_time = [arrival[p] for p in arrival if delivered[p] and p not in late]
    if late or len(on_time) < len(arrival):
        return due, late
    return max(on_time, default=timing.opened), late


def round_times(timing: RoundTiming, up_latency: Mapping[int, float], delivered_up: Mapping[int, bool],
                server_flops: float, down_latency: Mapping[int, float], delivered_down: Mapping[int, bool]) -> RoundTimes:
    """The round's timeline: downloads leave once the server's work is done after the close; the round
    ends when the last delivered download is in, and every receiver resumes then (or once its own late
    upload is through) [our reading of the round's comm_s, the slowest upload plus the slowest download:
    under sync a round ends for all at once]."""
    closed, late = close_round(timing, up_latency, delivered_up)
    sent = closed + timing.devices.server_seconds(server_flops)
    arrived_down = {p: sent + t for p, t in down_latency.items()}
    ended = max((arrived_down[p] for p in arrived_down if delivered_down[p]), default=sent)
    arrived_up = {p: timing.ready[p] + t for p, t in up_latency.items()}
    resume = {p: max(ended, arrived_up.get(p, ended)) for p in down_latency}
    return RoundTimes(closed, ended, arrived_up, arrived_down, late, resume)


class VirtualClock:
    """A run's time on the virtual clock, as its round loop keeps it: when each participant is next free
    to work, when the latest round ended (``now``: the next one opens then), and when the work of the
    round at hand is done. ``counting`` false (a method whose work is not counted): every time is NaN."""

    def __init__(self, devices: Devices, participants: int, counting: bool = True) -> None:
        self.devices = devices
        self.free = np.zeros(participants)
        self.now = 0.0 if counting else math.nan
        self.counting = counting
        self.ready: dict[int, float] = {}

    def trained(self, participants: list[int], flops: float) -> float:
        """Each of ``participants`` works ``flops`` from when it is free, or from the round's opening;
        returns when the last of them is done (the opening if none works)."""
        if not self.counting:
            return math.nan
        self.ready = {p: max(float(self.free[p]), self.now) + self.devices.seconds(p, flops) for p in participants}
        return max(self.ready.values(), default=self.now)

    def timing(self, participants: list[int]) -> RoundTiming | None:
        """The round of ``participants`` on the clock (those that did no work upload once free)."""
        if not self.counting:
            return None
        ready = {p: self.ready.get(p, max(float(self.free[p]), self.now)) for p in participants}
        return RoundTiming(self.now, ready, self.devices)

    def advance(self, times: RoundTimes | None) -> None:
        """After the round: each receiver is free once it resumes, each other sender once its upload is
        through; the next round opens when this one ended."""
        if times is None:
            return
        for p, t in times.arrived_up.items():
            self.free[p] = max(float(self.free[p]), t)
        for p, t in times.resume.items():
            self.free[p] = t
        self.now = times.ended
        self.ready = {}

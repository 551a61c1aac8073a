"""The virtual clock (``frd.clock``): a hand-computed timeline of 3 participants under each policy, the
device model's draws, and the settings' refusals."""
from __future__ import annotations

import math

import numpy as np
import pytest

from frd.channel import Transfer
from frd.clock import ClockSettings, Devices, RoundTiming, VirtualClock, parse_policy
from frd.errors import FrdError
from frd.exchange import broadcast, run_round
from frd.ledger import Ledger
from frd.payload import Payload

UP = {0: 0.2, 1: 0.3, 2: 0.1}
DOWN = {0: 0.05, 1: 0.1, 2: 0.2}


class FixedChannel:
    """Latencies given by hand, every transfer delivered."""

    def uplink(self, bits):
        return {p: Transfer(UP[p], True) for p in bits}

    def downlink(self, bits):
        return {p: Transfer(DOWN[p], True) for p in bits}


class Mean:
    """Each participant uploads 4 values equal to its id; the server broadcasts their mean."""

    def __init__(self) -> None:
        self.received: dict[int, float] = {}
        self.aggregated: list[int] = []

    def upload(self, p):
        return Payload.of("w", 1, w=(np.full(4, float(p)), 32))

    def aggregate(self, uploads, participants):
        self.aggregated = sorted(uploads)
        return broadcast(Payload.of("w", 1, w=(np.mean([u["w"] for u in uploads.values()], axis=0), 32)), participants)

    def download(self, p, payload):
        self.received[p] = float(payload["w"][0])

    def finish_round(self):
        pass


def three_devices(policy: str) -> tuple[Devices, VirtualClock]:
    """Rates 1, 2 and 0.5 GFLOP/s; a server of 12 FLOP/s, so that 12 received values take 1 s."""
    devices = Devices(ClockSettings(round_policy=policy, server_flops=12.0), seed=0, participants=3)
    devices.rates = np.array([1e9, 2e9, 0.5e9])
    clock = VirtualClock(devices, 3)
    clock.now = 10.0
    return devices, clock


def one_round(policy: str):
    devices, clock = three_devices(policy)
    assert clock.trained([0, 1, 2], 1e9) == 12.0  # ready at 11, 10.5 and 12
    ledger, mean = Ledger(), Mean()
    report = run_round(mean, [0, 1, 2], run_id="r", round_=1, ledger=ledger, channel=FixedChannel(),
                       timing=clock.timing([0, 1, 2]))
    clock.advance(report.times)
    return report, ledger.frame(), mean, clock


def test_sync_closes_at_the_last_arrival_and_everyone_resumes_when_the_last_download_is_in():
    report, ledger, mean, clock = one_round("sync")
    times = report.times
    # uploads arrive at 11 + 0.2, 10.5 + 0.3, 12 + 0.1; 12 values at 12 FLOP/s take 1 s
    assert times.arrived_up == pytest.approx({0: 11.2, 1: 10.8, 2: 12.1})
    assert times.closed == pytest.approx(12.1)
    assert times.arrived_down == pytest.approx({0: 13.15, 1: 13.2, 2: 13.3})
    assert times.ended == pytest.approx(13.3) and clock.now == pytest.approx(13.3)
    assert list(clock.free) == pytest.approx([13.3, 13.3, 13.3])
    assert mean.aggregated == [0, 1, 2] and not ledger["late"].any()
    assert list(ledger["sim_s"]) == pytest.approx([11.2, 10.8, 12.1, 13.15, 13.2, 13.3])


def test_deadline_leaves_out_exactly_the_late_uploads_and_the_late_resume_after_their_own_upload():
    report, ledger, mean, clock = one_round("deadline:1")
    times = report.times
    # due at 10 + 1 = 11: only device 1 (10.8) is on time; the server waits to 11, works 4/12 s
    assert times.late == {0, 2} and mean.aggregated == [1]
    assert times.closed == pytest.approx(11.0)
    sent = 11.0 + 4 / 12
    assert times.arrived_down == pytest.approx({0: sent + 0.05, 1: sent + 0.1, 2: sent + 0.2})
    assert times.ended == pytest.approx(sent + 0.2)
    # device 2's upload is through at 12.1, after the round ended: it resumes then
    assert list(clock.free) == pytest.approx([sent + 0.2, sent + 0.2, 12.1])
    up = ledger[ledger["direction"] == "up"]
    assert list(up["late"]) == [True, False, True] and up["delivered"].all()
    assert mean.received == {0: 1.0, 1: 1.0, 2: 1.0}  # the mean of device 1's alone, sent to every one


def test_a_deadline_every_upload_meets_is_sync():
    sync, deadline = one_round("sync"), one_round("deadline:5")
    assert sync[0].times == deadline[0].times
    assert sync[1].equals(deadline[1])


def test_without_a_clock_the_ledger_has_no_virtual_times():
    ledger = Ledger()
    run_round(Mean(), [0, 1], run_id="r", round_=1, ledger=ledger, channel=FixedChannel())
    frame = ledger.frame()
    assert frame["sim_s"].isna().all() and not frame["late"].any()


def test_device_rates_are_lognormal_around_the_default_each_from_its_own_stream():
    homogeneous = Devices(ClockSettings(), seed=3, participants=4)
    assert list(homogeneous.rates) == [1e9] * 4
    spread = Devices(ClockSettings(speed_spread=0.5), seed=3, participants=4)
    fewer = Devices(ClockSettings(speed_spread=0.5), seed=3, participants=2)
    assert list(fewer.rates) == list(spread.rates[:2])  # a device's rate depends on it alone
    z = np.log(spread.rates / 1e9) / 0.5
    many = Devices(ClockSettings(speed_spread=1.0), seed=0, participants=4000)
    assert abs(np.median(np.log(many.rates / 1e9))) < 0.05 and abs(np.std(np.log(many.rates / 1e9)) - 1) < 0.05
    assert len(set(z.round(12))) == 4
    assert homogeneous.seconds(0, 2e9) == 2.0


def test_availability_draws_per_round_and_keeps_everyone_at_one():
    every = Devices(ClockSettings(), seed=1, participants=10)
    assert every.online(5, list(range(10))) == list(range(10))
    some = Devices(ClockSettings(availability=0.5), seed=1, participants=10)
    rounds = [some.online(r, list(range(10))) for r in range(1, 200)]
    share = sum(map(len, rounds)) / (10 * len(rounds))
    assert 0.45 < share < 0.55
    assert some.online(3, [2, 5, 7]) == [d for d in some.online(3, list(range(10))) if d in (2, 5, 7)]


def test_a_method_whose_work_is_not_counted_has_nan_times():
    clock = VirtualClock(Devices(ClockSettings(), 0, 2), 2, counting=False)
    assert math.isnan(clock.trained([0, 1], 1e9)) and clock.timing([0, 1]) is None and math.isnan(clock.now)


@pytest.mark.parametrize(("settings", "match"), [
    (ClockSettings(speed_spread=-0.1), "--speed-spread"),
    (ClockSettings(availability=0.0), "--availability"),
    (ClockSettings(availability=1.5), "--availability"),
    (ClockSettings(device_flops=0.0), "--device-flops"),
    (ClockSettings(round_policy="deadline:0"), "positive"),
    (ClockSettings(round_policy="deadline:-2"), "positive"),
    (ClockSettings(round_policy="deadline:soon"), "takes seconds"),
    (ClockSettings(round_policy="eventually"), "unknown round policy"),
])
def test_bad_settings_are_one_line(settings, match):
    with pytest.raises(FrdError, match=match):
        settings.validate()


def test_policies_read_back_as_written():
    assert str(parse_policy("sync")) == "sync" and str(parse_policy("deadline:2.5")) == "deadline:2.5"
    assert RoundTiming(0.0, {}, Devices(ClockSettings(round_policy="deadline:2"), 0, 1)).policy.deadline_s == 2.0

"""Wireless channel of the Mix2FLD letter [Oh et al. 2020] against hand-computed slot counts, and its use by run_round."""
from __future__ import annotations

import math

import numpy as np
import pytest

from frd.channel import WirelessChannel, make_channel
from frd.errors import FrdError
from frd.exchange import run_round
from frd.ledger import Ledger
from frd.payload import Payload

N0_W_PER_HZ = 10 ** (-174 / 10) / 1e3
PATHLOSS = 1000.0 ** -4
FL_BITS = 12_544 * 32


def snr_by_hand(p_dbm: float, band_hz: float) -> float:
    return 10 ** (p_dbm / 10) / 1e3 * PATHLOSS / (N0_W_PER_HZ * band_hz)


def dbm_for_snr(snr: float, band_hz: float) -> float:
    return 10 * math.log10(snr * N0_W_PER_HZ * band_hz / PATHLOSS * 1e3)


def test_fixed_snr_slot_count_is_ceiling_of_bits_over_slot_capacity():
    ch = WirelessChannel(fading=False)
    band = 2 * 10e6 / 10
    snr = snr_by_hand(23.0, band)
    assert snr >= 3
    expected = math.ceil(FL_BITS / (1e-3 * band * math.log2(1 + snr)))
    out = ch.uplink({d: FL_BITS for d in range(10)})
    assert expected == 43
    assert all(t.delivered and t.latency_s == pytest.approx(expected * 1e-3) for t in out.values())


def test_snr_exactly_theta_gives_spec_special_case():
    """Two senders share N_ch·W, so B = W; the power is set so SNR == θ = 3."""
    w = 10e6
    ch = WirelessChannel(fading=False, p_up_dbm=dbm_for_snr(3.0, w))
    per_slot = 1e-3 * w * math.log2(1 + 3)
    for bits in (50_000, 40_000, 1):
        out = ch.uplink({0: bits, 1: bits})
        assert out[0].delivered and out[0].latency_s == pytest.approx(math.ceil(bits / per_slot) * 1e-3)
    assert ch.uplink({0: 50_000, 1: 1})[0].latency_s == pytest.approx(0.003)


def test_snr_below_theta_carries_nothing():
    w = 10e6
    ch = WirelessChannel(fading=False, p_up_dbm=dbm_for_snr(3.0, w) - 0.01)
    out = ch.uplink({0: 1, 1: 1})
    assert all(not t.delivered and t.latency_s == pytest.approx(0.1) for t in out.values())


def test_transfer_longer_than_t_max_fails_and_exactly_t_max_succeeds():
    ch = WirelessChannel(fading=False)
    band = 20e6
    per_slot = 1e-3 * band * math.log2(1 + snr_by_hand(40.0, band))
    fits = ch.downlink({0: math.floor(100 * per_slot)})[0]
    assert fits.delivered and fits.latency_s == pytest.approx(0.1)
    over = ch.downlink({0: math.floor(100 * per_slot) + 1})[0]
    assert not over.delivered and over.latency_s == pytest.approx(0.1)


def test_zero_bit_participants_take_no_time_and_no_band():
    ch = WirelessChannel(fading=False)
    alone = ch.uplink({0: FL_BITS})[0].latency_s
    out = ch.uplink({0: FL_BITS, 1: 0, 2: 0})
    assert out[1].latency_s == 0.0 and out[1].delivered
    assert out[0].latency_s == alone
    assert list(out) == [0, 1, 2]


def test_same_seed_same_latencies_other_seed_differs():
    def draws(seed: int) -> list[float]:
        ch = make_channel("wireless", seed)
        return [t.latency_s for _ in range(3) for t in ch.uplink({d: FL_BITS for d in range(10)}).values()]

    assert draws(5) == draws(5)
    assert draws(5) != draws(6)


def mean_fl_upload_slots(channel: WirelessChannel, rounds: int = 40) -> float:
    ups = [channel.uplink({d: FL_BITS for d in range(10)}) for _ in range(rounds)]
    lat = [t.latency_s for r in ups for t in r.values()]
    return float(np.mean(lat)) / 1e-3


def test_spec_figures_fl_upload_asymmetric_vs_symmetric():
    assert 50 < mean_fl_upload_slots(make_channel("wireless", 0)) < 54
    assert 20 < mean_fl_upload_slots(make_channel("wireless", 0, preset="symmetric")) < 24


def test_fl_uploads_fail_below_18_dbm_and_not_at_20():
    def failed(p_dbm: float) -> float:
        ch = make_channel("wireless", 1, p_up_dbm=p_dbm)
        rounds = [ch.uplink({d: FL_BITS for d in range(10)}) for _ in range(40)]
        return np.mean([not t.delivered for r in rounds for t in r.values()])

    assert failed(20.0) == 0.0
    assert failed(17.0) > 0.3


def test_presets_names_and_bad_options():
    assert make_channel("wireless-symmetric", 0).p_up_dbm == 40.0
    assert make_channel("wireless", 0).p_up_dbm == 23.0
    assert make_channel("wireless", 0, preset="symmetric", p_dn_dbm=30).p_dn_dbm == 30
    with pytest.raises(FrdError, match="preset"):
        make_channel("wireless", 0, preset="lopsided")
    with pytest.raises(FrdError, match="p_up_dbm"):
        make_channel("wireless", 0, p_upp_dbm=15)


class FakeExchange:
    """Each participant uploads a vector; the server averages what arrived; everyone downloads it."""

    def __init__(self, sizes: dict[int, int]):
        self.sizes = sizes
        self.got: dict[int, float] = {}

    def upload(self, p: int) -> Payload:
        return Payload.of("weights", 1, w=(np.full(self.sizes[p], float(p + 1), dtype=np.float32), 32))

    def aggregate(self, uploads, participants):
        mean = float(np.mean([u["w"].mean() for u in uploads.values()]))
        return {p: Payload.of("weights", 1, w=(np.array([mean], dtype=np.float32), 32)) for p in participants}

    def finish_round(self) -> None:
        """Everything was applied on download."""

    def download(self, p: int, payload: Payload) -> None:
        self.got[p] = float(payload["w"][0])


def test_run_round_leaves_failed_upload_out_and_ledger_marks_it():
    ex = FakeExchange({0: 10, 1: 10, 2: 100_000})
    ledger = Ledger()
    rep = run_round(ex, [0, 1, 2], run_id="r", round_=0, ledger=ledger,
                    channel=WirelessChannel(fading=False))
    assert rep.delivered_up == (0, 1)
    assert ex.got == {0: 1.5, 1: 1.5, 2: 1.5}
    up = ledger.frame().query("direction == 'up'").set_index("participant")
    assert up["delivered"].tolist() == [True, True, False]
    assert up.loc[2, "latency_s"] == pytest.approx(0.1)
    assert rep.comm_s == pytest.approx(0.001 + 0.001)


def test_tdma_turns_by_hand_with_a_deterministic_gain():
    """10 devices take turns on 2 channels of 10 MHz inside 100 ms: 20 slots each. With g = 1 at
    23 dBm, SNR = P·d^−4/(N0·W) ≈ 5.01, so a slot carries τ·W·log2(1 + SNR) ≈ 25,874 bits and FL's
    403,200 bits need 16 slots; the k-th device on a channel waits for the turns before it."""
    ch = make_channel("wireless", 0, access="tdma", fading=False)
    assert ch.tdma_turn_slots(10) == 20
    snr = 10 ** (23 / 10) / 1e3 * 1000.0 ** -4 / (10 ** (-174 / 10) / 1e3 * 10e6)
    per_slot = 1e-3 * 10e6 * np.log2(1 + snr)
    slots = int(np.ceil(403_200 / per_slot))
    assert abs(snr - 5.01) < 0.01 and slots == 16
    up = ch.uplink({d: 403_200 for d in range(10)})
    for d in range(10):
        assert up[d].delivered and up[d].latency_s == pytest.approx((d // 2 + 1) * slots * 1e-3)
    too_big = ch.uplink({d: int(21 * per_slot) for d in range(10)})
    assert not any(t.delivered for t in too_big.values()), "21 slots do not fit a 20-slot turn"
    fixed = make_channel("wireless", 0, access="tdma", rate="fixed", fading=False)
    # the fixed rate is the threshold's: τ·W·log2(1 + 3) = 20,000 bits a slot, so FL needs 21 > 20 slots
    assert not fixed.uplink({d: 403_200 for d in range(10)})[0].delivered
    assert fixed.uplink({d: 400_000 for d in range(10)})[0].delivered


def test_unknown_access_or_rate_is_refused():
    with pytest.raises(FrdError, match="--channel-opt access takes fdma or tdma, got 'cdma'"):
        make_channel("wireless", 0, access="cdma")
    with pytest.raises(FrdError, match="--channel-opt rate takes shannon or fixed"):
        make_channel("wireless", 0, rate="best")

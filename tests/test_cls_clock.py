"""The virtual clock in classification: an SGD iteration's FLOPs by hand, the round timeline of a run,
deadlines and availability over real runs, and the refusals."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from frd.classification.flops import sgd_iteration_flops
from frd.classification.methods import cls_config
from frd.classification.models import build_model
from frd.classification.runner import run_seed
from frd.clock import Devices
from frd.errors import FrdError

TINY = dict(rounds=3, iterations_per_round=2, devices=6, samples_per_device=20)


def test_an_mlp_iteration_is_its_products_forward_and_backward_plus_the_update():
    model = build_model("mlp", "digits", (1, 8, 8), 10)  # 64 → 64 → 10
    batch, macs = 32, 64 * 64 + 64 * 10
    forward = 2 * batch * macs
    weight_grads = 2 * batch * macs
    input_grad = 2 * batch * 64 * 10  # the first layer's input needs none
    update = 2 * (64 * 64 + 64 + 64 * 10 + 10)
    assert sgd_iteration_flops(model, (1, 8, 8), batch) == forward + weight_grads + input_grad + update


def test_a_round_ends_when_the_server_has_averaged_every_device_at_the_defaults(digits):
    config = cls_config("fl", **TINY)
    tables = run_seed(config, 0, digits)
    work = TINY["iterations_per_round"] * sgd_iteration_flops(build_model("mlp", "digits", (1, 8, 8), 10), (1, 8, 8),
                                                             config.batch_size)
    local, server = work / config.device_flops, TINY["devices"] * 4810 / config.server_flops
    rounds = tables["rounds"].drop_duplicates(["round", "phase"]).set_index(["round", "phase"])["sim_s"]
    for r in range(1, TINY["rounds"] + 1):
        assert rounds[(r, "local")] == pytest.approx(r * local + (r - 1) * server)
        assert rounds[(r, "exchanged")] == pytest.approx(r * (local + server))
    assert tables["runs"]["sim_s"].item() == pytest.approx(TINY["rounds"] * (local + server))
    up = tables["ledger"][tables["ledger"]["direction"] == "up"]
    assert not up["late"].any() and (up.groupby("round")["sim_s"].nunique() == 1).all()


def test_a_deadline_leaves_out_the_slow_devices_uploads(digits):
    base = cls_config("fl", **TINY, speed_spread=1.0)
    rates = Devices(base.clock(), 0, TINY["devices"]).rates
    local = run_seed(base, 0, digits)["rounds"].query("round == 1 and phase == 'local'")["sim_s"].iloc[0]
    fastest = local * rates.min() / rates.max()  # the fastest device's training time in round 1
    deadline = (fastest + local) / 2
    config = cls_config("fl", **TINY, speed_spread=1.0, round_policy=f"deadline:{deadline}")
    tables = run_seed(config, 0, digits)
    first = tables["ledger"].query("round == 1 and direction == 'up'").set_index("participant")
    expected = {d for d in range(TINY["devices"]) if local * rates.min() / rates[d] > deadline}
    assert set(first.index[first["late"]]) == expected and 0 < len(expected) < TINY["devices"]
    assert tables["rounds"].query("round == 1 and phase == 'exchanged'")["sim_s"].iloc[0] == pytest.approx(
        deadline + (TINY["devices"] - len(expected)) * 4810 / config.server_flops)


def test_offline_devices_sit_the_round_out(digits):
    config = cls_config("fl", **TINY, availability=0.5)
    devices = Devices(config.clock(), 0, TINY["devices"])
    ledger = run_seed(config, 0, digits)["ledger"]
    for r in range(1, TINY["rounds"] + 1):
        up = ledger.query(f"round == {r} and direction == 'up'")["participant"].tolist()
        assert up == devices.online(r, list(range(TINY["devices"])))


def test_the_defaults_leave_every_other_column_as_it_was(digits):
    named = run_seed(cls_config("fd", **TINY, round_policy="sync", speed_spread=0.0, availability=1.0), 0, digits)
    default = run_seed(cls_config("fd", **TINY), 0, digits)
    spread = run_seed(cls_config("fd", **TINY, speed_spread=0.7), 0, digits)
    for table in ("ledger", "rounds"):
        drop = ["compute_s"] if table == "rounds" else []
        pd.testing.assert_frame_equal(named[table].drop(columns=drop), default[table].drop(columns=drop))
        # unequal devices under sync: the same learning, other times
        pd.testing.assert_frame_equal(spread[table].drop(columns=[*drop, "sim_s"]),
                                      default[table].drop(columns=[*drop, "sim_s"]))
    assert not np.allclose(spread["rounds"]["sim_s"], default["rounds"]["sim_s"])


@pytest.mark.parametrize(("values", "match"), [
    (dict(method="feddualmatch", speed_spread=0.5), "not yet counted in FLOPs"),
    (dict(method="fl", availability=0.0), "--availability"),
    (dict(method="fl", round_policy="deadline:0"), "positive"),
    (dict(method="fl", speed_spread=-1.0), "--speed-spread"),
])
def test_refusals(values, match):
    with pytest.raises(FrdError, match=match):
        cls_config(values.pop("method"), **values)

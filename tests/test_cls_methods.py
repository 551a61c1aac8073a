"""FL and FD on hand examples, payload bits in the ledger, and reproducible runs."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from frd.classification.context import RunContext
from frd.classification.methods import CLS_METHODS, GLOBAL, cls_config
from frd.classification.methods.fd import FederatedDistillation, leave_one_out_teachers
from frd.classification.methods.fl import FedAvg
from frd.classification.runner import run_seed
from frd.errors import FrdError
from frd.payload import PIXEL_BITS, Payload, index_bits

TINY = dict(rounds=2, iterations_per_round=3, devices=3)



def test_fedavg_is_the_sample_weighted_mean(digits):
    ctx = RunContext.build(cls_config(partition="dirichlet", alpha=0.3, **TINY), 0, digits)
    counts = ctx.sample_counts
    assert len(set(counts.tolist())) == 3, "unequal devices, so weighting matters"
    fl = FedAvg(ctx)
    size = ctx.devices.flat(0).size
    for d in range(3):
        ctx.devices.load_flat(d, np.full(size, float(d + 1)))
    downloads = fl.aggregate({d: fl.upload(d) for d in range(3)}, [0, 1, 2])
    expected = (counts[0] * 1 + counts[1] * 2 + counts[2] * 3) / counts.sum()
    np.testing.assert_allclose(downloads[2]["weights"], expected, rtol=1e-6)
    assert expected != pytest.approx(2.0), "differs from the unweighted mean"
    np.testing.assert_allclose(torch.nn.utils.parameters_to_vector(fl.global_model().parameters()).detach(),
                               expected, rtol=1e-6)
    fl.download(0, downloads[0])
    np.testing.assert_allclose(ctx.devices.flat(0), expected, rtol=1e-6)


def test_fedavg_leaves_out_an_upload_that_did_not_arrive(digits):
    ctx = RunContext.build(cls_config(**TINY), 0, digits)
    fl = FedAvg(ctx)
    size = ctx.devices.flat(0).size
    for d in range(3):
        ctx.devices.load_flat(d, np.full(size, 10.0 * d))
    downloads = fl.aggregate({0: fl.upload(0), 2: fl.upload(2)}, [0, 1, 2])
    assert set(downloads) == {0, 1, 2}
    np.testing.assert_allclose(downloads[1]["weights"], 10.0)  # equal counts: (0 + 20) / 2


def test_fd_teacher_is_the_mean_of_the_other_devices_on_a_hand_example():
    nan = np.nan
    outputs = {
        0: np.array([[0.8, 0.2], [0.4, 0.6]]),
        1: np.array([[0.6, 0.4], [0.2, 0.8]]),
        2: np.array([[1.0, 0.0], [nan, nan]]),  # device 2 saw no sample of label 1
    }
    t = leave_one_out_teachers(outputs, [0, 1, 2, 3])  # device 3's upload was lost
    np.testing.assert_allclose(t[0], [[0.8, 0.2], [0.2, 0.8]])
    np.testing.assert_allclose(t[1], [[0.9, 0.1], [0.4, 0.6]])
    np.testing.assert_allclose(t[2], [[0.7, 0.3], [0.3, 0.7]])  # Σ_{c'≠c} / (C − 1), C = 3
    np.testing.assert_allclose(t[3], [[0.8, 0.2], [0.3, 0.7]])
    assert np.isnan(leave_one_out_teachers({0: outputs[0]}, [0])[0]).all(), "nobody else: no teacher"


def test_fd_local_loss_is_ce_plus_beta_kd_and_records_mean_outputs(digits):
    ctx = RunContext.build(cls_config(method="fd", beta=0.5, **TINY), 0, digits)
    fd = FederatedDistillation(ctx)
    logits = torch.zeros(3, 2, 10)  # softmax = 0.1 everywhere: CE = KD = ln 10 for any teacher
    labels = torch.tensor([[4, 4], [4, 7], [1, 2]])
    assert torch.allclose(fd.local_loss(logits, labels), torch.full((3,), math.log(10)))  # no teacher yet
    teacher = np.full((10, 10), np.nan, dtype=np.float32)
    teacher[4] = np.eye(10)[4]
    fd.download(1, fd.aggregate({0: fd.upload(0)}, [1])[1])  # device 0's label-4 means: 0.1 each
    np.testing.assert_allclose(fd.teachers[1, 4].numpy(), 0.1, rtol=1e-6)
    fd.teachers[1] = torch.from_numpy(teacher)
    loss = fd.local_loss(logits, labels)
    # device 1: sample of label 4 has a teacher (KD = ln 10), label 7 has none (KD = 0): mean over 2
    assert loss[1].item() == pytest.approx(math.log(10) + 0.5 * math.log(10) / 2)
    upload = fd.upload(0)["outputs"]
    np.testing.assert_allclose(upload[4], 0.1, rtol=1e-6)
    assert np.isnan(upload[[0, 1, 2, 3, 5, 6, 7, 8, 9]]).all(), "unseen labels are NaN rows"


@pytest.mark.parametrize("method, bits", [("fd", 10 * 10 * 32), ("fl", 4810 * 32)])
def test_payload_bits_in_the_ledger(digits, method, bits):
    tables = run_seed(cls_config(method=method, **TINY), 0, digits)
    ledger = tables["ledger"]
    assert len(ledger) == 2 * 3 * 2, "rounds × devices × (up, down)"
    assert (ledger["bits"] == bits).all()
    runs = tables["runs"].iloc[0]
    assert runs["bits_up"] == runs["bits_down"] == 2 * 3 * bits


def test_rounds_rows_reference_device_and_global_model(digits):
    fl = run_seed(cls_config(method="fl", **TINY), 0, digits)["rounds"]
    fd = run_seed(cls_config(method="fd", **TINY), 0, digits)["rounds"]
    assert sorted(set(fl["device"])) == [GLOBAL, 0] and set(fd["device"]) == {0}
    assert fl["round"].tolist() == [0, 0, 1, 1, 1, 1, 2, 2, 2, 2] and fd["iteration"].tolist() == [0, 3, 3, 6, 6]
    after = fl[(fl["round"] > 0) & (fl["phase"] == "exchanged")]
    assert (after.groupby("round")["accuracy"].nunique() == 1).all(), "after FedAvg the device holds the global model"
    local = fl[(fl["round"] > 0) & (fl["phase"] == "local")]
    assert (local.groupby("round")["accuracy"].nunique() == 2).all(), "local training moves the device away"


def test_same_config_and_seed_give_identical_tables(digits):
    config = cls_config(method="fd", partition="mix2fld", samples_per_device=60, **TINY)
    a, b, c = (run_seed(config, s, digits) for s in (4, 4, 5))
    timing = ["compute_s"]  # wall-clock, the only column that is measured rather than computed
    pd.testing.assert_frame_equal(a["rounds"].drop(columns=timing), b["rounds"].drop(columns=timing))
    pd.testing.assert_frame_equal(a["ledger"], b["ledger"])
    assert not a["rounds"]["accuracy"].equals(c["rounds"]["accuracy"])


def test_a_lost_upload_is_in_the_ledger_and_out_of_the_average(digits, drop1):
    ledger = run_seed(cls_config(method="fl", channel=drop1, **TINY), 0, digits)["ledger"]
    up = ledger[ledger["direction"] == "up"]
    assert up[up["participant"] == 1]["delivered"].eq(False).all() and up["delivered"].sum() == 4
    assert (ledger["direction"] == "down").sum() == 6, "everyone still downloads the average"


@pytest.mark.parametrize("field, value", [("method", "fedprox"), ("dataset", "svhn"), ("partition", "quantity"),
                                          ("model", "resnet"), ("channel", "pigeon")])
def test_unknown_names_in_a_config_are_refused(field, value):
    with pytest.raises(FrdError, match=f"unknown (classification )?{field} '{value}'; choose one of"):
        cls_config(**{field: value})


class SeedUpload:
    """A one-off exchange: each device uploads its first raw sample (8-bit pixels)."""

    def __init__(self, ctx):
        self.ctx, self.received = ctx, {}

    def upload(self, device):
        x, y = self.ctx.device_data(device)
        return Payload.of("seed_samples", 1, x=(x[:1].numpy(), PIXEL_BITS), y=(y[:1].numpy(), index_bits(10)))

    def aggregate(self, uploads, participants):
        self.received = {p: u["y"][0] for p, u in uploads.items()}
        return {}

    def download(self, device, payload):
        raise AssertionError("nothing is sent down")

    def finish_round(self):
        """Nothing was sent down."""


class Probe(FedAvg):
    """A method added the documented way: setup transfer, no local training, a server-trained model."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self.setup, self.trained_rounds = SeedUpload(ctx), []

    def setup_exchange(self):
        return self.setup

    def local_train(self, round_):
        self.trained_rounds.append(round_)

    def models_to_evaluate(self):
        return {GLOBAL: self.global_model()}


def test_a_new_method_plugs_in_with_one_registry_entry(digits, monkeypatch, made):
    monkeypatch.setitem(CLS_METHODS, "probe", Probe)
    built = made("probe")
    tables = run_seed(cls_config(method="probe", **TINY), 0, digits)
    ledger, probe = tables["ledger"], built[0]
    setup = ledger[ledger["round"] == 0]
    assert len(setup) == 3 and (setup["kind"] == "seed_samples").all()
    assert (setup["bits"] == 8 * 8 * 8 + 4).all(), "64 pixels × 8 bits + a 4-bit label"
    assert probe.setup.received == {d: int(probe.ctx.device_data(d)[1][0]) for d in range(3)}
    assert probe.trained_rounds == [1, 2]
    assert set(tables["rounds"]["device"]) == {GLOBAL}
    assert np.isnan(tables["runs"]["accuracy"].iloc[0]) and tables["runs"]["global_accuracy"].notna().all()


def test_device_data_and_method_rng_are_the_runs_own(digits):
    ctx = RunContext.build(cls_config(partition="mix2fld", samples_per_device=60, **TINY), 3, digits)
    x, y = ctx.device_data(1)
    assert x.dtype == torch.uint8 and len(y) == 60 and sorted(np.bincount(y.numpy(), minlength=10))[:2] == [2, 2]
    assert ctx.rng(7).integers(1 << 30) == ctx.rng(7).integers(1 << 30) != ctx.rng(8).integers(1 << 30)

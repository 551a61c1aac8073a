"""FLD, MixFLD and Mix2FLD with tiny budgets on digits: payload bits by hand, the server's KD,
failed uploads, bad options and reproducibility."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from torch.nn.utils import parameters_to_vector

from frd.classification.context import RunContext
from frd.classification.methods import cls_config
from frd.classification.methods.fld import FederatedLearningAfterDistillation, Mix2FLD, MixFLD
from frd.classification.mixup import mixup
from frd.classification.runner import run_seed
from frd.errors import FrdError
from frd.seeding import MethodStream

TINY = dict(rounds=2, iterations_per_round=3, devices=3, n_mix=4, server_iterations=5)
PARAMETERS = 4810
"""The digits MLP: 64·64 + 64 + 64·10 + 10."""



@pytest.mark.parametrize("method, kind, seed_bits", [
    ("fld", "seed_samples", 12 * (64 * 8 + 4)),         # 12 raw 8×8 samples at 8 bits/pixel + a 4-bit label
    ("mixfld", "mixed_samples", 12 * (64 * 8 + 2 * 4)),  # mixed pixels rounded to 8 bits + two 4-bit labels
    ("mix2fld", "mixed_samples", 12 * (64 * 8 + 2 * 4)),
])
def test_payload_bits_by_hand(digits, method, kind, seed_bits):
    ledger = run_seed(cls_config(method=method, **{**TINY, "devices": 4, "n_mix": 12}), 0, digits)["ledger"]
    setup = ledger[ledger["round"] == 0]
    assert len(setup) == 4 and (setup["direction"] == "up").all(), "seed samples go up once, nothing comes down"
    assert (setup["kind"] == kind).all() and (setup["entries"] == 12).all() and (setup["bits"] == seed_bits).all()
    rounds = ledger[ledger["round"] >= 1]
    up, down = rounds[rounds["direction"] == "up"], rounds[rounds["direction"] == "down"]
    assert len(up) == len(down) == 2 * 4
    assert (up["kind"] == "outputs").all() and (up["bits"] == 10 * 10 * 32).all(), "FD's uplink"
    assert (down["kind"] == "weights").all() and (down["bits"] == PARAMETERS * 32).all(), "FL's downlink"


def test_mixed_samples_go_up_as_8_bit_mixes_with_their_label_pairs(digits):
    config = cls_config(method="mixfld", gamma=0.3, **TINY)
    ctx = RunContext.build(config, 0, digits)
    method = MixFLD(ctx)
    payload = method.seed_upload(1)
    x, y = (t.numpy() for t in ctx.device_data(1))
    expected = mixup(x, y, 4, 0.3, ctx.rng(MethodStream.SEED_PICK, 1), n_classes=10, device=1,
                     label_pairs=method.label_pairs(1))
    assert (expected.label[:, 0] != expected.label[:, 1]).all()
    assert payload["x"].dtype == np.uint8
    np.testing.assert_array_equal(payload["x"], np.rint(expected.x))
    np.testing.assert_array_equal(payload["label"], expected.label)


def test_server_seed_sets_raw_soft_and_inverse_mixed(digits):
    config = cls_config("mix2fld", devices=4, n_mix=20, n_inv=3, gamma=0.2, **{k: v for k, v in TINY.items()
                                                                       if k not in ("devices", "n_mix")})
    sets = {}
    for name, cls in (("fld", FederatedLearningAfterDistillation), ("mixfld", MixFLD), ("mix2fld", Mix2FLD)):
        method = cls(RunContext.build(config, 0, digits))
        method.receive_seeds({d: method.seed_upload(d) for d in range(4)})
        sets[name] = method
    fld, mix, inv = (sets[n].seed_soft for n in ("fld", "mixfld", "mix2fld"))
    assert len(fld) == len(mix) == 80 and len(inv) == 4 * 3, "n_inv per device"
    assert (fld.max(1).values == 1).all() and (inv.max(1).values == 1).all(), "hard labels"
    np.testing.assert_allclose(np.sort(mix.numpy(), 1)[:, -2:], np.tile([0.2, 0.8], (80, 1)), rtol=1e-6)
    x = sets["mix2fld"].seed_x
    assert x.shape == (12, 1, 8, 8) and not torch.equal(x, x.clamp(0, 1)), "inverse mixes leave the pixel range"


def test_global_outputs_are_the_mean_over_arrived_uploads_and_kd_changes_the_model(digits, monkeypatch):
    ctx = RunContext.build(cls_config(method="fld", **TINY), 0, digits)
    fld = FederatedLearningAfterDistillation(ctx)
    fld.receive_seeds({d: fld.seed_upload(d) for d in range(3)})
    fld.local_train(1)
    uploads = {d: fld.upload(d) for d in (0, 2)}  # device 1's upload was lost
    both = np.stack([uploads[0]["outputs"], uploads[2]["outputs"]])
    with np.errstate(invalid="ignore"):  # a label neither device saw in 3 steps stays NaN
        expected = np.nansum(both, 0) / (~np.isnan(both)).sum(0)
    before = parameters_to_vector(fld.server.parameters()).detach().clone()
    seen = []
    distill = fld.distill_server
    monkeypatch.setattr(fld, "distill_server", lambda outputs: seen.append(outputs) or distill(outputs))
    downloads = fld.aggregate(uploads, [0, 1, 2])
    np.testing.assert_allclose(seen[0].numpy(), expected, rtol=1e-6)
    after = parameters_to_vector(fld.server.parameters()).detach()
    assert not torch.allclose(before, after), "K_s KD steps moved the global model"
    assert set(downloads) == {0, 1, 2}
    np.testing.assert_array_equal(downloads[1]["weights"], after.numpy())
    fld.download(1, downloads[1])
    np.testing.assert_array_equal(ctx.devices.flat(1), after.numpy())


def test_kd_fits_the_teacher_of_each_seed_label(digits):
    """With a one-hot teacher per label the server's KD is plain supervised training on the seeds."""
    ctx = RunContext.build(cls_config(method="fld", devices=3, n_mix=10, server_iterations=150, server_lr=0.5), 0, digits)
    fld = FederatedLearningAfterDistillation(ctx)
    fld.receive_seeds({d: fld.seed_upload(d) for d in range(3)})
    fld.distill_server(torch.eye(10))
    predicted = fld.server(fld.seed_x).argmax(1)
    assert (predicted == fld.seed_soft.argmax(1)).float().mean() > 0.9


def test_without_server_iterations_the_global_model_stays_put(digits):
    ctx = RunContext.build(cls_config(method="fld", **{**TINY, "server_iterations": 0}), 0, digits)
    fld = FederatedLearningAfterDistillation(ctx)
    before = parameters_to_vector(fld.server.parameters()).detach().clone()
    fld.receive_seeds({d: fld.seed_upload(d) for d in range(3)})
    fld.local_train(1)
    fld.aggregate({d: fld.upload(d) for d in range(3)}, [0, 1, 2])
    assert torch.equal(before, parameters_to_vector(fld.server.parameters()).detach())



@pytest.mark.parametrize("method", ["fld", "mixfld"])
def test_failed_uploads_are_left_out(digits, drop1, made, method):
    built = made(method)
    ledger = run_seed(cls_config(method=method, channel=drop1, **TINY), 0, digits)["ledger"]
    up = ledger[ledger["direction"] == "up"]
    assert not up[up["participant"] == 1]["delivered"].any() and up["delivered"].sum() == 2 * 3
    assert len(built[0].seed_x) == 2 * 4, "the server's seed set holds devices 0 and 2's samples only"


def test_shortfalls_are_recorded_instead_of_errors(digits, made):
    built = made("mix2fld")
    runs = run_seed(cls_config(method="mix2fld", n_inv=500, **TINY), 0, digits)["runs"].iloc[0]
    assert runs["inverse_shortfall"] == 3 * 500 - len(built[0].seed_x) > 0, "clipped to what the uploads allow"
    assert runs["seed_shortfall"] == 0
    short = cls_config(method="mixfld", partition="dirichlet", alpha=0.01, min_samples=2, devices=10, n_mix=20,
                       rounds=1, iterations_per_round=1, server_iterations=1)
    assert run_seed(short, 0, digits)["runs"].iloc[0]["seed_shortfall"] > 0, "one-label devices mix what they can"


@pytest.mark.parametrize("options, message", [
    (dict(gamma=0.5), "must lie in \\(0, 0.5\\)"), (dict(gamma=0.0), "must lie in \\(0, 0.5\\)"),
    (dict(n_mix=0), "--n-mix must be at least 1"), (dict(n_inv=0), "--n-inv must be at least 1"),
    (dict(n_s=1), "--n-s must be at least 2"), (dict(server_lr=0.0), "--server-lr must be > 0"),
])
def test_bad_options_are_refused(options, message):
    with pytest.raises(FrdError, match=message):
        cls_config(method="mix2fld", **options)


def test_same_seed_same_tables_over_a_wireless_channel(digits):
    config = cls_config(method="mix2fld", partition="mix2fld", samples_per_device=60, channel="wireless-asymmetric",
                       **{**TINY, "devices": 4, "n_mix": 10})
    a, b, c = (run_seed(config, s, digits) for s in (4, 4, 5))
    timing = ["compute_s"]  # measured wall-clock
    pd.testing.assert_frame_equal(a["rounds"].drop(columns=timing), b["rounds"].drop(columns=timing))
    pd.testing.assert_frame_equal(a["ledger"], b["ledger"])
    assert (a["ledger"]["latency_s"] > 0).all()
    assert not a["ledger"].equals(c["ledger"])


@pytest.mark.parametrize("loss", ["ce+kd", "kd"])
def test_server_loss_by_hand_on_a_tiny_batch(digits, loss):
    """One server step on 3 seed samples equals SGD on the loss written out by hand: label CE plus
    β_s times teacher CE (ce+kd), or teacher CE alone on the samples that have a teacher (kd)."""
    import copy

    ctx = RunContext.build(cls_config("mixfld", server_loss=loss, server_beta=0.5, server_iterations=1,
                                      batch_size=3, **{k: v for k, v in TINY.items() if k != "server_iterations"}),
                           0, digits)
    fld = MixFLD(ctx)
    soft = torch.tensor([[0.2, 0.8, 0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0.2, 0.8, 0, 0, 0, 0, 0, 0],
                         [0.8, 0, 0, 0, 0, 0, 0, 0, 0, 0.2]])
    fld.seed_x, fld.seed_soft = torch.rand(3, 1, 8, 8), soft
    outputs = torch.full((10, 10), float("nan"))
    outputs[:4] = torch.softmax(torch.randn(4, 10), -1)  # labels 0–3 have outputs; 9 has none
    reference = copy.deepcopy(fld.server)
    fld.server_rng = np.random.default_rng(7)  # the same minibatch draw as below
    batch = np.random.default_rng(7).integers(3 if loss == "ce+kd" else 2, size=(1, 3))[0]
    fld.distill_server(outputs)
    teacher = torch.stack([0.2 * outputs[0] + 0.8 * outputs[1], 0.2 * outputs[2] + 0.8 * outputs[3], torch.zeros(10)])
    logp = torch.log_softmax(reference(fld.seed_x), -1)
    if loss == "ce+kd":
        per_sample = -(soft * logp).sum(-1) - 0.5 * (teacher * logp).sum(-1)
    else:
        per_sample = -(teacher[:2] * logp[:2]).sum(-1)
    manual = per_sample[torch.from_numpy(batch)].mean()
    manual.backward()
    with torch.no_grad():
        for p in reference.parameters():
            p -= fld.options.server_lr * p.grad
    torch.testing.assert_close(parameters_to_vector(fld.server.parameters()),
                               parameters_to_vector(reference.parameters()))

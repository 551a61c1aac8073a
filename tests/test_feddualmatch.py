"""FedDualMatch and FedDM on the shared round loop: payload bits by hand, global updates, R_t on the
wire, the DP option's ε, reproducibility and clear errors. Tiny budgets on 8×8 digits."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from frd.classification.context import RunContext
from frd.classification.methods import CLS_METHODS, GLOBAL, cls_config
from frd.classification.models import build_model, count_parameters
from frd.classification.runner import run_seed
from frd.cli import main
from frd.errors import FrdError
from frd.payload import FLOAT_BITS, index_bits

TINY = dict(rounds=2, devices=3, width=8, ipc=2, distill_iterations=3, server_epochs=1,
            partition="dirichlet", alpha=0.5)
PIXELS = 8 * 8




@pytest.fixture(scope="module")
def runs(digits):
    """One tiny run of each method (shared: the tests below only read them)."""
    return {m: run_seed(cls_config(method=m, **TINY), 0, digits) for m in ("feddm", "feddualmatch")}


def classes_held(digits, method: str, device: int) -> int:
    ctx = RunContext.build(cls_config(method=method, model="convnet", **TINY), 0, digits)
    return int(np.unique(ctx.device_data(device)[1].numpy()).size)


@pytest.mark.parametrize("method, radius_bits", [("feddm", 0), ("feddualmatch", FLOAT_BITS)])
def test_payload_is_synthetic_images_up_and_weights_down(runs, digits, method, radius_bits):
    ledger = runs[method]["ledger"]
    parameters = count_parameters(build_model("convnet", "digits", (1, 8, 8), 10, 8))
    assert runs[method]["runs"]["parameters"].iloc[0] == parameters, "auto picks the convnet"
    up, down = ledger[ledger["direction"] == "up"], ledger[ledger["direction"] == "down"]
    assert len(up) == len(down) == 2 * 3 and set(ledger["round"]) == {1, 2}
    for device in range(3):
        held = classes_held(digits, method, device)
        images = held * TINY["ipc"]
        expected = images * PIXELS * FLOAT_BITS + held * index_bits(10)  # float32 pixels + class list
        assert (up[up["participant"] == device]["bits"] == expected).all()
        assert (up[up["participant"] == device]["entries"] == images).all()
    assert (down["bits"] == parameters * FLOAT_BITS + radius_bits).all(), "weights (+ R_t for FedDualMatch)"


@pytest.mark.parametrize("method", ["feddm", "feddualmatch"])
def test_the_global_model_is_trained_and_evaluated(runs, method):
    rounds = runs[method]["rounds"]
    assert set(rounds["device"]) == {GLOBAL} and rounds["round"].tolist() == [0, 1, 1, 2, 2]
    assert rounds["loss"].nunique() == 3, "every round moves the global model"
    assert np.isnan(runs[method]["runs"]["accuracy"].iloc[0]) and "dp_epsilon" not in runs[method]["runs"]


def test_clients_receive_the_adaptive_radius_and_feddm_keeps_rho(digits):
    methods = {}
    for name in ("feddm", "feddualmatch"):
        ctx = RunContext.build(cls_config(method=name, model="convnet", **TINY), 0, digits)
        method = methods[name] = CLS_METHODS[name](ctx)
        assert method.radius == [5.0] * 3
        method.local_train(1)
        downloads = method.aggregate({d: method.upload(d) for d in range(3)}, [0, 1, 2])
        method.download(1, downloads[1])
    assert methods["feddm"].radius == [5.0] * 3
    r = methods["feddualmatch"].radius
    assert r[1] == pytest.approx(methods["feddualmatch"].next_radius) and r[1] != 5.0 and r[0] == r[2] == 5.0


def test_dp_reports_a_finite_epsilon_and_more_noise_spends_less(digits):
    config = dict(TINY, rounds=1)
    eps = [run_seed(cls_config(method="feddualmatch", dp_noise=sigma, **config), 0, digits)["runs"].iloc[0]
           for sigma in (200.0, 400.0)]
    assert all(math.isfinite(e["dp_epsilon"]) and e["dp_epsilon"] > 0 and e["dp_delta"] == 1e-5 for e in eps)
    assert eps[1]["dp_epsilon"] < eps[0]["dp_epsilon"]


def test_same_seed_same_tables(digits, runs):
    again = run_seed(cls_config(method="feddualmatch", **TINY), 0, digits)
    timing = ["compute_s"]
    pd.testing.assert_frame_equal(again["rounds"].drop(columns=timing),
                                  runs["feddualmatch"]["rounds"].drop(columns=timing))
    pd.testing.assert_frame_equal(again["ledger"], runs["feddualmatch"]["ledger"])


@pytest.mark.parametrize("overrides, message", [
    (dict(method="feddualmatch", model="mlp"), "use --model convnet"),
    (dict(method="feddm", dp_noise=1.0), "DP with init='real'"),
    (dict(method="feddm", distill_iterations=-1), "--distill-iterations must be at least 1"),
])
def test_bad_options_are_clear_errors(digits, overrides, message):
    with pytest.raises(FrdError, match=message):
        run_seed(cls_config(**{**TINY, **overrides}), 0, digits)


def test_config_refuses_bad_ipc_and_preset():
    with pytest.raises(FrdError, match="--ipc must be at least 1"):
        cls_config("feddm", ipc=0)
    with pytest.raises(FrdError, match="--distill-preset must be one of cpu, paper, got 'gpu'"):
        cls_config("feddualmatch", distill_preset="gpu")
    with pytest.raises(FrdError, match="--ipc is an option of feddm, feddualmatch, not of fl"):
        cls_config("fl", ipc=3)


def test_cli_runs_feddualmatch_with_its_flags(tmp_path, capsys):
    args = ["cls", "--method", "feddualmatch", "--seeds", "1", "--rounds", "1", "--devices", "2", "--width", "8", "--ipc", "1",
            "--distill-iterations", "2", "--server-epochs", "1", "--dp-noise", "100", "--dp-clip", "0.5",
            "--no-progress", "--out", str(tmp_path)]
    assert main(args) == 0
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert math.isfinite(runs["dp_epsilon"].iloc[0])
    assert "feddualmatch" in capsys.readouterr().out


def test_auto_model_is_the_convnet_narrowed_under_the_cpu_preset():
    resolve = CLS_METHODS["feddualmatch"].resolve
    dd = "feddualmatch"
    cpu, paper = resolve(cls_config(dd)), resolve(cls_config(dd, distill_preset="paper"))
    assert (cpu.model, cpu.width) == ("convnet", 32) and (paper.model, paper.width) == ("convnet", None)
    assert resolve(cls_config(dd, width=8)).width == 8 and resolve(cls_config(dd, model="mlp")).model == "mlp"
    assert CLS_METHODS["fl"].resolve(cls_config()) == cls_config(), "other methods keep their defaults"


def test_feddm_can_start_from_noise_as_seed_000_reran_it(digits, made):
    built = made("feddm")
    run_seed(cls_config("feddm", init="noise", **TINY), 0, digits)
    assert built[0].client.init == "noise" and built[0].client.matching == "last", "only the start changes"
    assert cls_config("feddm").options.init is None


def test_image_lr_reaches_the_clients_and_must_be_positive(digits):
    for value, expected in ((None, 1.0), (0.1, 0.1)):
        ctx = RunContext.build(cls_config("feddualmatch", model="convnet", image_lr=value, **TINY), 0, digits)
        client, _ = CLS_METHODS["feddualmatch"].configs(ctx)
        assert client.image_lr == expected, "unset: the preset's (DM's 1.0)"
    with pytest.raises(FrdError, match="--image-lr must be > 0, got 0"):
        cls_config("feddualmatch", image_lr=0)

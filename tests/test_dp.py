"""The Gaussian mechanism on the synthetic-set gradient and its (ε, δ) accounting."""
from __future__ import annotations

import math
import warnings

import pytest
import torch

from frd.classification.distillation.dp import (
    DPConfig,
    accounting_noise_multiplier,
    client_epsilon,
    clip_and_noise,
    clip_to_norm,
    epsilon,
    sample_rate,
)
from frd.errors import FrdError


@pytest.mark.parametrize("clip", [0.1, 1.0, 7.5])
def test_clipped_gradient_never_exceeds_c(clip):
    g = torch.Generator().manual_seed(0)
    for scale in [1e-3, 0.5, 1.0, 3.0, 1e4]:
        for _ in range(20):
            grad = torch.randn(5, 1, 4, 4, generator=g) * scale
            clipped = clip_to_norm(grad, clip)
            assert clipped.norm() <= clip * (1 + 1e-6)  # float32 rounding only
            if grad.norm() <= clip:
                assert torch.equal(clipped, grad)  # inside the ball: untouched
            else:
                assert torch.allclose(clipped / clipped.norm(), grad / grad.norm(), atol=1e-6)


def test_clip_hand_value():
    # ‖(3, 4)‖ = 5 clipped to 1 gives (0.6, 0.8).
    assert torch.allclose(clip_to_norm(torch.tensor([3.0, 4.0]), 1.0), torch.tensor([0.6, 0.8]))


def test_noise_has_std_sigma_c_over_set_size():
    g = torch.Generator().manual_seed(1)
    grad = torch.full((200_000,), 10.0)
    out = clip_and_noise(grad, clip_norm=2.0, noise=3.0, set_size=4, generator=g)
    noise = out - clip_to_norm(grad, 2.0)
    assert noise.std().item() == pytest.approx(3.0 * 2.0 / 4, rel=0.01)
    assert abs(noise.mean().item()) < 0.01


def test_mechanism_is_seeded():
    grad = torch.ones(10)
    a = clip_and_noise(grad, 1.0, 1.0, 10, torch.Generator().manual_seed(3))
    b = clip_and_noise(grad, 1.0, 1.0, 10, torch.Generator().manual_seed(3))
    assert torch.equal(a, b)


def test_accounting_noise_multiplier_uses_sensitivity_2c():
    # std σC/|S| over sensitivity 2C.
    assert accounting_noise_multiplier(2.0, 100) == pytest.approx(0.01)


def test_sample_rate_is_worst_class():
    assert sample_rate([64, 128], real_batch=16) == pytest.approx(0.25)
    assert sample_rate([200, 5, 0], real_batch=16) == 1.0  # a rare class gets no amplification
    with pytest.raises(FrdError, match="no real images"):
        sample_rate([0, 0], real_batch=16)


def test_epsilon_is_finite_and_grows_with_iterations():
    eps = [epsilon(1.0, 0.05, steps, 1e-5) for steps in (10, 100, 1000)]
    assert all(math.isfinite(e) and e > 0 for e in eps)
    assert eps[0] < eps[1] < eps[2]
    assert epsilon(1.0, 0.05, 0, 1e-5) == 0.0
    assert epsilon(2.0, 0.05, 100, 1e-5) < epsilon(1.0, 0.05, 100, 1e-5)  # more noise, less ε


def test_epsilon_within_classic_rdp_bound():
    # One unsampled Gaussian release with z = 1: RDP α/2, so ε ≤ min_α α/2 + log(1/δ)/(α−1).
    delta = 1e-5
    classic = min(a / 2 + math.log(1 / delta) / (a - 1) for a in [1 + i / 100 for i in range(1, 10_000)])
    eps = epsilon(1.0, 1.0, 1, delta)
    assert 0 < eps <= classic + 1e-9
    assert classic == pytest.approx(5.30, abs=0.01)


def test_much_noise_finds_its_best_order_above_opacus_defaults():
    # q = 1, σ = 50, 3 steps: the best RDP order is about 96 (Opacus's defaults end at 63 and warn)
    from opacus.accountants import RDPAccountant
    from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent

    orders = RDPAccountant.DEFAULT_ALPHAS
    with pytest.warns(UserWarning, match="Optimal order is the largest alpha"):
        loose, _ = get_privacy_spent(orders=orders, rdp=compute_rdp(q=1.0, noise_multiplier=50.0, steps=3, orders=orders),
                                     delta=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tight = epsilon(50.0, 1.0, 3, 1e-5)
    # q = 1 is the plain Gaussian mechanism: RDP 3·α/(2σ²) at each order α; ε by Opacus's conversion
    by_hand = min(3 * a / (2 * 50.0 ** 2) - (math.log(1e-5) + math.log(a)) / (a - 1) + math.log((a - 1) / a)
                  for a in (96, 128))
    assert tight == pytest.approx(by_hand, rel=1e-9) and tight < loose - 0.01


def test_client_epsilon_composes_the_parts():
    cfg = DPConfig(clip_norm=1.0, noise=200.0, delta=1e-5)
    expected = epsilon(200.0 / (2 * 100), 16 / 64, 300, 1e-5)
    assert client_epsilon(cfg, set_size=100, class_counts=[64, 80], real_batch=16, steps=300) == expected


@pytest.mark.parametrize("kwargs", [dict(clip_norm=0.0), dict(clip_norm=-1.0), dict(noise=0.0),
                                    dict(delta=0.0), dict(delta=1.0)])
def test_bad_dp_config_is_refused(kwargs):
    with pytest.raises(FrdError, match="DP (clip norm|noise factor|δ)"):
        DPConfig(**kwargs)


def test_bad_accounting_input_is_refused():
    with pytest.raises(FrdError, match="clip norm C must be > 0"):
        clip_to_norm(torch.ones(3), 0.0)
    with pytest.raises(FrdError, match="sampling rate"):
        epsilon(1.0, 1.5, 10, 1e-5)
    with pytest.raises(FrdError, match="noise multiplier"):
        epsilon(0.0, 0.5, 10, 1e-5)

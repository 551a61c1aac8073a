"""FedDualMatch / FedDM math: error ball, stages, distribution and gradient matching, server."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from frd.classification.distillation.client import (
    DistillConfig,
    SyntheticSet,
    distill,
    distribution_matching_loss,
    matched_layers,
    mean_embedding_mmd,
    sample_model_on_error_ball,
    stage_layers,
    stage_of_iteration,
)
from frd.classification.distillation.dp import DPConfig
from frd.classification.distillation.server import (
    ServerConfig,
    adaptive_radius,
    class_gradients,
    finetune,
    gradient_distance,
    gradient_match,
    server_update,
    union,
)
from frd.errors import FrdError

CLASSES = 3


class Tiny(nn.Module):
    """Two conv blocks then logits (J = 3 layers), on 1×8×8 images."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.norm1 = nn.GroupNorm(4, 4)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 2 * 2, CLASSES)

    def layer_outputs(self, x: torch.Tensor) -> list[torch.Tensor]:
        h1 = F.avg_pool2d(F.relu(self.norm1(self.conv1(x))), 2)
        h2 = F.avg_pool2d(F.relu(self.conv2(h1)), 2)
        return [h1, h2, self.fc(h2.flatten(1))]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer_outputs(x)[-1]


def tiny(seed: int = 0) -> Tiny:
    torch.manual_seed(seed)  # only to make the test model's initial weights reproducible
    return Tiny()


def real_data(n_per_class: int = 20, classes: tuple[int, ...] = (0, 1, 2), seed: int = 0):
    """Class c = a bright patch at a class-specific place, plus noise: easy to tell apart."""
    g = torch.Generator().manual_seed(seed)
    images, labels = [], []
    for c in classes:
        x = 0.3 * torch.randn(n_per_class, 1, 8, 8, generator=g)
        x[:, :, 2 * c:2 * c + 3, 2 * c:2 * c + 3] += 2.0
        images.append(x)
        labels.append(torch.full((n_per_class,), c))
    return torch.cat(images), torch.cat(labels)



def params(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


# --- gradient-matching distance ---------------------------------------------------------------

def test_gradient_distance_hand_values_and_ignores_biases():
    a = [torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([1.0, 2.0])]
    b = [torch.tensor([[1.0, 0.0], [1.0, 0.0]]), torch.tensor([-5.0, 3.0])]
    # row 0: cos 1 → 0; row 1: orthogonal → 1; the bias pair is ignored.
    assert gradient_distance(a, b).item() == pytest.approx(1.0, abs=1e-5)

    conv_a = torch.tensor([3.0, 4.0, 1.0, 0.0]).reshape(2, 1, 2, 1)
    conv_b = torch.tensor([4.0, 3.0, -1.0, 0.0]).reshape(2, 1, 2, 1)
    # rows (3,4)·(4,3) = 24/25 → 1/25; (1,0) vs (−1,0) → 2.
    assert gradient_distance([conv_a], [conv_b]).item() == pytest.approx(2.04, abs=1e-5)
    assert gradient_distance([torch.ones(4)], [-torch.ones(4)]).item() == 0.0


def test_class_gradients_cover_weights_only():
    model = tiny()
    x, _ = real_data(4)
    grads = class_gradients(model, x, 1)
    assert [g.shape for g in grads] == [model.conv1.weight.shape, model.conv2.weight.shape, model.fc.weight.shape]


# --- error ball ---------------------------------------------------------------------------------

@pytest.mark.parametrize("radius", [0.0, 0.5, 5.0])
def test_sampled_model_lies_at_distance_radius(radius):
    model = tiny()
    before = params(model).clone()
    sampled = sample_model_on_error_ball(model, radius, torch.Generator().manual_seed(7))
    assert (params(sampled) - before).double().norm().item() == pytest.approx(radius, rel=1e-5, abs=1e-6)
    assert torch.equal(params(model), before)  # the global model is untouched
    assert not any(p.requires_grad for p in sampled.parameters())


def test_error_ball_directions_come_from_the_generator():
    model = tiny()
    draw = lambda seed: params(sample_model_on_error_ball(model, 1.0, torch.Generator().manual_seed(seed)))
    assert torch.equal(draw(1), draw(1))
    assert not torch.equal(draw(1), draw(2))
    with pytest.raises(ValueError, match="radius must be >= 0"):
        sample_model_on_error_ball(model, -1.0, torch.Generator())


# --- stages -------------------------------------------------------------------------------------

def test_stage_layers_add_one_earlier_layer_per_stage():
    assert [stage_layers(4, s) for s in range(4)] == [[3], [2, 3], [1, 2, 3], [0, 1, 2, 3]]
    for bad in (-1, 4):
        with pytest.raises(ValueError, match="stage must lie in"):
            stage_layers(4, bad)


def test_iterations_split_evenly_across_stages():
    stages = [stage_of_iteration(i, 10, 4) for i in range(10)]
    assert stages == [0, 0, 0, 1, 1, 2, 2, 2, 3, 3]  # contiguous, shares 3/2/3/2
    assert [stage_of_iteration(i, 2, 4) for i in range(2)] == [0, 2]  # too few: stages skipped
    assert matched_layers("layerwise", 4, 9, 10) == [0, 1, 2, 3]
    assert matched_layers("last", 4, 0, 10) == [2, 3]  # FedDM: last feature layer + logits


# --- client distillation -------------------------------------------------------------------------

def test_mmd_is_squared_distance_of_means():
    real = torch.tensor([[0.0, 0.0], [2.0, 4.0]])
    syn = torch.tensor([[1.0, 0.0]])
    assert mean_embedding_mmd(real, syn).item() == pytest.approx(0.0 + 4.0)


@pytest.mark.parametrize("matching", ["layerwise", "last"])
def test_distribution_matching_moves_synthetic_set_towards_real_means(matching):
    model = tiny()
    x, y = real_data(20)
    cfg = DistillConfig(ipc=2, iterations=40, real_batch=20, matching=matching)

    layers = matched_layers(matching, 3, cfg.iterations - 1, cfg.iterations)  # all for layerwise

    def mmd(s: SyntheticSet) -> float:  # on all real images, under the fixed model (radius 0)
        real = [x[y == c] for c in s.classes]
        return distribution_matching_loss(model, real, list(s.images.split(s.ipc)), layers).item()

    start = distill(model, x, y, replace(cfg, iterations=0), 0.0, torch.Generator().manual_seed(0))
    end = distill(model, x, y, cfg, 0.0, torch.Generator().manual_seed(0))
    assert torch.equal(end.labels, torch.tensor([0, 0, 1, 1, 2, 2]))
    assert mmd(end) < 0.5 * mmd(start)


def test_distill_is_seeded_and_handles_missing_and_tiny_classes():
    x, y = real_data(5, classes=(0, 2))
    x, y = x[:6], y[:6]  # class 0: 5 images, class 2: 1 image; class 1 absent
    cfg = DistillConfig(ipc=3, iterations=3, init="real", matching="last")
    a = distill(tiny(), x, y, cfg, 5.0, torch.Generator().manual_seed(4))
    b = distill(tiny(), x, y, cfg, 5.0, torch.Generator().manual_seed(4))
    assert a.classes == (0, 2) and a.images.shape == (6, 1, 8, 8)
    assert torch.equal(a.images, b.images)


def test_distill_with_dp_runs_and_refuses_real_init():
    x, y = real_data(4)
    dp = DPConfig(clip_norm=0.1, noise=1.0)
    s = distill(tiny(), x, y, DistillConfig(ipc=1, iterations=2, dp=dp), 1.0, torch.Generator().manual_seed(0))
    assert torch.isfinite(s.images).all()
    with pytest.raises(FrdError, match="DP with init='real'"):
        DistillConfig(init="real", dp=dp)


@pytest.mark.parametrize("kwargs", [dict(ipc=0), dict(iterations=-1), dict(real_batch=0), dict(image_lr=0.0),
                                    dict(init="zeros"), dict(matching="first")])
def test_bad_client_config_is_refused(kwargs):
    with pytest.raises(FrdError, match="must be|must lie|unknown"):
        DistillConfig(**kwargs)


def test_presets():
    assert DistillConfig.preset("feddualmatch") == DistillConfig()
    feddm = DistillConfig.preset("feddm", "paper")
    assert (feddm.init, feddm.matching, feddm.ipc, feddm.iterations) == ("real", "last", 10, 20_000)
    assert ServerConfig.preset("feddm").radius == 5.0 and not ServerConfig.preset("feddm").gradient_matching
    assert ServerConfig.preset("feddm").first_radius == 5.0
    assert ServerConfig.preset("feddualmatch").radius is None
    assert ServerConfig.preset("feddualmatch").first_radius == ServerConfig().initial_radius
    with pytest.raises(FrdError, match="no client preset for method='fedavg'"):
        DistillConfig.preset("fedavg")
    with pytest.raises(FrdError, match="no server preset for method='feddm', scale='gpu'"):
        ServerConfig.preset("feddm", "gpu")
    with pytest.raises(FrdError, match="radius must be >= 0"):
        ServerConfig(radius=-1.0)


# --- payload ------------------------------------------------------------------------------------

def test_synthetic_payload_bits_and_round_trip():
    images = torch.randn(6, 1, 8, 8)
    s = SyntheticSet(images, (0, 2))
    payload = s.to_payload(num_classes=10)
    # 6 images × 64 pixels × 32 bits, plus 2 class indices × ceil(log2 10) = 4 bits; no labels.
    assert payload.bits == 6 * 64 * 32 + 2 * 4
    assert payload.kind == "synthetic" and payload.entries == 6
    back = SyntheticSet.from_payload(payload)
    assert torch.equal(back.images, images) and back.classes == (0, 2)
    assert torch.equal(back.labels, torch.tensor([0, 0, 0, 2, 2, 2]))


# --- server -------------------------------------------------------------------------------------

def client_sets() -> list[SyntheticSet]:
    g = torch.Generator().manual_seed(5)
    return [SyntheticSet(torch.randn(4, 1, 8, 8, generator=g), (0, 1)),
            SyntheticSet(torch.randn(6, 1, 8, 8, generator=g), (0, 1, 2))]


def ggm_loss(model: nn.Module, candidates: list[SyntheticSet], sets: list[SyntheticSet]) -> float:
    images, labels = union(sets)
    return sum(gradient_distance(class_gradients(model, x, c), class_gradients(model, images[labels == c], c)).item()
               for s in candidates for c, x in zip(s.classes, s.images.split(s.ipc)))


def test_gradient_matching_reduces_the_distance_and_keeps_the_model():
    model, sets = tiny(), client_sets()
    before = params(model).clone()
    matched = gradient_match(model, sets, iterations=15, lr=0.1, generator=torch.Generator().manual_seed(0),
                             model_steps=0)
    assert [m.classes for m in matched] == [s.classes for s in sets]
    assert [m.images.shape for m in matched] == [s.images.shape for s in sets]
    assert ggm_loss(model, matched, sets) < 0.7 * ggm_loss(model, sets, sets)
    assert torch.equal(params(model), before)


def test_finetune_fits_the_synthetic_data():
    model = tiny()
    x, y = real_data(10)
    loss = lambda: F.cross_entropy(model(x), y).item()
    start = loss()
    finetune(model, x, y, epochs=20, batch=16, lr=0.05, generator=torch.Generator().manual_seed(0))
    assert loss() < 0.5 * start


def test_adaptive_radius_is_zero_for_one_client_and_positive_for_heterogeneous_ones():
    model, sets = tiny(), client_sets()
    g = torch.Generator().manual_seed(0)
    # One client: S_k = S and full batches, so both updates are the same.
    assert adaptive_radius(model, sets[:1], steps=5, lr=0.1, batch=64, generator=g) < 1e-5
    r = adaptive_radius(model, sets, steps=5, lr=0.1, batch=64, generator=g)
    assert r > 1e-3 and math.isfinite(r)


@pytest.mark.parametrize("method", ["feddualmatch", "feddm"])
def test_server_update_trains_the_model_and_returns_the_next_radius(method):
    model, sets = tiny(), client_sets()
    before = params(model).clone()
    cfg = replace(ServerConfig.preset(method), finetune_epochs=2, match_iterations=1, radius_steps=2)
    radius = server_update(model, sets, cfg, torch.Generator().manual_seed(0))
    assert not torch.equal(params(model), before)
    assert radius == 5.0 if method == "feddm" else (radius > 0 and math.isfinite(radius))

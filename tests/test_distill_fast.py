"""The fast distillation paths compute what the straightforward ones do (issue 13 §3).

Each fast path is checked against a plain reference written out here: the client loop that
deep-copies a sampled model per iteration and sums MMDs class by class, the per-group server
loop, and the ConvNet's own ``layer_outputs``.
"""
from __future__ import annotations

import copy
import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from frd.classification.distillation.client import (
    ClientData,
    DistillConfig,
    SyntheticSet,
    _dense_conv,
    _ErrorBalls,
    _row_major,
    convnet_layer_outputs,
    distill,
    distill_clients,
    distribution_matching_loss,
    init_synthetic,
    matched_layers,
    sample_model_on_error_ball,
    sgd_step,
)
from frd.classification.distillation.dp import DPConfig
from frd.classification.distillation.server import (
    _sgd,
    _shuffled_batches,
    _trained_copies,
    batched_gradient_distance,
    class_gradients,
    gradient_distance,
    gradient_match,
    group_gradients,
    union,
)
from frd.classification.models import ConvNet
from tests.test_distill import client_sets, real_data, tiny


def reference_distill(model: nn.Module, images, labels, config: DistillConfig, radius: float,
                      generator: torch.Generator) -> SyntheticSet:
    """The original client loop: a deep copy per iteration, one MMD per class and layer."""
    classes = tuple(int(c) for c in torch.unique(labels))
    real_by_class = [images[labels == c] for c in classes]
    syn = init_synthetic(real_by_class, config.ipc, config.init, generator).requires_grad_(True)
    optimizer = torch.optim.SGD([syn], lr=config.image_lr, momentum=config.image_momentum)
    with torch.no_grad():
        num_layers = len(copy.deepcopy(model).eval().layer_outputs(images[:1]))
    for it in range(config.iterations):
        sampled = sample_model_on_error_ball(model, radius, generator).eval()
        real = [x[torch.randperm(x.shape[0], generator=generator)[:config.real_batch]] for x in real_by_class]
        layers = matched_layers(config.matching, num_layers, it, config.iterations)
        loss = distribution_matching_loss(sampled, real, list(syn.split(config.ipc)), layers)
        (syn.grad,) = torch.autograd.grad(loss, syn)
        optimizer.step()
    return SyntheticSet(syn.detach(), classes)


@pytest.mark.parametrize("matching, init", [("layerwise", "noise"), ("last", "real")])
@pytest.mark.parametrize("model", ["tiny", "convnet"])
def test_distill_matches_the_per_class_reference_loop(matching, init, model):
    x, y = real_data(12)
    x, y = x[:30], y[:30]  # classes of 12, 12 and 6 images: equal and unequal real batches
    net = tiny() if model == "tiny" else ConvNet((1, 8, 8), 3, width=4)
    cfg = DistillConfig(ipc=2, iterations=6, real_batch=8, matching=matching, init=init)
    fast = distill(net, x, y, cfg, 2.0, torch.Generator().manual_seed(1))
    slow = reference_distill(net, x, y, cfg, 2.0, torch.Generator().manual_seed(1))
    assert fast.classes == slow.classes
    torch.testing.assert_close(fast.images, slow.images, rtol=1e-4, atol=1e-5)


def test_channels_last_strided_inputs_give_the_same_result():
    x, y = real_data(6)
    odd = torch.empty_strided(x.shape, (64, 1, 8, 1)).copy_(x)  # one channel: NCHW- and NHWC-contiguous, as the pools are
    assert odd.stride() != x.stride() and torch.equal(odd, x)
    assert _row_major(odd).stride() == x.stride()
    cfg = DistillConfig(ipc=1, iterations=3)
    a = distill(tiny(), x, y, cfg, 1.0, torch.Generator().manual_seed(0))
    b = distill(tiny(), odd, y, cfg, 1.0, torch.Generator().manual_seed(0))
    torch.testing.assert_close(a.images, b.images)


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("shape", [(1, 8, 8), (1, 12, 12), (3, 9, 9)])
def test_fast_convnet_forward_equals_layer_outputs_with_gradients(shape, fused):
    torch.manual_seed(0)
    model = ConvNet(shape, 5, width=4)
    x = torch.randn(3, *shape, requires_grad=True)
    reference, fast = model.layer_outputs(x), convnet_layer_outputs(model, x, fused)
    for a, b in zip(reference, fast):
        torch.testing.assert_close(a, b)
    weights = [torch.randn_like(t) for t in reference]
    inputs = [x, *model.parameters()]
    g_ref = torch.autograd.grad(sum((w * t).sum() for w, t in zip(weights, reference)), inputs)
    g_fast = torch.autograd.grad(sum((w * t).sum() for w, t in zip(weights, fast)), inputs)
    for a, b in zip(g_ref, g_fast):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("model", ["tiny", "convnet"])
def test_group_gradients_and_distance_equal_the_per_group_loop(model):
    net = tiny() if model == "tiny" else ConvNet((1, 8, 8), 3, width=4)
    sets = client_sets()
    groups = torch.cat([s.images for s in sets]).unflatten(0, (5, 2))
    labels = [c for s in sets for c in s.classes]
    batched = group_gradients(net, groups, labels)
    loop = [class_gradients(net, x, c) for x, c in zip(groups, labels)]
    for j, g in enumerate(batched):
        torch.testing.assert_close(g, torch.stack([grads[j] for grads in loop]), rtol=1e-4, atol=1e-6)
    target = [class_gradients(net, groups[0], 0)] * len(labels)
    stacked = [torch.stack([t[j] for t in target]) for j in range(len(batched))]
    expected = sum(gradient_distance(grads, t) for grads, t in zip(loop, target))
    torch.testing.assert_close(batched_gradient_distance(batched, stacked), expected)


def reference_gradient_match(model, sets, iterations, lr, generator, momentum=0.5, model_steps=1, model_lr=0.01,
                             batch=256):
    """The original server loop: one double-backward pass per (client, class) group."""
    images, labels = union(sets)
    work = copy.deepcopy(model).train()
    synthetic = [s.images.clone().requires_grad_(True) for s in sets]
    optimizer = torch.optim.SGD(synthetic, lr=lr, momentum=momentum)
    batches = _shuffled_batches(images.shape[0], batch, generator)
    classes = sorted({c for s in sets for c in s.classes})
    for _ in range(iterations):
        targets = {c: [g.detach() for g in class_gradients(work, images[labels == c], c)] for c in classes}
        loss = sum(gradient_distance(class_gradients(work, x, c, create_graph=True), targets[c])
                   for s, syn in zip(sets, synthetic) for c, x in zip(s.classes, syn.split(s.ipc)))
        for syn, grad in zip(synthetic, torch.autograd.grad(loss, synthetic)):
            syn.grad = grad
        optimizer.step()
        _sgd(work, images, labels, itertools.islice(batches, model_steps), model_lr)
    return [SyntheticSet(syn.detach(), s.classes) for s, syn in zip(sets, synthetic)]


def test_gradient_match_equals_the_per_group_reference():
    model, sets = tiny(), client_sets()
    fast = gradient_match(model, sets, 3, 0.1, torch.Generator().manual_seed(0), model_steps=2, batch=4)
    slow = reference_gradient_match(model, sets, 3, 0.1, torch.Generator().manual_seed(0), model_steps=2, batch=4)
    for a, b in zip(fast, slow):
        assert a.classes == b.classes
        torch.testing.assert_close(a.images, b.images, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("side", [(2, 2), (1, 1), (1, 2), (2, 1)])
def test_small_maps_convolve_as_one_matrix_product(side):
    """Every tap inside the map (2×2) and the zero blocks where taps fall outside (1×1, 1×2, 2×1)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, *side, generator=g).contiguous(memory_format=torch.channels_last).requires_grad_()
    weight = torch.randn(4, 5, 3, 3, generator=g, requires_grad=True)
    bias = torch.randn(4, generator=g, requires_grad=True)
    expected, dense = F.conv2d(x, weight, bias, padding=1), _dense_conv(x, weight, bias)
    assert dense.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(dense, expected)
    upstream = torch.randn_like(expected)
    for a, b in zip(torch.autograd.grad(dense, (x, weight, bias), upstream),
                    torch.autograd.grad(expected, (x, weight, bias), upstream)):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_error_balls_draw_the_weights_of_sample_model_on_error_ball():
    """Each client's generator draws as sample_model_on_error_ball's does, with the same weights
    (the norm's float64 sum runs in another order: to rounding); the centre models are left as
    they were."""
    models = [ConvNet((1, 8, 8), 3, width=4) for _ in range(2)]
    before = [[p.clone() for p in m.parameters()] for m in models]
    balls = _ErrorBalls(models, [2.5, 0.5], [torch.Generator().manual_seed(3), torch.Generator().manual_seed(4)])
    references = [torch.Generator().manual_seed(3), torch.Generator().manual_seed(4)]
    for _ in range(3):
        balls.draw()
        for model, drawn, radius, reference in zip(models, balls.models, [2.5, 0.5], references):
            expected = sample_model_on_error_ball(model, radius, reference)
            for a, b in zip(drawn.parameters(), expected.parameters()):
                torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
        for k, drawn in enumerate(balls.models):  # the stacked views are the working models' weights
            assert all(torch.equal(s[k], p) for s, p in zip(balls.stacked, drawn.parameters()))
    assert all(torch.equal(a, b) for m, b_ in zip(models, before) for a, b in zip(m.parameters(), b_))


def _clients(shape: tuple[int, int, int], model: str) -> list[ClientData]:
    """Three clients with 3, 1 and 2 classes (real batches of unequal size) and their own models."""
    g = torch.Generator().manual_seed(7)
    out = []
    for k, classes in enumerate([(0, 1, 2), (1,), (0, 2)]):
        labels = torch.tensor(classes).repeat_interleave(torch.tensor([9, 5, 7][:len(classes)]))
        images = torch.randn(labels.shape[0], *shape, generator=g)
        torch.manual_seed(k)
        net = tiny(k) if model == "tiny" else ConvNet(shape, 3, width=4)
        out.append(ClientData(net, images, labels, [2.0, 0.5, 1.0][k], torch.Generator().manual_seed(10 + k)))
    return out


@pytest.mark.parametrize("shape, model", [((1, 8, 8), "convnet"), ((1, 12, 12), "convnet"), ((3, 8, 8), "convnet"),
                                          ((1, 8, 8), "tiny")])
@pytest.mark.parametrize("matching, init", [("layerwise", "noise"), ("last", "real")])
def test_clients_distilled_together_get_the_bits_they_get_alone(shape, model, matching, init):
    """Digits' 8×8 (first block, oneDNN, one-product 2×2), 12×12 (an odd 3×3 last block: PyTorch's
    norm per client), three channels, and a model without the grouped pass."""
    cfg = DistillConfig(ipc=2, iterations=4, real_batch=6, matching=matching, init=init)
    together = distill_clients(_clients(shape, model), cfg)
    alone = [distill_clients([c], cfg)[0] for c in _clients(shape, model)]
    for a, b in zip(together, alone):
        assert a.classes == b.classes
        assert torch.equal(a.images, b.images)


def test_clients_together_with_dp_get_the_bits_they_get_alone():
    cfg = DistillConfig(ipc=1, iterations=3, real_batch=4, dp=DPConfig(clip_norm=0.5, noise=1.0))
    together = distill_clients(_clients((1, 8, 8), "convnet"), cfg)
    alone = [distill(c.model, c.images, c.labels, cfg, c.radius, c.generator) for c in _clients((1, 8, 8), "convnet")]
    assert all(torch.equal(a.images, b.images) for a, b in zip(together, alone))


def test_clients_distilled_together_need_one_architecture():
    clients = _clients((1, 8, 8), "convnet")
    clients[1] = ClientData(ConvNet((1, 8, 8), 3, width=6), clients[1].images, clients[1].labels, 1.0,
                            clients[1].generator)
    with pytest.raises(ValueError, match="one architecture"):
        distill_clients(clients, DistillConfig(ipc=1, iterations=1))


@pytest.mark.parametrize("momentum, weight_decay", [(0.5, 0.0), (0.9, 5e-4), (0.0, 0.1)])
def test_sgd_step_is_torchs_sgd(momentum, weight_decay):
    g = torch.Generator().manual_seed(0)
    p = torch.randn(37, generator=g)
    grads = [torch.randn(37, generator=g) for _ in range(3)]
    reference = p.clone().requires_grad_()
    optimizer = torch.optim.SGD([reference], lr=0.7, momentum=momentum, weight_decay=weight_decay)
    buf = torch.empty(37)
    for i, grad in enumerate(grads):
        reference.grad = grad
        optimizer.step()
        sgd_step(p.numpy(), grad.numpy(), buf.numpy(), np.float32(0.7), np.float32(momentum),
                 np.float32(weight_decay), i == 0)
    torch.testing.assert_close(p, reference.detach(), rtol=1e-6, atol=1e-6)


def test_server_sgd_equals_torchs_optimizer():
    """The flat-buffer loop against ``torch.optim.SGD`` on the same batches, to float32 rounding."""
    x, y = real_data(12)
    model = ConvNet((1, 8, 8), 3, width=4)
    reference = copy.deepcopy(model)
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    batches = [torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(i))[:8] for i in range(4)]
    for idx in batches:
        optimizer.zero_grad()
        F.cross_entropy(reference(x[idx]), y[idx]).backward()
        optimizer.step()
    _sgd(model, x, y, iter(batches), 0.05, 0.9, 5e-4)
    for a, b in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_radius_copies_trained_together_equal_copies_trained_one_by_one():
    """The grouped steps of ``_trained_copies`` against ``_sgd`` on each copy, with batches of
    unequal size (the union's 8 against a client's 5 then 3)."""
    model = ConvNet((1, 8, 8), 3, width=4)
    g = torch.Generator().manual_seed(2)
    data = [(torch.randn(n, 1, 8, 8, generator=g), torch.randint(0, 3, (n,), generator=g)) for n in (16, 8, 5)]
    batches = [list(itertools.islice(_shuffled_batches(x.shape[0], 8, g), 3)) for x, _ in data]
    together = _trained_copies(model, data, batches, 0.1)
    for (x, y), own, row in zip(data, batches, together):
        alone = copy.deepcopy(model)
        _sgd(alone, x, y, iter(own), 0.1)
        torch.testing.assert_close(row, torch.cat([p.detach().reshape(-1) for p in alone.parameters()]),
                                   rtol=1e-5, atol=1e-6)
    assert not torch.equal(together[0], together[1])

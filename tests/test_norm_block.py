"""The fused instance norm → ReLU → 2×2 average pool (issue 13 §3) against PyTorch's operators."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from frd.classification.distillation.norm_block import norm_relu_pool


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.avg_pool2d(F.relu(F.group_norm(x, x.shape[1], weight, bias, 1e-5)), 2)


def inputs(n: int, c: int, h: int, w: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(n, c, h, w, generator=g) * 3 + 1).requires_grad_()
    return x, torch.randn(c, generator=g).requires_grad_(), torch.randn(c, generator=g).requires_grad_()


@pytest.mark.parametrize("shape", [(5, 3, 8, 8), (4, 32, 4, 4), (3, 8, 2, 2), (2, 5, 6, 4)])
def test_values_and_gradients_equal_pytorchs_operators(shape):
    x, weight, bias = inputs(*shape)
    expected, fused = reference(x, weight, bias), norm_relu_pool(x, weight, bias, 1e-5)
    assert fused.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(fused, expected, rtol=1e-5, atol=1e-6)
    upstream = torch.randn_like(expected)
    for a, b in zip(torch.autograd.grad(fused, (x, weight, bias), upstream),
                    torch.autograd.grad(expected, (x, weight, bias), upstream)):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_hand_computed_image():
    """One channel of 2×2, γ = 2, β = 0.5: values −1, 1, 3, 5 (mean 2, σ² = 5) normalise to
    ±3/√5, ±1/√5; after γ, β and the ReLU only 2·1/√5 + 0.5 and 2·3/√5 + 0.5 stay; their
    average over four is the output."""
    x = torch.tensor([[[[-1.0, 1.0], [3.0, 5.0]]]])
    out = norm_relu_pool(x, torch.tensor([2.0]), torch.tensor([0.5]), 0.0)
    expected = (2 / 5 ** 0.5 + 0.5 + 6 / 5 ** 0.5 + 0.5) / 4
    assert out.item() == pytest.approx(expected, rel=1e-6)


def test_an_image_gets_the_same_bits_alone_as_in_a_batch():
    x, weight, bias = inputs(16, 8, 8, 8)
    upstream = torch.randn(16, 8, 4, 4)
    batch = norm_relu_pool(x, weight, bias, 1e-5)
    (dx_batch,) = torch.autograd.grad(batch, x, upstream)
    alone = norm_relu_pool(x[5:6], weight, bias, 1e-5)
    (dx_alone,) = torch.autograd.grad(alone, x, upstream[5:6])
    assert torch.equal(alone, batch[5:6])
    assert torch.equal(dx_alone[5], dx_batch[5])


def test_second_derivatives_are_refused():
    x, weight, bias = inputs(2, 3, 4, 4)
    with pytest.raises(RuntimeError, match="first derivatives only"):
        torch.autograd.grad(norm_relu_pool(x, weight, bias, 1e-5).sum(), weight, create_graph=True)


def test_the_benchmarks_unfused_switch_routes_every_convnet_pass_through_pytorch_and_restores():
    import frd.classification.distillation.server as server
    from benchmarks.distill_parts import unfused
    from frd.classification.distillation.server import _logits as server_logits
    from frd.classification.distillation.server import class_gradients
    from frd.classification.models import ConvNet

    model = ConvNet((1, 8, 8), 3, width=4)
    images = torch.randn(4, 1, 8, 8)

    def second_derivative() -> torch.Tensor:
        (grad, *_) = torch.autograd.grad(
            F.cross_entropy(server_logits(model, images), torch.zeros(4, dtype=torch.long)),
            list(model.parameters()), create_graph=True)
        return torch.autograd.grad(grad.sum(), next(model.parameters()))[0]

    with unfused():
        assert torch.isfinite(second_derivative()).all()
        assert server.fused_plan(model, (1, 8, 8)) is None  # fine-tuning's SGD back on autograd
    with pytest.raises(RuntimeError, match="first derivatives only"):
        second_derivative()
    assert server.fused_plan(model, (1, 8, 8)) == ["first"] * 3  # width 4: every block the first block's kernel
    assert len(class_gradients(model, images, 0, create_graph=True)) == 4  # matching's path stays unfused



def test_the_kernels_compile_with_numbas_noalias_flag():
    """The fused kernels' speed rests on numba's noalias flag (``norm_block._DistinctArrays``): they
    use that pipeline, and a function compiled with it carries the flag."""
    from numba import njit

    from frd.classification.distillation import first_block, norm_block

    for kernel in (norm_block.images_forward, first_block.images_forward):
        assert kernel._compiler.pipeline_class is norm_block.KERNEL["pipeline_class"]
    probe = njit(**{**norm_block.KERNEL, "cache": False})(lambda a, b: a + b)
    probe(np.ones(2), np.ones(2))
    assert [result.fndesc.noalias for result in probe.overloads.values()] == [True]

"""The server's hand-walked ConvNet gradients are autograd's, bit for bit, and the tiny-map
convolution matrix is the convolution (issue 13 §3)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from frd.classification.distillation.convnet_grads import ConvNetGradients, fused_plan
from frd.classification.distillation.dense_conv import dense_matrix, dense_matrix_adjoint
from frd.classification.distillation.server import _logits
from frd.classification.models import MLP, ConvNet


def random_convnet(shape, width: int, depth: int) -> ConvNet:
    torch.manual_seed(0)
    model = ConvNet(shape, 10, width=width, depth=depth)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)
    return model


@pytest.mark.parametrize("shape, width, depth, plan", [
    ((1, 8, 8), 32, 3, ["first", "conv", "dense"]),  # the digits ConvNet
    ((1, 8, 8), 32, 2, ["first", "conv"]),
    ((3, 16, 16), 8, 3, ["first", "conv", "conv"]),
    ((1, 4, 4), 16, 2, ["first", "dense"]),
    ((2, 4, 4), 3, 2, ["first", "first"]),  # narrow: the first block's kernel again
])
def test_gradients_equal_autograds_bit_for_bit(shape, width, depth, plan):
    model = random_convnet(shape, width, depth)
    assert fused_plan(model, shape) == plan
    params = list(model.parameters())
    for p in params:
        p.grad = torch.full_like(p, float("nan"))  # every entry must be written
    walked = ConvNetGradients(model, plan)
    for n in (37, 5, 37):  # buffers per batch size, made once and reused
        x, y = torch.randn(n, *shape), torch.randint(0, 10, (n,))
        expected = torch.autograd.grad(F.cross_entropy(_logits(model, x), y), params)
        walked(x, y)
        assert all(torch.equal(p.grad, e) for p, e in zip(params, expected))
        with torch.no_grad():
            for p in params:
                p.add_(0.01)  # the weights change in place between steps, as in SGD
    assert sorted(walked.buffers) == [(5, *shape), (37, *shape)]


def test_walked_gradients_need_gradient_buffers():
    with pytest.raises(ValueError, match="give every parameter one"):
        ConvNetGradients(random_convnet((1, 8, 8), 8, 2), ["first", "conv"])


def test_models_that_do_not_run_fused_keep_autograd():
    assert fused_plan(random_convnet((1, 28, 28), 8, 3), (1, 28, 28)) is None  # 7×7 third map
    assert fused_plan(random_convnet((1, 8, 8), 8, 3).double(), (1, 8, 8)) is None
    assert fused_plan(MLP((1, 8, 8), 10), (1, 8, 8)) is None


@pytest.mark.parametrize("side", [(2, 2), (1, 1), (1, 2), (2, 1)])
def test_dense_matrix_is_the_convolution_and_its_adjoint_the_weight_gradient(side):
    g = torch.Generator().manual_seed(0)
    h, w = side
    x = torch.randn(3, 5, h, w, generator=g)
    weight = torch.randn(2, 4, 5, 3, 3, generator=g)
    matrix = dense_matrix(weight, h, w)
    assert matrix.shape == (2, h * w * 5, h * w * 4)
    rows = x.permute(0, 2, 3, 1).reshape(3, -1)
    for k in range(2):
        conv = F.conv2d(x, weight[k], padding=1).permute(0, 2, 3, 1).reshape(3, -1)
        torch.testing.assert_close(rows @ matrix[k], conv)
    upstream = torch.randn(matrix.shape, generator=g)
    expected = torch.autograd.grad((dense_matrix(weight.requires_grad_(), h, w) * upstream).sum(), weight)[0]
    torch.testing.assert_close(dense_matrix_adjoint(upstream, h, w, 5), expected)


def test_dense_matrix_of_one_pixel_is_the_centre_tap():
    weight = torch.arange(2 * 3 * 9, dtype=torch.float32).view(1, 2, 3, 3, 3)
    assert torch.equal(dense_matrix(weight, 1, 1)[0], weight[0, :, :, 1, 1].t())
    grad = torch.ones(1, 3, 2)
    adjoint = dense_matrix_adjoint(grad, 1, 1, 3)
    assert adjoint[..., 1, 1].eq(1).all() and adjoint.sum() == 6


def test_dense_matrix_refuses_second_derivatives():
    weight = torch.randn(1, 2, 2, 3, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="first derivatives only"):
        torch.autograd.grad(dense_matrix(weight, 2, 2).square().sum(), weight, create_graph=True)

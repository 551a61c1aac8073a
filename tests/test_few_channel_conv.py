"""The first layer's convolution with its input gradient by matrix product + col2im (issue 13 §3)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from classification.few_channel_conv import few_channel_conv


@pytest.mark.parametrize("shape", [(4, 1, 8, 8), (3, 3, 5, 7), (2, 1, 1, 1), (2, 1, 9, 9), (2, 2, 12, 10)])
def test_values_and_gradients_equal_pytorchs_convolution(shape):
    """Maps up to IM2COL_MAP pixels go through im2col products, larger ones through oneDNN's forward."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=g).requires_grad_()
    weight = torch.randn(6, shape[1], 3, 3, generator=g, requires_grad=True)
    bias = torch.randn(6, generator=g, requires_grad=True)
    expected, ours = F.conv2d(x, weight, bias, padding=1), few_channel_conv(x, weight, bias)
    torch.testing.assert_close(ours, expected)
    upstream = torch.randn_like(expected)
    for a, b in zip(torch.autograd.grad(ours, (x, weight, bias), upstream),
                    torch.autograd.grad(expected, (x, weight, bias), upstream)):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_hand_computed_input_gradient():
    """One 2×2 image, one output channel, kernel k[a][b] = 3a + b + 1 (1..9), upstream 1 everywhere:
    input pixel (r, s) receives Σ of the kernel taps that see it from the outputs inside the map,
    i.e. the sum of k over the taps (a, b) with 0 ≤ r − a + 1 < 2 and 0 ≤ s − b + 1 < 2."""
    x = torch.zeros(1, 1, 2, 2, requires_grad=True)
    kernel = torch.arange(1.0, 10.0).view(1, 1, 3, 3)
    (dx,) = torch.autograd.grad(few_channel_conv(x, kernel, torch.zeros(1)).sum(), x)
    # (0,0): a, b in {0,1} → 1+2+4+5 = 12; (0,1): a in {0,1}, b in {1,2} → 2+3+5+6 = 16;
    # (1,0): a in {1,2}, b in {0,1} → 4+5+7+8 = 24; (1,1): a, b in {1,2} → 5+6+8+9 = 28
    assert dx.view(-1).tolist() == [12.0, 16.0, 24.0, 28.0]


def test_weight_only_gradient_skips_the_input():
    weight = torch.randn(4, 1, 3, 3, requires_grad=True)
    (dweight,) = torch.autograd.grad(few_channel_conv(torch.randn(2, 1, 4, 4), weight, torch.zeros(4)).sum(), weight)
    assert dweight.shape == weight.shape


def test_second_derivatives_are_refused():
    x = torch.randn(2, 1, 4, 4, requires_grad=True)
    weight = torch.randn(4, 1, 3, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="first derivatives only"):
        torch.autograd.grad(few_channel_conv(x, weight, torch.zeros(4)).sum(), x, create_graph=True)

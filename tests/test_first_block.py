"""The ConvNet's first block fused image by image (issue 13 §3) against PyTorch's operators."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from frd.classification.distillation.first_block import col2im_image, first_block, im2col_image


def reference(x, conv_weight, conv_bias, weight, bias):
    y = F.conv2d(x, conv_weight, conv_bias, padding=1)
    return F.avg_pool2d(F.relu(F.group_norm(y, y.shape[1], weight, bias, 1e-5)), 2)


def inputs(n: int, c_in: int, side: tuple[int, int], channels: int = 8, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c_in, *side, generator=g).requires_grad_()
    params = (torch.randn(channels, c_in, 3, 3, generator=g), torch.randn(channels, generator=g),
              torch.randn(channels, generator=g), torch.randn(channels, generator=g))
    return x, *(p.requires_grad_() for p in params)


@pytest.mark.parametrize("c_in, side", [(1, (8, 8)), (3, (6, 4)), (1, (10, 10)), (2, (2, 2))])
def test_values_and_gradients_equal_pytorchs_operators(c_in, side):
    x, *params = inputs(5, c_in, side)
    expected, fused = reference(x, *params), first_block(x, *params, 1e-5)
    assert fused.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(fused, expected, rtol=1e-5, atol=1e-5)
    upstream = torch.randn_like(expected)
    for a, b in zip(torch.autograd.grad(fused, (x, *params), upstream),
                    torch.autograd.grad(expected, (x, *params), upstream)):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_without_an_input_gradient_the_parameters_still_get_theirs():
    x, *params = inputs(3, 1, (4, 4))
    grads = torch.autograd.grad(first_block(x.detach(), *params, 1e-5).sum(), params)
    expected = torch.autograd.grad(reference(x.detach(), *params).sum(), params)
    for a, b in zip(grads, expected):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_an_image_gets_the_same_bits_alone_as_in_a_batch():
    x, *params = inputs(16, 1, (8, 8))
    upstream = torch.randn(16, 8, 4, 4)
    batch = first_block(x, *params, 1e-5)
    (dx_batch,) = torch.autograd.grad(batch, x, upstream)
    alone = first_block(x[5:6], *params, 1e-5)
    (dx_alone,) = torch.autograd.grad(alone, x, upstream[5:6])
    assert torch.equal(alone, batch[5:6])
    assert torch.equal(dx_alone[5], dx_batch[5])


def test_second_derivatives_are_refused():
    x, *params = inputs(2, 1, (4, 4))
    with pytest.raises(RuntimeError, match="first derivatives only"):
        torch.autograd.grad(first_block(x, *params, 1e-5).sum(), params[0], create_graph=True)


def test_hand_computed_col2im():
    """One 2×2 image: output pixel p's column holds tap values 1..9 (tap = 3a + b, kernel row a,
    column b); input pixel (r, s) receives the taps that see it from outputs inside the map, i.e.
    those with 0 ≤ r − a + 1 < 2 and 0 ≤ s − b + 1 < 2, once per such output: (0, 0) gets taps
    (a, b) in {0, 1}² = 1 + 2 + 4 + 5 = 12; (0, 1): a in {0, 1}, b in {1, 2} → 2 + 3 + 5 + 6 = 16;
    (1, 0): 4 + 5 + 7 + 8 = 24; (1, 1): 5 + 6 + 8 + 9 = 28."""
    back = np.tile(np.arange(1.0, 10.0, dtype=np.float32)[:, None], (1, 4))
    dx = np.empty((4, 1), np.float32)
    col2im_image(back, 2, np.empty((16, 1), np.float32), dx)
    assert dx.ravel().tolist() == [12.0, 16.0, 24.0, 28.0]


def test_hand_computed_im2col():
    """A 2×2 image 1, 2 / 3, 4: output pixel (0, 0) sees zeros above and left, then 1, 2 / 3, 4 in
    taps 4, 5, 7, 8; column p of tap t is the pixel at p + (a − 1, b − 1)."""
    cols = np.full((10, 4), -1.0, np.float32)
    im2col_image(np.array([[1.0], [2.0], [3.0], [4.0]], np.float32), 2, np.zeros((16, 1), np.float32), cols)
    assert cols[:, 0].tolist() == [0, 0, 0, 0, 1, 2, 0, 3, 4, -1]  # the ones row is the caller's
    assert cols[:, 3].tolist() == [1, 2, 0, 3, 4, 0, 0, 0, 0, -1]

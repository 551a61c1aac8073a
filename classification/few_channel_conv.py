"""A 3×3 "same" convolution whose input has few channels, as matrix products.

The ConvNet's first layer reads one channel (three on CIFAR): its convolution has only 9·Cin
products per output, a shape on which oneDNN runs at 8–13 GMAC/s (batch 256 of 1×8×8 into 32
channels: forward 340–570 µs), and its input gradient costs 2–3.5× the forward. On small maps
(``IM2COL_MAP``) the convolution is one matrix product over "im2col" columns, [N·H·W, Cin·9 + 1]
· [Cin·9 + 1, C] (the last column is ones, the last row the bias), written by a numba pass; the
channels-last result is the product itself, and the weight and bias gradient is colsᵀ · dY.
Larger maps keep oneDNN's forward and weight gradient. On every map the input gradient (which
the clients' matching needs for their synthetic images) is dY · W, whose rows each hold what
one output pixel sends back to the nine input pixels under its kernel, summed up image by image
by a numba pass ("col2im"): batch 256 of 1×28×28, forward + backward 21.9 → 15.6 ms.
First derivatives only, like :mod:`classification.norm_block`.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from numba import njit

from classification.norm_block import KERNEL, channels_last, slabs

FEW_CHANNELS = 4
"""Inputs with at most this many channels take this path (oneDNN's input gradient is efficient
on the 32-channel layers)."""
IM2COL_MAP = 64
"""Largest H·W whose forward and weight gradient run as matrix products (batch 256, 1 channel,
CPU µs: 8×8 forward 393 → 272, forward + weight gradient 839 → 576; 28×28 forward 2,092 →
3,330, so larger maps keep oneDNN's)."""


@njit(**KERNEL)
def im2col_image(x, width, cols):
    """cols[p, ci·9 + tap] = the input pixel under ``tap`` of output pixel p (0 outside the map:
    zero padding), for one image x [H·W, Cin] channels last; cols[p, Cin·9] = 1 (the bias)."""
    height = x.shape[0] // width
    channels = x.shape[1]
    zero, one = np.float32(0.0), np.float32(1.0)
    for i in range(height):
        for j in range(width):
            row = cols[i * width + j]
            for ci in range(channels):
                for di in range(3):
                    r = i + di - 1
                    for dj in range(3):
                        s = j + dj - 1
                        inside = 0 <= r < height and 0 <= s < width
                        row[ci * 9 + di * 3 + dj] = x[r * width + s, ci] if inside else zero
            row[channels * 9] = one


@njit(**KERNEL)
def col2im_image(back, width, dx):
    """dx[pixel, ci] = Σ over the output pixels p whose 3×3 window holds that pixel of
    back[p, ci·9 + tap], for one image (channels last; taps outside the map are dropped)."""
    height = back.shape[0] // width
    dx[...] = 0.0
    for i in range(height):
        for j in range(width):
            p = i * width + j
            for di in range(3):
                r = i + di - 1
                if 0 <= r < height:
                    for dj in range(3):
                        s = j + dj - 1
                        if 0 <= s < width:
                            for ci in range(dx.shape[1]):
                                dx[r * width + s, ci] += back[p, ci * 9 + di * 3 + dj]


@njit(**KERNEL)
def _im2col(x, width, cols):
    for n in range(x.shape[0]):
        im2col_image(x[n], width, cols[n])


@njit(**KERNEL)
def _col2im(back, width, dx):
    for n in range(back.shape[0]):
        col2im_image(back[n], width, dx[n])


class FewChannelConv(torch.autograd.Function):
    """``F.conv2d(x, weight, bias, padding=1)`` for a 3×3 kernel: matrix products over im2col
    columns on small maps, oneDNN's forward and weight gradient on larger ones; the input
    gradient by :func:`_col2im` on either."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        n, c_in, h, w = x.shape
        c_out = weight.shape[0]
        ctx.shape, ctx.small = x.shape, h * w <= IM2COL_MAP
        if not ctx.small:
            ctx.save_for_backward(x, weight)
            return F.conv2d(x, weight, bias, 1, 1)
        cols = torch.empty(n, h * w, c_in * 9 + 1)
        _im2col(slabs(channels_last(x)), w, cols.numpy())
        kernel = torch.cat([weight.detach().reshape(c_out, c_in * 9), bias.detach().unsqueeze(1)], 1)
        y = torch.mm(cols.view(n * h * w, -1), kernel.t())
        ctx.save_for_backward(cols, weight)
        return y.view(n, h, w, c_out).permute(0, 3, 1, 2)

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        if torch.is_grad_enabled():  # create_graph: the gradient would silently lose its own derivative
            raise RuntimeError("few_channel_conv has first derivatives only; differentiate twice through "
                               "convnet_layer_outputs(..., fused=False)")
        saved, weight = ctx.saved_tensors
        n, c_in, h, w = ctx.shape
        c_out = weight.shape[0]
        rows = dy.permute(0, 2, 3, 1).reshape(n * h * w, c_out)  # a copy unless dy is channels last
        if ctx.small:
            grads = torch.mm(saved.view(n * h * w, -1).t(), rows)  # [Cin·9 + 1, C]: weights, then the bias
            dweight, dbias = grads[:-1].t().reshape(weight.shape), grads[-1].clone()
        else:
            _, dweight, dbias = torch.ops.aten.convolution_backward(
                dy, saved, weight, [c_out], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [False, True, True])
        dx = None
        if ctx.needs_input_grad[0]:
            back = torch.mm(rows, weight.detach().reshape(c_out, c_in * 9))
            dx = torch.empty(ctx.shape, memory_format=torch.channels_last)
            _col2im(back.view(n, h * w, -1).numpy(), w, slabs(dx))
        return dx, dweight, dbias


def few_channel_conv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """The convolution on a float32 CPU batch; same values as ``F.conv2d(x, weight, bias, padding=1)``."""
    return FewChannelConv.apply(x, weight, bias)

"""The ConvNet's first block whole, image by image: convolution → instance norm → ReLU → 2×2 pool.

The first block's convolution output is the network's largest tensor ([256, 32, 8, 8], 2 MB, on
a fine-tuning batch of digits), and so is its gradient. Built layer by layer, each is a fresh
allocation that the next layer reads back from L2 or memory, and glibc hands such buffers out as
fresh pages, page-faulted in on first touch (a fine-tuning step ran 15 % faster with
``MALLOC_MMAP_THRESHOLD_`` raised). Here one numba pass per image does the block in a few KB of
scratch: the image's im2col columns (:func:`im2col_image`, the bias as a column of ones), one
small matrix product [H·W, Cin·9 + 1] · [Cin·9 + 1, C] for the convolution, then the fused norm block
(:func:`classification.norm_block.norm_pool_image`). The backward recomputes the image's
convolution instead of keeping it, runs the norm block's backward, and adds the image's share of
the kernel gradient (colsᵀ · dY) and, when asked, its input gradient (dY · W, then col2im).

Same math as ``norm_relu_pool(conv2d(x, w, b, padding=1), γ, β, eps)`` to float32 rounding
(tested); an image's output does not depend on its batch-mates. First derivatives only.
"""
from __future__ import annotations

import numpy as np
import torch
from numba import njit

from classification.norm_block import (
    KERNEL,
    channels_last,
    first_order_upstream,
    norm_pool_image,
    norm_pool_image_backward,
    slabs,
)

FEW_CHANNELS = 4
"""Largest input channel count the block takes (the ConvNet's first layer: 1 on digits and MNIST, 3
on CIFAR); wider inputs are oneDNN's home ground."""


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
def _forward(x, kernel, gamma, beta, width, eps, out, mean, rstd):
    """out[n] = pool(relu(norm(conv(x[n])))) for x [N, H·W, Cin]; ``kernel`` is [Cin·9 + 1, C]
    (taps, then the bias); saves every (image, channel)'s mean and 1/σ."""
    size, channels = x.shape[1], kernel.shape[1]
    cols, y = np.empty((size, kernel.shape[0]), np.float32), np.empty((size, channels), np.float32)
    scale, shift = np.empty(channels, np.float32), np.empty(channels, np.float32)
    for n in range(x.shape[0]):
        im2col_image(x[n], width, cols)
        np.dot(cols, kernel, y)
        norm_pool_image(y, gamma, beta, width, eps, out[n], mean[n], rstd[n], scale, shift)


@njit(**KERNEL)
def _backward(x, kernel, gamma, beta, width, mean, rstd, dout, dx, dkernel, dgamma, dbeta):
    """Gradients of Σ dout·block(x): the kernel's (taps and bias, [Cin·9 + 1, C]), γ's and β's
    summed over images; x's into dx when it has rows."""
    size, channels = x.shape[1], kernel.shape[1]
    taps = np.ascontiguousarray(kernel[:-1].T)  # [C, Cin·9]
    cols, y = np.empty((size, kernel.shape[0]), np.float32), np.empty((size, channels), np.float32)
    dy, back = np.empty((size, channels), np.float32), np.empty((size, taps.shape[1]), np.float32)
    part = np.empty(dkernel.shape, np.float32)
    scale, shift = np.empty(channels, np.float32), np.empty(channels, np.float32)
    sum_dz, sum_dzx = np.empty(channels, np.float32), np.empty(channels, np.float32)
    dkernel[...] = 0.0
    dgamma[:] = 0.0
    dbeta[:] = 0.0
    for n in range(x.shape[0]):
        im2col_image(x[n], width, cols)
        np.dot(cols, kernel, y)
        norm_pool_image_backward(y, gamma, beta, width, mean[n], rstd[n], dout[n], dy, dgamma, dbeta,
                                 scale, shift, sum_dz, sum_dzx)
        np.dot(cols.T, dy, part)
        dkernel += part
        if dx.shape[0]:
            np.dot(dy, taps, back)
            col2im_image(back, width, dx[n])


class FirstBlock(torch.autograd.Function):
    """``norm_relu_pool(conv2d(x, w, b, padding=1), γ, β, eps)`` for a 3×3 kernel, image by image."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, conv_weight: torch.Tensor, conv_bias: torch.Tensor, weight: torch.Tensor,
                bias: torch.Tensor, eps: float) -> torch.Tensor:
        n, _, h, w = x.shape
        channels = conv_weight.shape[0]
        x = channels_last(x)
        kernel = _kernel(conv_weight, conv_bias)
        out = torch.empty(n, channels, h // 2, w // 2, memory_format=torch.channels_last)
        mean, rstd = torch.empty(n, channels), torch.empty(n, channels)
        _forward(slabs(x), kernel.numpy(), weight.detach().numpy(), bias.detach().numpy(), w, eps, slabs(out),
                 mean.numpy(), rstd.numpy())
        ctx.save_for_backward(x, kernel, weight, bias, mean, rstd)
        ctx.conv_shape = conv_weight.shape
        return out

    @staticmethod
    def backward(ctx, dout: torch.Tensor):
        dout = first_order_upstream("first_block", dout)
        x, kernel, weight, bias, mean, rstd = ctx.saved_tensors
        dx = torch.empty(x.shape, memory_format=torch.channels_last) if ctx.needs_input_grad[0] else None
        dkernel, dweight, dbias = torch.empty_like(kernel), torch.empty_like(weight), torch.empty_like(bias)
        _backward(slabs(x), kernel.numpy(), weight.detach().numpy(), bias.detach().numpy(), x.shape[3],
                  mean.numpy(), rstd.numpy(), slabs(dout), slabs(dx) if dx is not None else np.empty((0, 0, 0), np.float32),
                  dkernel.numpy(), dweight.numpy(), dbias.numpy())
        dconv_weight = dkernel[:-1].t().reshape(ctx.conv_shape)
        return dx, dconv_weight, dkernel[-1].clone(), dweight, dbias, None


def _kernel(conv_weight: torch.Tensor, conv_bias: torch.Tensor) -> torch.Tensor:
    """[Cin·9 + 1, C]: the taps of each output channel as a column, the bias as the last row."""
    c_out = conv_weight.shape[0]
    return torch.cat([conv_weight.detach().reshape(c_out, -1), conv_bias.detach().unsqueeze(1)], 1).t().contiguous()


def first_block(x: torch.Tensor, conv_weight: torch.Tensor, conv_bias: torch.Tensor, weight: torch.Tensor,
                bias: torch.Tensor, eps: float) -> torch.Tensor:
    """The block on a float32 CPU batch with even sides; the result is channels last."""
    return FirstBlock.apply(x, conv_weight, conv_bias, weight, bias, eps)

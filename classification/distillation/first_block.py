"""The ConvNet's first block whole, image by image: convolution → instance norm → ReLU → 2×2 pool.

The first block's convolution output is the network's largest tensor ([256, 32, 8, 8], 2 MB, on
a fine-tuning batch of digits), and so is its gradient. Built layer by layer, each is a fresh
allocation that the next layer reads back from L2 or memory, and glibc hands such buffers out as
fresh pages, page-faulted in on first touch (a fine-tuning step ran 15 % faster with
``MALLOC_MMAP_THRESHOLD_`` raised). Here one numba pass per image does the block in a few KB of
scratch: the image's im2col columns (:func:`im2col_image`, the bias as a column of ones), one
small matrix product [H·W, Cin·9 + 1] · [Cin·9 + 1, C] for the convolution, then the fused norm block
(:func:`frd.classification.distillation.norm_block.norm_pool_image`). The backward recomputes the image's
convolution instead of keeping it, runs the norm block's backward, and adds the image's share of
the kernel gradient (colsᵀ · dY) and, when asked, its input gradient (dY · W, then col2im).

Same math as ``norm_relu_pool(conv2d(x, w, b, padding=1), γ, β, eps)`` to float32 rounding
(tested); an image's output does not depend on its batch-mates. First derivatives only.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from frd.classification.distillation.norm_block import (
    KERNEL,
    channels_last,
    first_order_upstream,
    group_bounds,
    kernel_weights,
    norm_pool_image,
    norm_pool_image_backward,
    slabs,
    without_group_axis,
)
from frd.jit import compiled

NO_INPUT_GRADIENT = np.empty((0, 0, 0), np.float32)
"""What ``images_backward`` takes for the input gradient it is not asked for."""

FEW_CHANNELS = 4
"""Largest input channel count the block takes (the ConvNet's first layer: 1 on digits and MNIST, 3
on CIFAR); wider inputs are oneDNN's home ground."""


@compiled(**KERNEL)
def im2col_image(x, width, pad, cols):
    """cols[ci·9 + tap, p] = the input pixel under ``tap`` of output pixel p (0 outside the map:
    zero padding), for one image x [H·W, Cin] channels last: the columns transposed, one row per
    tap, so that each row is filled by contiguous copies. Row Cin·9 (the bias's ones) is the
    caller's. ``pad`` [(H + 2)·(W + 2), Cin] is scratch with a zero border: the image goes into
    its interior, so that every tap is a plain load."""
    height = x.shape[0] // width
    stride = width + 2
    channels = x.shape[1]
    for i in range(height):
        for j in range(width):
            for ci in range(channels):
                pad[(i + 1) * stride + j + 1, ci] = x[i * width + j, ci]
    for ci in range(channels):
        for di in range(3):
            for dj in range(3):
                row = cols[ci * 9 + di * 3 + dj]
                for i in range(height):
                    source = (i + di) * stride + dj
                    for j in range(width):
                        row[i * width + j] = pad[source + j, ci]


@compiled(**KERNEL)
def col2im_image(back, width, pad, dx):
    """dx[pixel, ci] = Σ over the output pixels p whose 3×3 window holds that pixel of
    back[ci·9 + tap, p] (transposed columns, as :func:`im2col_image` writes them), for one image
    channels last; taps outside the map are dropped. Summed tap by tap, then over p in order.
    ``pad`` [(H + 2)·(W + 2), Cin] is scratch: the taps land in it unchecked, and its interior is dx."""
    height = back.shape[1] // width
    stride = width + 2
    channels = dx.shape[1]
    pad[...] = 0.0
    for ci in range(channels):
        for di in range(3):
            for dj in range(3):
                row = back[ci * 9 + di * 3 + dj]
                for i in range(height):
                    target = (i + di) * stride + dj
                    for j in range(width):
                        pad[target + j, ci] += row[i * width + j]
    for i in range(height):
        for j in range(width):
            for ci in range(channels):
                dx[i * width + j, ci] = pad[(i + 1) * stride + j + 1, ci]


@compiled(**KERNEL)
def _columns(rows, size):
    """Scratch for :func:`im2col_image`'s transposed columns, its last row the bias's ones."""
    cols = np.empty((rows, size), np.float32)
    cols[rows - 1] = 1.0
    return cols


@compiled(**KERNEL)
def images_forward(x, kernel, gamma, beta, starts, width, eps, out, mean, rstd):
    """out[n] = pool(relu(norm(conv(x[n])))) for x [N, H·W, Cin]; images starts[k]:starts[k + 1]
    take group k's ``kernel[k]`` ([Cin·9 + 1, C]: taps, then the bias), γ[k] and β[k]; saves every
    (image, channel)'s mean and 1/σ."""
    for k in range(kernel.shape[0]):
        a, b = starts[k], starts[k + 1]
        _forward_group(x[a:b], kernel[k], gamma[k], beta[k], width, eps, out[a:b], mean[a:b], rstd[a:b])


@compiled(**KERNEL)
def _forward_group(x, kernel, gamma, beta, width, eps, out, mean, rstd):
    """``images_forward`` of images that share their weights (a function of its own, so that its
    arrays, being arguments, carry the ``noalias`` promise: as views inside ``images_forward`` they
    would not, and the norm block's loops ran ~7 % slower)."""
    size, channels = x.shape[1], kernel.shape[1]
    cols, y = _columns(kernel.shape[0], size), np.empty((size, channels), np.float32)
    pad = np.zeros(((size // width + 2) * (width + 2), x.shape[2]), np.float32)
    scale, shift = np.empty(channels, np.float32), np.empty(channels, np.float32)
    for n in range(x.shape[0]):
        im2col_image(x[n], width, pad, cols)
        np.dot(cols.T, kernel, y)
        norm_pool_image(y, gamma, beta, width, eps, out[n], mean[n], rstd[n], scale, shift)


@compiled(**KERNEL)
def images_backward(x, kernel, gamma, beta, starts, width, mean, rstd, dout, dx, dkernel, dgamma, dbeta):
    """Gradients of Σ dout·block(x): each group's kernel (taps and bias, [K, Cin·9 + 1, C]; none
    when ``dkernel`` is [K, 0, 0]), γ and β, summed over its images; x's into dx unless it is empty."""
    dkernel[...] = 0.0
    dgamma[...] = 0.0
    dbeta[...] = 0.0
    for k in range(kernel.shape[0]):
        a, b = starts[k], starts[k + 1]
        _backward_group(x[a:b], kernel[k], gamma[k], beta[k], width, mean[a:b], rstd[a:b], dout[a:b], dx[a:b],
                        dkernel[k], dgamma[k], dbeta[k])


@compiled(**KERNEL)
def _backward_group(x, kernel, gamma, beta, width, mean, rstd, dout, dx, dkernel, dgamma, dbeta):
    """``images_backward`` of images that share their weights, adding into dkernel (when it has rows),
    dgamma and dbeta (see ``_forward_group`` for why a function of its own)."""
    size, channels = x.shape[1], kernel.shape[1]
    cols, y = _columns(kernel.shape[0], size), np.empty((size, channels), np.float32)
    dy, back = np.empty((size, channels), np.float32), np.empty((kernel.shape[0] - 1, size), np.float32)
    part = np.empty(kernel.shape, np.float32)
    pad = np.zeros(((size // width + 2) * (width + 2), x.shape[2]), np.float32)
    dx_pad = np.empty_like(pad)
    scale, shift = np.empty(channels, np.float32), np.empty(channels, np.float32)
    sum_dz, sum_dzx = np.empty(channels, np.float32), np.empty(channels, np.float32)
    for n in range(x.shape[0]):
        im2col_image(x[n], width, pad, cols)
        np.dot(cols.T, kernel, y)
        norm_pool_image_backward(y, gamma, beta, width, mean[n], rstd[n], dout[n], dy, dgamma, dbeta,
                                 scale, shift, sum_dz, sum_dzx)
        if dkernel.shape[0]:
            np.dot(cols, dy, part)
            dkernel += part
        if dx.shape[0]:
            np.dot(kernel[:-1], dy.T, back)
            col2im_image(back, width, dx_pad, dx[n])


def first_block_forward(x: torch.Tensor, conv_weight: torch.Tensor, conv_bias: torch.Tensor, weight: torch.Tensor,
                        bias: torch.Tensor, eps: float, bounds: np.ndarray | None
                        ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...], np.ndarray]:
    """The block's output, the tensors its backward needs and the kernels' group boundaries
    (:class:`FirstBlock`'s forward, also called without autograd)."""
    n, _, h, w = x.shape
    x = channels_last(x)
    starts, (taps, tap_bias, gamma, beta) = kernel_weights(bounds, n, conv_weight, conv_bias, weight, bias)
    kernel = kernel_matrix(taps, tap_bias)
    channels = kernel.shape[2]
    out = torch.empty(n, channels, h // 2, w // 2, memory_format=torch.channels_last)
    mean, rstd = torch.empty(n, channels), torch.empty(n, channels)
    images_forward(slabs(x), kernel.numpy(), gamma.numpy(), beta.numpy(), starts, w, eps, slabs(out), mean.numpy(),
             rstd.numpy())
    return out, (x, kernel, gamma, beta, mean, rstd), starts


def first_block_backward(saved: Sequence[torch.Tensor], starts: np.ndarray, bounds: np.ndarray | None,
                         dout: torch.Tensor, input_grad: bool, kernel_grad: bool
                         ) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None, torch.Tensor, torch.Tensor]:
    """Gradients w.r.t. the input (if ``input_grad``), the convolution's weight and bias (if
    ``kernel_grad``), γ and β, from what :func:`first_block_forward` saved and a channels-last
    upstream gradient; None for those not asked."""
    x, kernel, gamma, beta, mean, rstd = saved
    dx = torch.empty(x.shape, memory_format=torch.channels_last) if input_grad else None
    dkernel = torch.empty(kernel.shape if kernel_grad else (kernel.shape[0], 0, 0))
    dgamma, dbeta = torch.empty(gamma.shape), torch.empty(beta.shape)
    images_backward(slabs(x), kernel.numpy(), gamma.numpy(), beta.numpy(), starts, x.shape[3], mean.numpy(),
              rstd.numpy(), slabs(dout), slabs(dx) if dx is not None else NO_INPUT_GRADIENT,
              dkernel.numpy(), dgamma.numpy(), dbeta.numpy())
    dweight, dbias = without_group_axis(bounds, dgamma, dbeta)
    if not kernel_grad:
        return dx, None, None, dweight, dbias
    taps_shape = (kernel.shape[0], kernel.shape[2], x.shape[1], 3, 3)
    dtaps, dtap_bias = without_group_axis(bounds, dkernel[:, :-1].transpose(1, 2).reshape(taps_shape),
                                          dkernel[:, -1].clone())
    return dx, dtaps, dtap_bias, dweight, dbias


class FirstBlock(torch.autograd.Function):
    """``norm_relu_pool(conv2d(x, w, b, padding=1), γ, β, eps)`` for a 3×3 kernel, image by image;
    with ``bounds`` (see :func:`frd.classification.distillation.norm_block.group_bounds`) every parameter has a
    leading group axis K, and images of group k take row k."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, conv_weight: torch.Tensor, conv_bias: torch.Tensor, weight: torch.Tensor,
                bias: torch.Tensor, eps: float, bounds: np.ndarray | None) -> torch.Tensor:
        out, saved, ctx.starts = first_block_forward(x, conv_weight, conv_bias, weight, bias, eps, bounds)
        ctx.save_for_backward(*saved)
        ctx.bounds = bounds
        return out

    @staticmethod
    def backward(ctx, dout: torch.Tensor):
        dout = first_order_upstream("first_block", dout)
        grads = first_block_backward(ctx.saved_tensors, ctx.starts, ctx.bounds, dout, ctx.needs_input_grad[0],
                                     ctx.needs_input_grad[1] or ctx.needs_input_grad[2])
        return *grads, None, None


def kernel_matrix(conv_weight: torch.Tensor, conv_bias: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """[K, Cin·9 + 1, C]: each group's taps of each output channel as a column, the bias as the
    last row (into ``out`` when given, a buffer reused step after step)."""
    k, c_out = conv_weight.shape[:2]
    if out is None:
        out = torch.empty(k, conv_weight[0].numel() // c_out + 1, c_out)
    out[:, :-1] = conv_weight.reshape(k, c_out, -1).transpose(1, 2)
    out[:, -1] = conv_bias
    return out


def first_block(x: torch.Tensor, conv_weight: torch.Tensor, conv_bias: torch.Tensor, weight: torch.Tensor,
                bias: torch.Tensor, eps: float, starts: Sequence[int] | None = None) -> torch.Tensor:
    """The block on a float32 CPU batch with even sides; the result is channels last.

    With ``starts``, images starts[k]:starts[k + 1] are group k and take row k of every parameter
    (each with a leading group axis K); without, all images share the parameters."""
    bounds = group_bounds(x.shape[0], starts, conv_weight, conv_bias, weight, bias)
    return FirstBlock.apply(x, conv_weight, conv_bias, weight, bias, eps, bounds)

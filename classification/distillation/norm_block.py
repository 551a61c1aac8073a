"""The ConvNet's "instance norm → ReLU → 2×2 average pool" in one pass forward and one backward.

In PyTorch these are five operators forward and five backward, each a full pass over the
block's largest tensor (the first block's [batch, width, 8, 8] on digits) and each output a
fresh allocation; on these small maps they cost more than the convolutions (issue 13, §3).
Here numba walks image after image on channels-last maps (``[N, H·W, C]``), so that every loop
runs along the channels, and does all of an image's work while its slab sits in L1: moments,
then normalise, scale, shift, clip and pool. The backward recomputes the normalised values
from the saved input rather than storing them.

Same math as ``F.avg_pool2d(F.relu(F.group_norm(x, C, γ, β, eps)), 2)`` to float32 rounding
(tested); sums run in a fixed order for a given image size, four positions at a time, so an
image's results do not depend on the batch's size or company. First derivatives only: the
server's gradient matching, which differentiates through gradients (and vmaps), keeps
PyTorch's operators, and a second derivative through this block is refused.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from numba.core.compiler import Compiler

from frd.jit import JIT, compiled


class _DistinctArrays(Compiler):
    """numba's own pipeline with its ``noalias`` flag on: the array arguments of a kernel compiled
    with it are declared not to overlap, so LLVM vectorizes the 32-channel loops below without
    runtime overlap checks and scalar fallbacks (one image in L1: this module's forward 585 →
    426 ns, backward 1,140 → 721 ns). Every kernel compiled with it must be called with arrays
    that share no memory, which holds for all callers in this package (each argument is its own
    tensor or scratch buffer). The flag is numba's own (``Flags.noalias``) but no decorator option,
    hence the pipeline class; numba is pinned (0.68.*), and ``tests/test_norm_block.py`` would catch
    a release that dropped it. (The RL kernels were tried with it too: the same bits, no faster.)"""

    def __init__(self, typingctx, targetctx, library, args, return_type, flags, locals):
        flags = flags.copy()
        flags.noalias = True
        super().__init__(typingctx, targetctx, library, args, return_type, flags, locals)


KERNEL: dict = dict(JIT, pipeline_class=_DistinctArrays)
"""The numba options of the ConvNet's fused kernels (here and in :mod:`frd.classification.distillation.first_block`)."""


@compiled(**KERNEL)
def norm_pool_image(y, gamma, beta, width, eps, out, m, q, scale, shift):
    """One image: out = pool(relu(norm(y))) for y [H·W, C]; writes its mean and 1/σ into m, q."""
    size, channels = y.shape[0], y.shape[1]
    half = width // 2
    inv = np.float32(1.0 / size)
    zero, quarter = np.float32(0.0), np.float32(0.25)
    m[:] = 0.0
    q[:] = 0.0
    for k in range(0, size, 4):
        y0, y1, y2, y3 = y[k], y[k + 1], y[k + 2], y[k + 3]
        for c in range(channels):
            m[c] += (y0[c] + y1[c]) + (y2[c] + y3[c])
    for c in range(channels):
        m[c] *= inv
    for k in range(0, size, 4):
        y0, y1, y2, y3 = y[k], y[k + 1], y[k + 2], y[k + 3]
        for c in range(channels):
            e0, e1, e2, e3 = y0[c] - m[c], y1[c] - m[c], y2[c] - m[c], y3[c] - m[c]
            q[c] += (e0 * e0 + e1 * e1) + (e2 * e2 + e3 * e3)
    for c in range(channels):
        q[c] = np.float32(1.0) / np.sqrt(q[c] * inv + np.float32(eps))
        scale[c] = gamma[c] * q[c]
        shift[c] = beta[c] - m[c] * scale[c]
    for p in range(out.shape[0]):
        a = (p // half) * 2 * width + (p % half) * 2
        y0, y1, y2, y3, o = y[a], y[a + 1], y[a + width], y[a + width + 1], out[p]
        for c in range(channels):
            o[c] = quarter * ((max(y0[c] * scale[c] + shift[c], zero) + max(y1[c] * scale[c] + shift[c], zero))
                              + (max(y2[c] * scale[c] + shift[c], zero) + max(y3[c] * scale[c] + shift[c], zero)))


@compiled(**KERNEL)
def norm_pool_image_backward(y, gamma, beta, width, m, rs, dout, dy, dgamma, dbeta, scale, shift, sum_dz, sum_dzx):
    """One image: dy = ∂(Σ dout·pool(relu(norm(y))))/∂y; adds its share of ∂/∂γ and ∂/∂β."""
    size, channels = y.shape[0], y.shape[1]
    half = width // 2
    inv = np.float32(1.0 / size)
    zero, quarter = np.float32(0.0), np.float32(0.25)
    for c in range(channels):
        scale[c] = gamma[c] * rs[c]
        shift[c] = beta[c] - m[c] * scale[c]
    sum_dz[:] = 0.0
    sum_dzx[:] = 0.0
    for p in range(dout.shape[0]):
        a = (p // half) * 2 * width + (p % half) * 2
        b = a + width
        d = dout[p]
        y0, y1, y2, y3 = y[a], y[a + 1], y[b], y[b + 1]
        g0, g1, g2, g3 = dy[a], dy[a + 1], dy[b], dy[b + 1]
        for c in range(channels):
            up = quarter * d[c]
            z0 = up if y0[c] * scale[c] + shift[c] > zero else zero
            z1 = up if y1[c] * scale[c] + shift[c] > zero else zero
            z2 = up if y2[c] * scale[c] + shift[c] > zero else zero
            z3 = up if y3[c] * scale[c] + shift[c] > zero else zero
            g0[c], g1[c], g2[c], g3[c] = z0, z1, z2, z3
            sum_dz[c] += (z0 + z1) + (z2 + z3)
            sum_dzx[c] += (z0 * (y0[c] - m[c]) + z1 * (y1[c] - m[c])) + (z2 * (y2[c] - m[c]) + z3 * (y3[c] - m[c]))
    for c in range(channels):
        sum_dzx[c] *= rs[c]
        dgamma[c] += sum_dzx[c]
        dbeta[c] += sum_dz[c]
        sum_dz[c] *= gamma[c] * inv
        sum_dzx[c] *= gamma[c] * inv * rs[c]
    for k in range(size):
        yk, gk = y[k], dy[k]
        for c in range(channels):
            gk[c] = rs[c] * (gamma[c] * gk[c] - sum_dz[c] - (yk[c] - m[c]) * sum_dzx[c])


@compiled(**KERNEL)
def images_forward(y, gamma, beta, starts, width, eps, out, mean, rstd):
    """out = pool(relu(norm(y))) for y [N, H·W, C] (channels last), image by image; images
    starts[k]:starts[k + 1] take group k's γ[k], β[k]; saves every (image, channel)'s mean and 1/σ."""
    for k in range(gamma.shape[0]):
        a, b = starts[k], starts[k + 1]
        _forward_group(y[a:b], gamma[k], beta[k], width, eps, out[a:b], mean[a:b], rstd[a:b])


@compiled(**KERNEL)
def _forward_group(y, gamma, beta, width, eps, out, mean, rstd):
    """``images_forward`` of images that share γ and β: a function of its own, so that its arrays, being
    arguments, carry the ``noalias`` promise (as views inside ``images_forward`` they would not, and the
    loops ran ~15 % slower on 4×4 maps)."""
    scale, shift = np.empty(y.shape[2], np.float32), np.empty(y.shape[2], np.float32)
    for n in range(y.shape[0]):
        norm_pool_image(y[n], gamma, beta, width, eps, out[n], mean[n], rstd[n], scale, shift)


@compiled(**KERNEL)
def images_backward(y, gamma, beta, starts, width, mean, rstd, dout, dy, dgamma, dbeta):
    """Gradients of Σ dout·pool(relu(norm(y))) w.r.t. y (into dy), and γ's and β's summed over
    each group's images."""
    for k in range(gamma.shape[0]):
        a, b = starts[k], starts[k + 1]
        _backward_group(y[a:b], gamma[k], beta[k], width, mean[a:b], rstd[a:b], dout[a:b], dy[a:b], dgamma[k], dbeta[k])


@compiled(**KERNEL)
def _backward_group(y, gamma, beta, width, mean, rstd, dout, dy, dgamma, dbeta):
    """``images_backward`` of images that share γ and β, into their own dgamma and dbeta (see
    ``_forward_group`` for why a function of its own)."""
    c = y.shape[2]
    scale, shift = np.empty(c, np.float32), np.empty(c, np.float32)
    sum_dz, sum_dzx = np.empty(c, np.float32), np.empty(c, np.float32)
    dgamma[:] = 0.0
    dbeta[:] = 0.0
    for n in range(y.shape[0]):
        norm_pool_image_backward(y[n], gamma, beta, width, mean[n], rstd[n], dout[n], dy[n], dgamma, dbeta,
                                 scale, shift, sum_dz, sum_dzx)


def channels_last(x: torch.Tensor) -> torch.Tensor:
    """``x`` with channels-last strides, also when it has one channel (where PyTorch would take
    NCHW strides for channels last too, and the convolution would answer in NCHW)."""
    n, c, h, w = x.shape
    if x.stride() == (h * w * c, 1, w * c, c):
        return x
    return torch.empty(x.shape, dtype=x.dtype, memory_format=torch.channels_last).copy_(x)


def slabs(x: torch.Tensor) -> np.ndarray:
    """The [N, H·W, C] numpy view of a channels-last NCHW tensor: one slab per image."""
    n, c, h, w = x.shape
    view = x.detach().permute(0, 2, 3, 1).reshape(n, h * w, c)
    if view.data_ptr() != x.data_ptr():  # a copy: the kernels would write into it, not into x
        raise ValueError(f"expected a channels-last tensor, got strides {x.stride()} for shape {tuple(x.shape)}")
    return view.numpy()


def first_order_upstream(name: str, dout: torch.Tensor) -> torch.Tensor:
    """A fused block's upstream gradient, channels last, after refusing to build a second derivative:
    under ``create_graph`` the gradient would silently lose its own derivative."""
    if torch.is_grad_enabled():
        raise RuntimeError(f"{name} has first derivatives only; differentiate twice through "
                           "convnet_layer_outputs(..., fused=False)")
    return dout.contiguous(memory_format=torch.channels_last)


def group_starts(starts: Sequence[int]) -> np.ndarray:
    """Group boundaries as the kernels take them: group k is images starts[k]:starts[k + 1]."""
    bounds = list(starts)
    if len(bounds) < 2 or bounds[0] != 0 or any(b < a for a, b in zip(bounds[:-1], bounds[1:])):
        raise ValueError(f"group starts must rise from 0, got {bounds}")
    return np.array(bounds, dtype=np.int64)


def group_bounds(n: int, starts: Sequence[int] | None, *weights: torch.Tensor) -> np.ndarray | None:
    """The kernels' group boundaries of ``n`` images, or None for one group whose weights have no
    group axis (``starts`` None); with ``starts``, every weight must have a leading axis of K."""
    if starts is None:
        return None
    bounds = group_starts(starts)
    if bounds[-1] != n or any(w.shape[0] != bounds.size - 1 for w in weights):
        raise ValueError(f"{bounds.size - 1} groups ending at image {bounds[-1]} for {n} images and weights "
                         f"of {[w.shape[0] for w in weights]} groups")
    return bounds


def kernel_weights(bounds: np.ndarray | None, n: int, *weights: torch.Tensor) -> tuple[np.ndarray, list[torch.Tensor]]:
    """Boundaries and detached weights with a group axis, as the kernels take them. Adding the axis
    here, inside the autograd functions, keeps it out of the graph (a view per weight and pass)."""
    if bounds is None:
        return np.array((0, n), dtype=np.int64), [w.detach().unsqueeze(0) for w in weights]
    return bounds, [w.detach().contiguous() for w in weights]


def without_group_axis(bounds: np.ndarray | None, *grads: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Gradients in their weights' shapes: the group axis dropped again where ``kernel_weights`` added it."""
    return tuple(g[0] for g in grads) if bounds is None else grads


def norm_relu_pool_forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float,
                           bounds: np.ndarray | None) -> tuple[torch.Tensor, tuple[torch.Tensor, ...], np.ndarray]:
    """The block's output, the tensors its backward needs and the kernels' group boundaries
    (:class:`NormReluPool`'s forward, also called without autograd)."""
    n, c, h, w = x.shape
    x = channels_last(x)
    starts, (gamma, beta) = kernel_weights(bounds, n, weight, bias)
    out = torch.empty(n, c, h // 2, w // 2, memory_format=torch.channels_last)
    mean, rstd = torch.empty(n, c), torch.empty(n, c)
    images_forward(slabs(x), gamma.numpy(), beta.numpy(), starts, w, eps, slabs(out), mean.numpy(), rstd.numpy())
    return out, (x, gamma, beta, mean, rstd), starts


def norm_relu_pool_backward(saved: Sequence[torch.Tensor], starts: np.ndarray, bounds: np.ndarray | None,
                            dout: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients w.r.t. the input, γ and β from what :func:`norm_relu_pool_forward` saved and a
    channels-last upstream gradient."""
    x, gamma, beta, mean, rstd = saved
    dx = torch.empty_like(x, memory_format=torch.channels_last)
    dgamma, dbeta = torch.empty(gamma.shape), torch.empty(beta.shape)
    images_backward(slabs(x), gamma.numpy(), beta.numpy(), starts, x.shape[3], mean.numpy(), rstd.numpy(),
              slabs(dout), slabs(dx), dgamma.numpy(), dbeta.numpy())
    dweight, dbias = without_group_axis(bounds, dgamma, dbeta)
    return dx, dweight, dbias


class NormReluPool(torch.autograd.Function):
    """``avg_pool2d(relu(group_norm(x, C, weight, bias, eps)), 2)`` with one group per channel,
    channels last; with ``bounds`` (see :func:`group_bounds`), ``weight`` and ``bias`` are [K, C],
    one row per group of images."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float,
                bounds: np.ndarray | None) -> torch.Tensor:
        out, saved, ctx.starts = norm_relu_pool_forward(x, weight, bias, eps, bounds)
        ctx.save_for_backward(*saved)
        ctx.bounds = bounds
        return out

    @staticmethod
    def backward(ctx, dout: torch.Tensor):
        dout = first_order_upstream("norm_relu_pool", dout)
        return *norm_relu_pool_backward(ctx.saved_tensors, ctx.starts, ctx.bounds, dout), None, None


def norm_relu_pool(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float,
                   starts: Sequence[int] | None = None) -> torch.Tensor:
    """The fused block on a float32 CPU batch with even sides; the result is channels last.

    With ``starts``, images starts[k]:starts[k + 1] are group k and take ``weight[k]`` and
    ``bias[k]`` ([K, C] each); without, all images share ``weight`` and ``bias`` ([C])."""
    return NormReluPool.apply(x, weight, bias, eps, group_bounds(x.shape[0], starts, weight, bias))

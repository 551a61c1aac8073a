"""A 3×3 convolution (padding 1) of a tiny map as one matrix: the matrix and its adjoint.

On a map of H·W ≤ ``DENSE_MAP`` pixels the convolution is the map's H·W·Cin inputs
(channels-last order) times a [H·W·Cin, H·W·Cout] matrix whose block (input pixel, output pixel)
is the kernel tap joining them, or zeros where none does. Built from PyTorch operators (a
concatenation, a gather and a permutation forward; a scatter-add backward), the matrix cost
~110 µs per fine-tuning step of the digits ConvNet for 16 K numbers; here each direction is one
numba loop.
"""
from __future__ import annotations

import torch

from frd.classification.distillation.norm_block import KERNEL
from frd.jit import compiled

DENSE_MAP = 4
"""Largest H·W whose 3×3 convolution runs as one matrix product: on a 2×2 map every tap of every
output lands inside the map, so the product wastes nothing, while oneDNN's convolution computes
the padding's zeros too (measured, batch 256, width 32: forward + backward 680 → 380 µs)."""


@compiled(**KERNEL)
def matrix_taps(weight, matrix, h, w, to_matrix):
    """Between each group's kernel ``weight[g]`` [Cout, Cin, 3, 3] and its matrix ``matrix[g]``:
    with ``to_matrix`` the matrix's blocks are set to their taps (zeros elsewhere), else each tap
    gets the sum of its blocks in (input pixel, output pixel) order, the adjoint."""
    c_out, c_in = weight.shape[1], weight.shape[2]
    if to_matrix:
        matrix[...] = 0.0
    else:
        weight[...] = 0.0
    for g in range(weight.shape[0]):
        for hi in range(h):
            for wi in range(w):
                for ho in range(max(hi - 1, 0), min(hi + 2, h)):
                    for wo in range(max(wi - 1, 0), min(wi + 2, w)):
                        kh, kw = hi - ho + 1, wi - wo + 1
                        row, col = (hi * w + wi) * c_in, (ho * w + wo) * c_out
                        for ci in range(c_in):
                            for co in range(c_out):
                                if to_matrix:
                                    matrix[g, row + ci, col + co] = weight[g, co, ci, kh, kw]
                                else:
                                    weight[g, co, ci, kh, kw] += matrix[g, row + ci, col + co]


def dense_matrix_adjoint(grad: torch.Tensor, h: int, w: int, c_in: int) -> torch.Tensor:
    """The gradient w.r.t. ``weight`` [G, Cout, Cin, 3, 3] of Σ grad · :func:`dense_matrix`."""
    out = torch.empty(grad.shape[0], grad.shape[2] // (h * w), c_in, 3, 3)
    matrix_taps(out.numpy(), grad.detach().contiguous().numpy(), h, w, False)
    return out


class _DenseMatrix(torch.autograd.Function):
    @staticmethod
    def forward(ctx, weight: torch.Tensor, h: int, w: int) -> torch.Tensor:
        groups, c_out, c_in = weight.shape[:3]
        out = torch.empty(groups, h * w * c_in, h * w * c_out)
        matrix_taps(weight.detach().contiguous().numpy(), out.numpy(), h, w, True)
        ctx.shape = h, w, c_in
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        if torch.is_grad_enabled():
            raise RuntimeError("dense_matrix has first derivatives only; differentiate twice through "
                               "convnet_layer_outputs(..., fused=False)")
        return dense_matrix_adjoint(grad, *ctx.shape), None, None


def dense_matrix(weight: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """[G, H·W·Cin, H·W·Cout]: the matrix of each group's float32 CPU 3×3 kernel ``weight``
    [G, Cout, Cin, 3, 3] on an H×W map (first derivatives flow back to ``weight``)."""
    return _DenseMatrix.apply(weight, h, w)

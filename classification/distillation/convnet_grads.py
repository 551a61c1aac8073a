"""The ConvNet's cross-entropy gradients without autograd, for the server's SGD steps.

Through autograd, a fine-tuning step of the digits ConvNet builds and walks a graph of ~25
nodes, and each fused block is a Python ``autograd.Function`` with its context (a step: 4.1–4.2
ms, of which the kernels below take ~3.4). Here the forward keeps what each block's backward
needs and the backward calls the very kernels autograd would, in reverse: the fused blocks'
(:func:`~frd.classification.distillation.first_block.images_backward`,
:func:`~frd.classification.distillation.norm_block.images_backward`), oneDNN's convolution backward, the
dense product's matrix products and its adjoint, the classifier's products and PyTorch's own
log-softmax and NLL backward kernels. So the gradients are autograd's, bit for bit (tested).

It covers ConvNets whose every block runs fused (:func:`convnet_layer_outputs`' fast path with
the fused norm block: instance norm, plain 2×2 pools, even sides: digits, CIFAR); others
(MNIST's 7×7 third block) keep autograd.
"""
from __future__ import annotations

from typing import Any, Sequence, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from frd.classification.distillation import first_block, norm_block
from frd.classification.distillation.client import conv_kind, fused_norm_block
from frd.classification.distillation.dense_conv import matrix_taps
from frd.classification.distillation.norm_block import channels_last, slabs
from frd.classification.models import ConvNet


def fused_plan(model: nn.Module, shape: Sequence[int]) -> list[str] | None:
    """Each block's convolution kind (:func:`conv_kind`) for inputs of ``shape`` [C, H, W] when the
    whole model runs fused (a float32 CPU ConvNet whose every block's norm fuses, on even sides,
    with every bias and affine norm), else None."""
    if type(model) is not ConvNet or any(p.dtype != torch.float32 or p.device.type != "cpu"
                                         for p in model.parameters()):
        return None
    kinds = []
    channels, h, w = shape
    for block in cast(nn.ModuleList, model.blocks):
        conv, norm, _, pool = cast(Any, block)
        if (not fused_norm_block(norm, pool, conv) or h % 2 or w % 2 or conv.bias is None or norm.weight is None
                or conv.kernel_size != (3, 3) or conv.padding != (1, 1) or conv.stride != (1, 1)
                or conv.dilation != (1, 1) or conv.groups != 1):
            return None
        kinds.append(conv_kind(conv, True, (1, channels, h, w)))
        channels, h, w = conv.out_channels, h // 2, w // 2
    return kinds


class ConvNetGradients:
    """∂ mean cross-entropy(model(x), y) / ∂ every parameter of a ConvNet that :func:`fused_plan`
    planned (``plan``), step after step, written into the parameters' ``.grad`` (which must exist:
    the server's SGD makes them views of one flat buffer).

    Every block's output, statistics and gradients live in buffers made once per input shape and
    reused, with their numpy views. Made afresh every step, as the blocks' wrappers make them,
    they cost a digits fine-tuning step (batch 256) ~0.2–0.3 ms in fresh pages, and the wrappers'
    views and checks ~0.5 ms more: 3.8–4.1 → 2.9–3.2 ms a step alone, 3.55 → 3.21 ms within a
    default run. The parameters are read through views made once, so they may change in place
    between steps.
    """

    def __init__(self, model: ConvNet, plan: Sequence[str]) -> None:
        if any(p.grad is None for p in model.parameters()):
            raise ValueError("ConvNetGradients writes into the parameters' .grad: give every parameter one")
        self.model = model
        self.blocks = [_Block(cast(Any, block), kind) for block, kind in zip(cast(nn.ModuleList, model.blocks), plan)]
        self.buffers: dict[tuple[int, ...], list[_Buffers]] = {}

    @torch.no_grad()
    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        buffers = self.buffers.get(tuple(x.shape))
        if buffers is None:
            buffers = self.buffers[tuple(x.shape)] = _buffers(self.blocks, x.shape)
        starts = buffers[0].starts
        inputs = [channels_last(x)]
        for block, buffer in zip(self.blocks, buffers):
            block.forward(inputs[-1], buffer, starts)
            inputs.append(buffer.out)
        h = inputs[-1]
        features = h.flatten(1)
        classifier = cast(nn.Linear, self.model.classifier)
        logits = torch.addmm(classifier.bias, features, classifier.weight.t())
        log_p = torch.log_softmax(logits, 1)
        _, total_weight = torch.ops.aten.nll_loss_forward(log_p, y, None, 1, -100)
        d_log_p = torch.ops.aten.nll_loss_backward(torch.ones(()), log_p, y, None, 1, -100, total_weight)
        d_logits = torch.ops.aten._log_softmax_backward_data(d_log_p, log_p, 1, torch.float32)
        cast(torch.Tensor, classifier.bias.grad).copy_(d_logits.sum(0))
        cast(torch.Tensor, classifier.weight.grad).copy_(d_logits.t().mm(features))
        d_h: torch.Tensor | None = channels_last(d_logits.mm(classifier.weight).view(h.shape))
        for b in reversed(range(len(self.blocks))):
            d_h = self.blocks[b].backward(inputs[b], buffers[b], starts, cast(torch.Tensor, d_h), b > 0)


class _Block:
    """One block of the walked ConvNet: its modules, how its convolution runs (``kind``, see
    :func:`conv_kind`), and numpy views of its parameters and their gradients (γ and β with the
    kernels' group axis of one)."""

    def __init__(self, block: Any, kind: str) -> None:
        self.conv, self.norm = cast(nn.Conv2d, block[0]), cast(nn.GroupNorm, block[1])
        self.kind = kind
        conv_bias, gamma, beta = (cast(torch.Tensor, p) for p in (self.conv.bias, self.norm.weight, self.norm.bias))
        self.weight, self.bias = _numpy(self.conv.weight), _numpy(conv_bias)
        self.d_weight, self.d_bias = _numpy(self.conv.weight.grad), _numpy(conv_bias.grad)
        self.gamma, self.beta = _numpy(gamma).reshape(1, -1), _numpy(beta).reshape(1, -1)
        self.d_gamma, self.d_beta = _numpy(gamma.grad).reshape(1, -1), _numpy(beta.grad).reshape(1, -1)

    def forward(self, h: torch.Tensor, buffer: _Buffers, starts: np.ndarray) -> None:
        """The block's output of the channels-last input ``h`` into ``buffer.out``; keeps in
        ``buffer`` what :meth:`backward` needs besides ``h``."""
        conv, norm, width = self.conv, self.norm, h.shape[3]
        if self.kind == "first":
            first_block.kernel_matrix(conv.weight[None], cast(torch.Tensor, conv.bias)[None], out=buffer.kernel_t)
            first_block.images_forward(slabs(h), buffer.kernel, self.gamma, self.beta, starts, width, norm.eps,
                                       buffer.out_slabs, buffer.mean, buffer.rstd)
            return
        if self.kind == "dense":
            matrix_taps(self.weight[None], buffer.matrix.numpy(), h.shape[2], width, True)
            buffer.z_slabs[:] = self.bias
            buffer.z.addmm_(_rows(h), buffer.matrix[0])
        else:
            buffer.z_slabs = slabs(channels_last(F.conv2d(h, conv.weight, conv.bias, padding=1)))
        norm_block.images_forward(buffer.z_slabs, self.gamma, self.beta, starts, width, norm.eps,
                                  buffer.out_slabs, buffer.mean, buffer.rstd)

    def backward(self, h: torch.Tensor, buffer: _Buffers, starts: np.ndarray, d_out: torch.Tensor,
                 input_grad: bool) -> torch.Tensor | None:
        """Writes the block's parameters' gradients from the channels-last upstream gradient
        ``d_out``; returns its input's (channels last) if ``input_grad``."""
        width = h.shape[3]
        if self.kind == "first":
            d_x = buffer.d_input if input_grad else None
            first_block.images_backward(slabs(h), buffer.kernel, self.gamma, self.beta, starts, width, buffer.mean,
                                        buffer.rstd, slabs(d_out), first_block.NO_INPUT_GRADIENT if d_x is None else slabs(d_x),
                                        buffer.d_kernel, self.d_gamma, self.d_beta)
            self.d_weight[...] = buffer.d_kernel[0, :-1].T.reshape(self.d_weight.shape)
            self.d_bias[...] = buffer.d_kernel[0, -1]
            return d_x
        norm_block.images_backward(buffer.z_slabs, self.gamma, self.beta, starts, width, buffer.mean, buffer.rstd,
                                   slabs(d_out), buffer.d_z_slabs, self.d_gamma, self.d_beta)
        if self.kind == "dense":
            n, c_in, side_h = h.shape[0], h.shape[1], h.shape[2]
            d_rows = _rows(buffer.d_z)
            self.d_bias[...] = d_rows.sum(0).view(side_h * width, -1).sum(0).numpy()
            matrix_taps(self.d_weight[None], _rows(h).t().mm(d_rows).numpy()[None], side_h, width, False)
            return d_rows.mm(buffer.matrix[0].t()).view(n, side_h, width, c_in).permute(0, 3, 1, 2)
        d_h, d_w, d_b = torch.ops.aten.convolution_backward(
            buffer.d_z, h, self.conv.weight, [self.conv.out_channels], [1, 1], [1, 1], [1, 1], False, [0, 0], 1,
            [input_grad, True, True])
        self.d_weight[...] = d_w.numpy()
        self.d_bias[...] = d_b.numpy()
        return channels_last(d_h) if input_grad else None


class _Buffers:
    """One block's buffers for one input shape [N, Cin, H, W]: its output (channels last) with
    its statistics, and by kind the first block's kernel and gradients, or the norm's input
    gradient and the dense product's matrix and result."""

    def __init__(self, block: _Block, shape: Sequence[int]) -> None:
        n, c_in, h, w = shape
        c = block.conv.out_channels
        self.starts = np.array((0, n), dtype=np.int64)  # the kernels' image groups: one
        self.out = torch.empty(n, c, h // 2, w // 2, memory_format=torch.channels_last)
        self.out_slabs = slabs(self.out)
        self.mean, self.rstd = np.empty((n, c), np.float32), np.empty((n, c), np.float32)
        if block.kind == "first":
            self.kernel_t = torch.empty(1, c_in * 9 + 1, c)
            self.kernel = self.kernel_t.numpy()
            self.d_kernel = np.empty_like(self.kernel)
            self.d_input = torch.empty(n, c_in, h, w, memory_format=torch.channels_last)
            return
        self.d_z = torch.empty(n, c, h, w, memory_format=torch.channels_last)
        self.d_z_slabs = slabs(self.d_z)
        self.z_slabs = np.empty((0, 0, 0), np.float32)
        if block.kind == "dense":
            self.matrix = torch.empty(1, h * w * c_in, h * w * c)
            self.z = torch.empty(n, h * w * c)
            self.z_slabs = self.z.numpy().reshape(n, h * w, c)


def _buffers(blocks: Sequence[_Block], shape: Sequence[int]) -> list[_Buffers]:
    """Every block's buffers for an input of ``shape`` [N, C, H, W]."""
    buffers = []
    n, channels, h, w = shape
    for block in blocks:
        buffers.append(_Buffers(block, (n, channels, h, w)))
        channels, h, w = block.conv.out_channels, h // 2, w // 2
    return buffers


def _rows(h: torch.Tensor) -> torch.Tensor:
    """[N, H·W·C]: each image of a channels-last map as one row, channels-last order (a view)."""
    return h.permute(0, 2, 3, 1).reshape(h.shape[0], -1)


def _numpy(t: torch.Tensor | None) -> np.ndarray:
    """The numpy view of a float32 CPU tensor (a parameter or its gradient)."""
    return cast(torch.Tensor, t).detach().numpy()

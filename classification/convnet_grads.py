"""The ConvNet's cross-entropy gradients without autograd, for the server's SGD steps.

Through autograd, a fine-tuning step of the digits ConvNet builds and walks a graph of ~25
nodes, and each fused block is a Python ``autograd.Function`` with its context (a step: 4.1–4.2
ms, of which the kernels below take ~3.4). Here the forward keeps what each block's backward
needs and the backward calls the very kernels autograd would, in reverse: the fused blocks'
(:func:`~classification.first_block.first_block_backward`,
:func:`~classification.norm_block.norm_relu_pool_backward`), oneDNN's convolution backward, the
dense product's matrix products and its adjoint, the classifier's products and PyTorch's own
log-softmax and NLL backward kernels. So the gradients are autograd's, bit for bit (tested).

It covers ConvNets whose every block runs fused (:func:`convnet_layer_outputs`' fast path with
the fused norm block: instance norm, plain 2×2 pools, even sides: digits, CIFAR); others
(MNIST's 7×7 third block) keep autograd.
"""
from __future__ import annotations

from typing import Any, Sequence, cast

import torch
import torch.nn.functional as F
from torch import nn

from classification.dense_conv import dense_matrix, dense_matrix_adjoint
from classification.distill_client import conv_kind, fused_norm_block
from classification.first_block import first_block_backward, first_block_forward
from classification.models import ConvNet
from classification.norm_block import channels_last, norm_relu_pool_backward, norm_relu_pool_forward


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


@torch.no_grad()
def cross_entropy_gradients(model: ConvNet, plan: Sequence[str], x: torch.Tensor,
                            y: torch.Tensor) -> list[torch.Tensor]:
    """∂ mean cross-entropy(model(x), y) / ∂ every parameter, in ``model.parameters()`` order, for a
    model and input that :func:`fused_plan` planned (``plan``)."""
    blocks = [cast(Any, block) for block in cast(nn.ModuleList, model.blocks)]
    saved: list[tuple[Any, ...]] = []
    h = x
    for kind, (conv, norm, _, _) in zip(plan, blocks):
        if kind == "first":
            h, tensors, starts = first_block_forward(h, conv.weight, conv.bias, norm.weight, norm.bias, norm.eps, None)
            saved.append((tensors, starts))
            continue
        if kind == "dense":
            n, c_in, side_h, side_w = h.shape
            matrix = dense_matrix(conv.weight.unsqueeze(0), side_h, side_w)[0]
            rows = channels_last(h).permute(0, 2, 3, 1).reshape(n, -1)
            z = torch.addmm(conv.bias.repeat(side_h * side_w), rows, matrix).view(n, side_h, side_w, -1).permute(0, 3, 1, 2)
            conv_saved: tuple[Any, ...] = (matrix, rows, (side_h, side_w, c_in))
        else:
            conv_saved = (h,)
            z = F.conv2d(h, conv.weight, conv.bias, padding=1)
        h, tensors, starts = norm_relu_pool_forward(z, norm.weight, norm.bias, norm.eps, None)
        saved.append((conv_saved, tensors, starts))
    features = h.flatten(1)
    classifier = model.classifier
    logits = torch.addmm(classifier.bias, features, classifier.weight.t())
    log_p = torch.log_softmax(logits, 1)
    _, total_weight = torch.ops.aten.nll_loss_forward(log_p, y, None, 1, -100)
    d_log_p = torch.ops.aten.nll_loss_backward(torch.ones(()), log_p, y, None, 1, -100, total_weight)
    d_logits = torch.ops.aten._log_softmax_backward_data(d_log_p, log_p, 1, torch.float32)

    grads: list[torch.Tensor] = [d_logits.sum(0), features.t().mm(d_logits).t()]  # reversed at the end
    d_h = d_logits.mm(classifier.weight).view(h.shape)
    for b in reversed(range(len(blocks))):
        conv = blocks[b][0]
        if plan[b] == "first":
            tensors, starts = saved[b]
            d_x, d_w, d_b, d_gamma, d_beta = first_block_backward(tensors, starts, None, channels_last(d_h), b > 0, True)
            grads += [d_beta, d_gamma, cast(torch.Tensor, d_b), cast(torch.Tensor, d_w)]
            d_h = cast(torch.Tensor, d_x)
            continue
        conv_saved, tensors, starts = saved[b]
        d_z, d_gamma, d_beta = norm_relu_pool_backward(tensors, starts, None, channels_last(d_h))
        if plan[b] == "dense":
            matrix, rows, (side_h, side_w, c_in) = conv_saved
            d_rows = d_z.permute(0, 2, 3, 1).reshape(d_z.shape[0], -1)
            d_b = d_rows.sum(0).view(side_h * side_w, -1).sum(0)
            d_w = dense_matrix_adjoint(rows.t().mm(d_rows).unsqueeze(0), side_h, side_w, c_in)[0]
            d_h = d_rows.mm(matrix.t()).view(d_z.shape[0], side_h, side_w, c_in).permute(0, 3, 1, 2)
        else:
            (h_in,) = conv_saved
            d_h, d_w, d_b = torch.ops.aten.convolution_backward(
                d_z, h_in, conv.weight, [conv.out_channels], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [b > 0, True, True])
        grads += [d_beta, d_gamma, d_b, d_w]
    return grads[::-1]

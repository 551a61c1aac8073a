"""A device's work in floating-point operations, for the virtual clock (``frd.clock``).

One local SGD iteration is counted on one model as torch's FLOP counter sees it (matrix products and
convolutions, forward and backward, on a minibatch of the run's batch size) plus 2 FLOPs per weight for
the update [our choice: elementwise work such as activations is left out, as torch's counter does;
counted on one device's model, since the batched stack runs as grouped convolutions, whose backward
the counter overcounts (benchmarks/reports/cls-flops.md)].
"""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode


def sgd_iteration_flops(model: nn.Module, image_shape: tuple[int, ...], batch: int) -> float:
    """FLOPs of one SGD step of ``model`` on ``batch`` images of ``image_shape`` (counted on a copy, once
    per architecture)."""
    key = (repr(model), tuple(image_shape), batch)
    if key not in _COUNTS:
        model = copy.deepcopy(model)
        with FlopCounterMode(display=False) as counter:
            logits = model(torch.zeros(batch, *image_shape))
            F.cross_entropy(logits, torch.zeros(batch, dtype=torch.long)).backward()
        _COUNTS[key] = float(counter.get_total_flops()) + 2.0 * sum(p.numel() for p in model.parameters())
    return _COUNTS[key]


_COUNTS: dict[tuple, float] = {}
"""Counts by (architecture, image shape, batch): one count per architecture and process."""

"""Local SGD of all devices at once, and test-set evaluation of one model."""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from frd.classification.data import Dataset
from frd.classification.devices import DeviceStack

LocalLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""(logits [devices, batch, classes], labels [devices, batch]) → per-device loss [devices]."""
EVAL_CHUNK = 1000
"""Test images per forward pass during evaluation (bounds memory for the convnet)."""


def per_device_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of each device's batch, shape [devices]."""
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="none").view(labels.shape).mean(1)


def local_sgd(devices: DeviceStack, data: Dataset, batches: np.ndarray, lr: float, loss_fn: LocalLoss) -> None:
    """One SGD step of every device per row of ``batches`` (pool indices [iterations, devices, batch])."""
    for step in torch.from_numpy(batches):
        logits = devices(data.inputs(data.x_pool[step]))
        devices.sgd_step(loss_fn(logits, data.y_pool[step]).sum(), lr)


@torch.no_grad()
def evaluate(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> tuple[float, float]:
    """Accuracy and mean cross-entropy of ``model`` on uint8 ``images``."""
    correct, loss = 0, 0.0
    for start in range(0, len(labels), EVAL_CHUNK):
        logits = model(Dataset.inputs(images[start:start + EVAL_CHUNK]))
        target = labels[start:start + EVAL_CHUNK]
        correct += int((logits.argmax(1) == target).sum())
        loss += float(F.cross_entropy(logits, target, reduction="sum"))
    return correct / len(labels), loss / len(labels)

"""The classifiers: the Mix2FLD letter's small CNN, an MLP for 8×8 digits, and the dataset-distillation ConvNet.

None of them holds buffers (no batch norm), so a device's whole state is its parameters and
stacked per-device copies train independently.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from frd.errors import FrdError


def _out_side(side: int, kernel: int) -> int:
    """Side after a valid ``kernel`` convolution and a 2×2 pool."""
    return (side - kernel + 1) // 2


class SmallCNN(nn.Module):
    """The Mix2FLD letter's 2 conv + 1 fully connected CNN [Oh et al. 2020: "12,544 parameters"].

    conv 5×5 (width/3 ch) → ReLU → max-pool 2 → conv 5×5 (width ch) → ReLU → max-pool 2 → linear.
    With width 30 on 1×28×28 MNIST this has 12,600 parameters (12,550 weights + 50 biases)."""

    def __init__(self, shape: tuple[int, int, int], classes: int, width: int = 30, kernel: int = 5) -> None:
        super().__init__()
        channels = (max(1, width // 3), width)
        side = _out_side(_out_side(min(shape[1:]), kernel), kernel)
        if side < 1:
            raise FrdError(f"images of {shape[1]}×{shape[2]} are too small for the cnn model; use --model mlp or convnet")
        self.conv1 = nn.Conv2d(shape[0], channels[0], kernel)
        self.conv2 = nn.Conv2d(channels[0], channels[1], kernel)
        flat = channels[1] * _out_side(_out_side(shape[1], kernel), kernel) * _out_side(_out_side(shape[2], kernel), kernel)
        self.fc = nn.Linear(flat, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


class MLP(nn.Module):
    """One hidden ReLU layer: enough for 8×8 digits, and cheap enough to run many devices on CPU."""

    def __init__(self, shape: tuple[int, int, int], classes: int, width: int = 64) -> None:
        super().__init__()
        self.hidden = nn.Linear(shape[0] * shape[1] * shape[2], width)
        self.out = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.hidden(x.flatten(1))))


class ConvNet(nn.Module):
    """Dataset-distillation ConvNet: 3 × [conv 3×3 (``width`` ch), instance norm, ReLU, avg-pool 2] + linear.

    Instance norm is ``GroupNorm(width, width)`` (one group per channel, affine), as in the
    Dataset Condensation code, so it keeps no running statistics."""

    def __init__(self, shape: tuple[int, int, int], classes: int, width: int = 128, depth: int = 3) -> None:
        super().__init__()
        side_h, side_w, channels, blocks = shape[1], shape[2], shape[0], []
        for _ in range(depth):
            blocks.append(nn.Sequential(nn.Conv2d(channels, width, 3, padding=1), nn.GroupNorm(width, width),
                                        nn.ReLU(), nn.AvgPool2d(2)))
            channels, side_h, side_w = width, side_h // 2, side_w // 2
        if min(side_h, side_w) < 1:
            raise FrdError(f"images of {shape[1]}×{shape[2]} are too small for a {depth}-block convnet")
        self.blocks = nn.ModuleList(blocks)
        self.classifier = nn.Linear(width * side_h * side_w, classes)

    def layer_outputs(self, x: torch.Tensor) -> list[torch.Tensor]:
        """The output of each block, then the logits (layer-wise distribution matching needs them all)."""
        outputs = []
        for block in self.blocks:
            x = block(x)
            outputs.append(x)
        outputs.append(self.classifier(x.flatten(1)))
        return outputs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer_outputs(x)[-1]


MODELS: dict[str, Callable[..., nn.Module]] = {"cnn": SmallCNN, "mlp": MLP, "convnet": ConvNet}
"""Architectures by name: ``MODELS[name](image_shape, classes[, width])``; ``width`` is the cnn's
second-conv channels (30), the mlp's hidden units (64) or the convnet's channels (128)."""
DEFAULT_MODEL = {"digits": "mlp", "mnist": "cnn", "cifar10": "cnn"}
"""What ``--model auto`` picks per dataset."""


def model_name(name: str, dataset: str) -> str:
    """The architecture ``name`` means on ``dataset`` (``auto`` picks per dataset)."""
    return DEFAULT_MODEL[dataset] if name == "auto" else name


def build_model(name: str, dataset: str, shape: tuple[int, int, int], classes: int, width: int | None = None) -> nn.Module:
    """A fresh model; ``auto`` picks per dataset and ``width=None`` keeps the model's default."""
    name = model_name(name, dataset)
    return MODELS[name](shape, classes) if width is None else MODELS[name](shape, classes, width)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())

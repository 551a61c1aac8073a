"""What a method sees of one run: its config and seed, the data split over devices, the devices'
models, and seeded randomness. Built once per (config, seed) by the runner."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch import nn

from frd.classification.config import ClsConfig
from frd.classification.data import Dataset
from frd.classification.devices import BatchStream, DeviceStack
from frd.classification.models import build_model
from frd.classification.partitions import PARTITIONS
from frd.classification.training import LocalLoss, local_sgd
from frd.results import run_id
from frd.seeding import Stream, derive_seed


@dataclass
class RunContext:
    """One seed of one experiment. Devices are 0..devices-1; ``parts[d]`` are device d's pool indices;
    ``devices`` and ``stream`` hold the ``local`` devices."""

    config: ClsConfig
    seed: int
    data: Dataset
    parts: list[np.ndarray]
    devices: DeviceStack
    stream: BatchStream

    @classmethod
    def build(cls, config: ClsConfig, seed: int, data: Dataset, local: Sequence[int] | None = None) -> "RunContext":
        """Partition the pool, and give every device the same initial model (shipped with the app,
        so no initial broadcast is charged). ``local``: the devices this process trains (default
        all; a Flower node trains its own)."""
        rng = np.random.default_rng(derive_seed(seed, Stream.CLS_PARTITION))
        parts = PARTITIONS[config.partition](data.y_pool.numpy(), config.devices, config.samples_per_device,
                                             rng, config.partition_spec)
        with torch.random.fork_rng():
            torch.manual_seed(derive_seed(seed, Stream.CLS_INIT))
            template = build_model(config.model, config.dataset, data.image_shape, data.classes, config.width)
        local = list(range(config.devices)) if local is None else list(local)
        stream = BatchStream([parts[d] for d in local], [derive_seed(seed, Stream.CLS_BATCHES, d) for d in local])
        return cls(config, seed, data, parts, DeviceStack(template, local), stream)

    @property
    def run_id(self) -> str:
        return run_id(self.config.method, self.seed)

    @property
    def local(self) -> list[int]:
        """The devices this process trains, in stack order."""
        return self.devices.ids

    @property
    def classes(self) -> int:
        return self.data.classes

    @property
    def sample_counts(self) -> np.ndarray:
        """Local dataset size of each device."""
        return np.array([p.size for p in self.parts])

    def device_data(self, device: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Device ``device``'s raw samples: uint8 images and labels."""
        index = torch.from_numpy(self.parts[device])
        return self.data.x_pool[index], self.data.y_pool[index]

    def new_model(self) -> nn.Module:
        """A standalone model of the run's architecture with the devices' common initial weights."""
        return copy.deepcopy(self.devices.template)

    def rng(self, *keys: int) -> np.random.Generator:
        """A method's own seeded generator, one per distinct ``keys``."""
        return np.random.default_rng(derive_seed(self.seed, Stream.CLS_METHOD, *keys))

    def train_devices(self, iterations: int, loss_fn: LocalLoss) -> None:
        """``iterations`` local SGD steps of every device on its own minibatches."""
        local_sgd(self.devices, self.data, self.stream.take(iterations, self.config.batch_size),
                  self.config.lr, loss_fn)

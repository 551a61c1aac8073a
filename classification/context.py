"""What a method sees of one run: its config and seed, the data split over devices, the devices'
models, and seeded randomness. Built once per (config, seed) by the runner."""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch
from torch import nn

from frd.classification.config import ClsConfig
from frd.classification.data import Dataset
from frd.classification.devices import BatchStream, DeviceModels
from frd.classification.models import build_model
from frd.classification.partitions import PARTITIONS
from frd.classification.training import LocalLoss, local_sgd
from frd.results import run_id
from frd.seeding import Stream, derive_seed


@dataclass
class RunContext:
    """One seed of one experiment. Devices are 0..devices-1; ``parts[d]`` are device d's pool indices;
    ``devices`` and ``stream`` hold the ``local`` devices, ``training`` those of them taking part in
    the round at hand."""

    config: ClsConfig
    seed: int
    data: Dataset
    parts: list[np.ndarray]
    devices: DeviceModels
    stream: BatchStream
    training: list[int] = field(default_factory=list)
    """The local devices that train this round (the runner sets it each round: the devices sampled
    for it; every local device at full participation)."""

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
        return cls(config, seed, data, parts, DeviceModels(template, local), stream, local)

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

    @property
    def training_rows(self) -> list[int]:
        """The stack rows of ``training``, in its order."""
        return [self.devices.row(d) for d in self.training]

    def train_devices(self, iterations: int, loss_fn: LocalLoss) -> None:
        """``iterations`` local SGD steps of every device of ``training`` on its own minibatches, as
        one stack of those devices alone; the others' weights and data streams are not touched."""
        rows = self.training_rows
        part = self.devices.stack(rows)
        local_sgd(part, self.data, self.stream.take(iterations, self.config.batch_size, rows), self.config.lr, loss_fn)
        self.devices.put_back(part)

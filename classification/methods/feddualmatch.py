"""FedDualMatch and FedDM [FedDualMatch, OpenReview; Xiong et al. 2023]: clients upload distilled synthetic
sets instead of weights.

Each round every client rebuilds its synthetic set S_k from its real data by distribution matching
under a model drawn on the error ball around the global weights it last received
(:func:`frd.classification.distillation.client.distill`); it uploads S_k (float32 images plus its class
list). The server trains the global model on what arrived
(:func:`frd.classification.distillation.server.server_update`: FedDualMatch with global gradient matching
and the adaptive radius R_t, FedDM on ∪ S_k with ρ = 5) and broadcasts its weights; FedDualMatch
also sends R_t (one float32), which the clients need for their next error ball.

Both methods share this exchange; they differ only in their client and server presets.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import ClassVar, Literal, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from frd.classification.config import ClsConfig
from frd.classification.context import RunContext
from frd.classification.data import Dataset
from frd.classification.distillation.client import ClientData, DistillConfig, SyntheticSet, distill_clients
from frd.classification.distillation.dp import DPConfig, client_epsilon
from frd.classification.distillation.server import ServerConfig, server_update
from frd.classification.methods.base import GLOBAL, Method, broadcast_weights, load_weights
from frd.errors import FrdError
from frd.options import at_least, positive
from frd.payload import FLOAT_BITS, Payload
from frd.seeding import MethodStream

CPU_WIDTH = 32
"""ConvNet channels under the cpu preset when no --width is given [our choice; the paper's 128 takes minutes
per round on a CPU core]."""


@dataclass(frozen=True)
class DistillationOptions:
    """The synthetic sets' size, the budgets and differential privacy."""

    ipc: int = 10
    """Synthetic images per class each client uploads [FedDualMatch, OpenReview: 10]."""
    distill_preset: Literal["cpu", "paper"] = "cpu"
    """Budgets: cpu (scaled down) or paper (the published scale, GPU work); see
    ``DistillConfig.preset`` and ``ServerConfig.preset``."""
    distill_iterations: int | None = None
    """Image updates per client and round; None: the preset's (cpu 30, paper 20,000)."""
    server_epochs: int | None = None
    """Server training epochs T_g on the synthetic data; None: the preset's (cpu 50, paper 300)."""
    image_lr: float | None = None
    """SGD rate of the clients' image updates; None: the preset's (1.0, DM's, for networks drawn at
    random; the seed gives none)."""
    dp_noise: float | None = None
    """DP noise factor σ on the synthetic-set gradient; None: no DP."""
    dp_clip: float = 1.0
    """With DP: clip norm C of that gradient."""
    init: Literal["real", "noise"] | None = field(default=None, metadata={"flag": "synthetic-init"})
    """Start of each synthetic set: real images or N(0, 1) noise; None: the method's own (FedDM
    real, FedDualMatch noise). Seed 000 reran its FedDM baseline from noise. Its flag is not
    ``--init``, which in ``frd rl`` means the networks' initial weights."""

    def __post_init__(self) -> None:
        at_least(self, ipc=1, distill_iterations=1, server_epochs=0, dp_noise=0)
        positive(self, "dp_clip", "image_lr")


class DatasetDistillation(Method):
    """The exchange both methods share. Subclasses name their presets (``preset``)."""

    Options = DistillationOptions
    preset: ClassVar[str]
    partial_participation = True

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        if not hasattr(ctx.devices.template, "layer_outputs"):
            raise FrdError(f"{self.preset} matches per-layer features, which the {ctx.config.model} model "
                           "does not expose: use --model convnet (or auto)")
        self.client, self.server_config = self.configs(ctx)
        self.server = ctx.new_model()
        first = self.server_config.radius if self.server_config.radius is not None else self.server_config.initial_radius
        self.radius = [first] * ctx.config.devices  # each client's R, as it last received it
        self.generators = [_torch_generator(ctx, MethodStream.DD_CLIENT, d) for d in range(ctx.config.devices)]
        self.server_generator = _torch_generator(ctx, MethodStream.DD_SERVER)
        self.sets: dict[int, SyntheticSet] = {}
        self.next_radius = first
        self.distilled_rounds = np.zeros(ctx.config.devices, dtype=int)

    @classmethod
    def resolve(cls, config: ClsConfig) -> ClsConfig:
        """``--model auto`` is the DD ConvNet (matching needs every block's output); under the cpu preset
        its width defaults to ``CPU_WIDTH`` rather than the paper's 128."""
        model = "convnet" if config.model == "auto" else config.model
        cpu = config.options.distill_preset == "cpu"
        width = CPU_WIDTH if config.width is None and model == "convnet" and cpu else config.width
        return replace(config, model=model, width=width)

    @classmethod
    def configs(cls, ctx: RunContext) -> tuple[DistillConfig, ServerConfig]:
        """The method's presets at the run's scale, with the run's IPC, budgets and DP option."""
        c = ctx.config.options
        client = replace(DistillConfig.preset(cls.preset, c.distill_preset), ipc=c.ipc,
                         dp=None if c.dp_noise is None else DPConfig(clip_norm=c.dp_clip, noise=c.dp_noise))
        server = ServerConfig.preset(cls.preset, c.distill_preset)
        if c.distill_iterations is not None:
            client = replace(client, iterations=c.distill_iterations)
        if c.init is not None:
            client = replace(client, init=c.init)
        if c.image_lr is not None:
            client = replace(client, image_lr=c.image_lr)
        if c.server_epochs is not None:
            server = replace(server, finetune_epochs=c.server_epochs)
        return client, server

    def local_train(self, round_: int) -> None:
        """Every client of the round distils afresh around the global weights it holds (instead of
        local SGD), all of them in one pass; each gets the set it would get alone."""
        self.sets = {}  # a set lives until its upload: memory grows with the round's clients, not all of them
        clients = []
        for device in self.ctx.training:
            images, labels = self.ctx.device_data(device)
            clients.append(ClientData(self.ctx.devices.module(device), Dataset.inputs(images), labels,
                                      self.radius[device], self.generators[device]))
        for device, synthetic in zip(self.ctx.training, distill_clients(clients, self.client)):
            self.sets[device] = synthetic
            self.distilled_rounds[device] += 1

    counts_flops = False

    def local_flops(self) -> float | None:
        """Not counted yet: distillation's gradient matching is not the SGD steps the default counts."""
        return None

    def upload(self, device: int) -> Payload:
        return self.sets[device].to_payload(self.ctx.classes)

    def aggregate(self, uploads: Mapping[int, Payload], participants: Sequence[int]) -> dict[int, Payload]:
        sets = [SyntheticSet.from_payload(u) for u in uploads.values()]
        self.next_radius = server_update(self.server, sets, self.server_config, self.server_generator)
        extra = {}
        if self.server_config.radius is None:  # adaptive R_t travels with the weights; a fixed ρ is known
            extra["radius"] = (np.array([self.next_radius], dtype=np.float32), FLOAT_BITS)
        return broadcast_weights(self.server, participants, **extra)

    def download(self, device: int, payload: Payload) -> None:
        load_weights(self.ctx, device, payload)
        if "radius" in payload.arrays:
            self.radius[device] = float(payload["radius"][0])

    def participant_state(self, device: int) -> dict[str, np.ndarray]:
        return {"radius": np.array([self.radius[device]]), "generator": self.generators[device].get_state().numpy()}

    def restore_participant(self, device: int, state: Mapping[str, np.ndarray]) -> None:
        self.radius[device] = float(state["radius"][0])
        self.generators[device].set_state(torch.from_numpy(state["generator"].copy()))

    def participant_summary(self, device: int) -> dict[str, np.ndarray]:
        """The rounds the client distilled in, which its DP ε counts."""
        return {"distilled_rounds": self.distilled_rounds[device:device + 1].copy()}

    def restore_participant_summary(self, device: int, summary: Mapping[str, np.ndarray]) -> None:
        self.distilled_rounds[device] = int(summary["distilled_rounds"][0])

    def global_model(self) -> nn.Module:
        return self.server

    def models_to_evaluate(self) -> dict[int, nn.Module]:
        """Only the global model: clients hold no model of their own, just the last broadcast."""
        return {GLOBAL: self.server}

    def run_summary(self) -> dict[str, float]:
        """With DP: the largest ε over clients at δ (each client's iterations over all its rounds)."""
        dp = self.client.dp
        if dp is None:
            return {}
        worst = 0.0
        for device, rounds in enumerate(self.distilled_rounds):
            if rounds == 0:  # never sampled (partial participation): released nothing
                continue
            _, labels = self.ctx.device_data(device)
            counts = np.bincount(labels.numpy())
            worst = max(worst, client_epsilon(dp, self.client.ipc * int((counts > 0).sum()), counts.tolist(),
                                              self.client.real_batch, int(rounds) * self.client.iterations))
        return {"dp_epsilon": worst, "dp_delta": dp.delta}


class FedDualMatch(DatasetDistillation):
    """Noise-initialised S_k, backward layer-wise matching; server gradient matching and adaptive R_t."""

    preset = "feddualmatch"


class FedDM(DatasetDistillation):
    """Real-initialised S_k matched on the last feature layer and logits; server trains on ∪ S_k; ρ = 5."""

    preset = "feddm"


def _torch_generator(ctx: RunContext, *keys: int) -> torch.Generator:
    """A torch generator seeded from the run's method stream (one per client, one for the server)."""
    return torch.Generator().manual_seed(int(ctx.rng(*keys).integers(1 << 62)))

"""FL (FedAvg): devices upload their weights, the server averages them weighted by local sample
counts, every device downloads the average."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn.utils import vector_to_parameters

from frd.classification.context import RunContext
from frd.classification.methods.base import Method, load_weights
from frd.exchange import broadcast
from frd.payload import FLOAT_BITS, Payload


def weighted_mean(vectors: Sequence[np.ndarray], weights: Sequence[float]) -> np.ndarray:
    """Σ w_i v_i / Σ w_i in float64, returned as float32 (what goes on the wire)."""
    w = np.asarray(weights, dtype=np.float64)
    return (np.tensordot(w, np.stack(vectors).astype(np.float64), axes=1) / w.sum()).astype(np.float32)


class FedAvg(Method):
    """The server knows each device's sample count (registered when it joins; not charged per round).
    The average weighs the uploads that arrived, so under partial participation the round's
    participants by their samples [McMahan et al. 2017, Algorithm 1]."""

    partial_participation = True

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        self.server = ctx.new_model()

    def upload(self, device: int) -> Payload:
        weights = self.ctx.devices.flat(device)
        return Payload.of("weights", weights.size, weights=(weights, FLOAT_BITS))

    def aggregate(self, uploads: Mapping[int, Payload], participants: Sequence[int]) -> dict[int, Payload]:
        counts = self.ctx.sample_counts
        average = weighted_mean([u["weights"] for u in uploads.values()], [counts[p] for p in uploads])
        vector_to_parameters(torch.from_numpy(average), self.server.parameters())
        return broadcast(Payload.of("weights", average.size, weights=(average, FLOAT_BITS)), participants)

    def download(self, device: int, payload: Payload) -> None:
        load_weights(self.ctx, device, payload)

    def global_model(self) -> nn.Module:
        return self.server

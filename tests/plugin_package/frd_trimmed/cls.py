"""The classification plug-in: FedAvg whose server takes a trimmed mean of the devices' weights."""
from __future__ import annotations

from typing import Mapping, Sequence

import torch
from torch.nn.utils import vector_to_parameters

from frd.classification.methods.fl import FedAvg
from frd.exchange import broadcast
from frd.payload import FLOAT_BITS, Payload
from frd_trimmed import TrimOptions, trimmed_mean


class TrimmedFedAvg(FedAvg):
    """FedAvg whose server takes a trimmed mean of the devices' weights (unweighted)."""

    Options = TrimOptions

    def aggregate(self, uploads: Mapping[int, Payload], participants: Sequence[int]) -> dict[int, Payload]:
        average = trimmed_mean([u["weights"] for u in uploads.values()], self.options.trim)
        vector_to_parameters(torch.from_numpy(average), self.server.parameters())
        return broadcast(Payload.of("weights", average.size, weights=(average, FLOAT_BITS)), participants)

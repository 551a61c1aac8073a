"""The RL plug-in: FRL whose server takes a trimmed mean of the agents' actor weights."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from frd.exchange import broadcast
from frd.payload import FLOAT_BITS, Payload
from frd.rl.methods.frl import FederatedRL, FRLOptions
from frd_trimmed import TrimOptions, trimmed_mean


@dataclass(frozen=True)
class TrimmedFRLOptions(FRLOptions, TrimOptions):
    """FRL's options, and the trim."""


class TrimmedFRL(FederatedRL):
    """FRL whose server takes a trimmed mean of the agents' actor weights."""

    description = "FRL with a trimmed mean of the weights"
    Options = TrimmedFRLOptions  # type: ignore[assignment]

    def aggregate(self, uploads: Mapping[int, Payload], participants: Sequence[int]) -> dict[int, Payload]:
        first = next(iter(uploads.values()))
        mean = {k: (trimmed_mean([u[k] for u in uploads.values()], self.options.trim), FLOAT_BITS) for k in first.arrays}
        return broadcast(Payload.of("global_weights", first.entries, **mean), participants)

"""FLD, MixFLD and Mix2FLD [seeds 001 and 003]: outputs up as in FD, weights down as in FL.

Once, before round 1 (round 0 of the ledger), every device uploads ``n_mix`` seed samples: FLD
raw samples, MixFLD and Mix2FLD mixed-up ones (:func:`classification.mixup.mixup`). The Mix2FLD
server turns the mixed samples it received into ``n_inv`` hard-labelled ones by inverse-Mixup.
Each round the devices train locally on cross-entropy and upload their per-label mean outputs
(FD's bookkeeping); the server averages them per label over the uploads that arrived, runs
``server_iterations`` SGD steps (step ``server_lr``) of the global model on the KD loss
CE(teacher, global output) on the seed samples — the teacher of a sample is the average output
of its label, for a soft label the soft-label-weighted mix of them — and every device downloads
the global weights.

Choices where the seeds are silent [ours]:
- a seed sample goes up as 8-bit pixels (the letter's b_s = 8 bits × 28 × 28); a mixed sample is
  rounded to 8 bits before upload, and the server works on what it received;
- its label goes up as label indices of ``index_bits(classes)`` bits: one (FLD) or two (the
  γ-weighted label, then the (1−γ)-weighted one; γ is common to all devices);
- the global model keeps its weights from one round to the next (KD continues from the last
  global model rather than from scratch);
- a label no arriving upload has an output for gives no teacher: its seed samples sit out that
  round's KD.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parameters_to_vector

from frd.errors import FrdError
from frd.exchange import Exchange
from frd.payload import FLOAT_BITS, PIXEL_BITS, Payload, index_bits
from classification.context import RunContext
from classification.data import Dataset
from classification.methods.base import GLOBAL
from classification.methods.fd import FederatedDistillation, leave_one_out_teachers
from classification.mixup import MixedSamples, inverse_mixup, mixup

SEED_PICK, SERVER_DRAW = 1, 2
"""First key of ``ctx.rng``: a device's choice of seed samples (with the device id), the server's
draws (inverse-Mixup candidates, KD minibatches)."""


class SeedCollection:
    """The one-off exchange of round 0: devices upload seed samples, nothing comes back."""

    def __init__(self, method: "FederatedLearningAfterDistillation") -> None:
        self.method = method

    def upload(self, device: int) -> Payload:
        return self.method.seed_upload(device)

    def aggregate(self, uploads: Mapping[int, Payload], participants: Sequence[int]) -> dict[int, Payload]:
        self.method.receive_seeds(uploads)
        return {}

    def download(self, device: int, payload: Payload) -> None:
        raise AssertionError("the seed-sample exchange sends nothing down")


class FederatedLearningAfterDistillation(FederatedDistillation):
    """FLD with raw seed samples. FD's per-label output recording is reused as is: the devices never
    download teachers (they get weights), so FD's teachers stay NaN and its KD term stays zero."""

    seed_kind = "seed_samples"

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        self.server = ctx.new_model()
        self.seed_x = torch.empty(0, *ctx.data.image_shape)
        self.seed_soft = torch.empty(0, ctx.classes)
        self.server_rng = ctx.rng(SERVER_DRAW)
        self.label_bits = index_bits(ctx.classes)

    # -- round 0: seed samples

    def setup_exchange(self) -> Exchange:
        return SeedCollection(self)

    def _pixels(self, device: int) -> tuple[np.ndarray, np.ndarray]:
        x, y = self.ctx.device_data(device)
        return x.numpy(), y.numpy()

    def seed_upload(self, device: int) -> Payload:
        """``n_mix`` raw samples drawn without replacement, with their labels."""
        x, y = self._pixels(device)
        n = self.ctx.config.n_mix
        if n > len(y):
            raise FrdError(f"FLD: device {device} holds {len(y)} samples, --n-mix {n} asked; lower --n-mix")
        pick = self.ctx.rng(SEED_PICK, device).choice(len(y), n, replace=False)
        return Payload.of(self.seed_kind, n, x=(x[pick], PIXEL_BITS), label=(y[pick, None], self.label_bits))

    def receive_seeds(self, uploads: Mapping[int, Payload]) -> None:
        """The server's seed set from the uploads that arrived: inputs and soft labels."""
        x = np.concatenate([u["x"] for u in uploads.values()])
        soft = np.zeros((len(x), self.ctx.classes))
        soft[np.arange(len(x)), np.concatenate([u["label"][:, 0] for u in uploads.values()])] = 1.0
        self._keep_seeds(x, soft)

    def _keep_seeds(self, x: np.ndarray, soft: np.ndarray) -> None:
        self.seed_x = Dataset.inputs(torch.tensor(x, dtype=torch.float32))
        self.seed_soft = torch.tensor(soft, dtype=torch.float32)

    # -- rounds: outputs up (FD's upload), global weights down

    def aggregate(self, uploads: Mapping[int, Payload], participants: Sequence[int]) -> dict[int, Payload]:
        outputs = leave_one_out_teachers({p: u["outputs"] for p, u in uploads.items()}, [GLOBAL])[GLOBAL]
        self.distill_server(torch.from_numpy(outputs))
        weights = parameters_to_vector(self.server.parameters()).detach().numpy().copy()
        broadcast = Payload.of("weights", weights.size, weights=(weights, FLOAT_BITS))
        return {p: broadcast for p in participants}

    def distill_server(self, outputs: torch.Tensor) -> None:
        """``server_iterations`` SGD steps on CE(teacher, global output) over random seed minibatches;
        ``outputs`` [labels, labels] are the global per-label mean outputs (NaN rows: no output)."""
        known = ~outputs.isnan().any(1)
        usable = (self.seed_soft[:, ~known] == 0).all(1)
        x, soft = self.seed_x[usable], self.seed_soft[usable]
        if len(x) == 0:
            return
        teacher = soft[:, known] @ outputs[known]
        config = self.ctx.config
        optimizer = torch.optim.SGD(self.server.parameters(), lr=config.server_lr)
        draws = self.server_rng.integers(len(x), size=(config.server_iterations, min(config.batch_size, len(x))))
        for batch in torch.from_numpy(draws):
            loss = -(teacher[batch] * F.log_softmax(self.server(x[batch]), -1)).sum(-1).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    def download(self, device: int, payload: Payload) -> None:
        self.ctx.devices.load_flat(device, payload["weights"])

    def global_model(self) -> nn.Module:
        return self.server


class MixFLD(FederatedLearningAfterDistillation):
    """FLD whose seed samples are mixed up on the device: x̂ = γ·x_i + (1−γ)·x_j, y_i ≠ y_j."""

    seed_kind = "mixed_samples"

    def seed_upload(self, device: int) -> Payload:
        x, y = self._pixels(device)
        mixed = mixup(x, y, self.ctx.config.n_mix, self.ctx.config.gamma, self.ctx.rng(SEED_PICK, device),
                      n_classes=self.ctx.classes, device=device)
        pixels = np.clip(np.rint(mixed.x), 0, 255).astype(np.uint8)
        return Payload.of(self.seed_kind, len(mixed), x=(pixels, PIXEL_BITS), label=(mixed.label, self.label_bits))

    def received_mixes(self, uploads: Mapping[int, Payload]) -> MixedSamples:
        """What the server holds: the mixed pixels, soft labels from (label pairs, γ), the senders.
        The devices' private provenance (which local samples) is unknown to it: index −1."""
        gamma = self.ctx.config.gamma
        parts = []
        for device, u in uploads.items():
            n, label = u.entries, u["label"].astype(np.int64)
            soft = np.zeros((n, self.ctx.classes))
            soft[np.arange(n), label[:, 0]] += gamma
            soft[np.arange(n), label[:, 1]] += 1.0 - gamma
            parts.append(MixedSamples(u["x"].astype(np.float64), soft, np.full(n, device), np.full((n, 2), -1),
                                      label, np.full(n, gamma)))
        return MixedSamples.concat(parts)

    def receive_seeds(self, uploads: Mapping[int, Payload]) -> None:
        mixed = self.received_mixes(uploads)
        self._keep_seeds(mixed.x, mixed.soft)


class Mix2FLD(MixFLD):
    """MixFLD plus the server's inverse-Mixup: ``n_inv`` hard-labelled samples, each from ``n_s``
    mixed samples of ``n_s`` different devices."""

    def receive_seeds(self, uploads: Mapping[int, Payload]) -> None:
        config = self.ctx.config
        inverse = inverse_mixup(self.received_mixes(uploads), config.n_inv, self.server_rng, n_s=config.n_s)
        self._keep_seeds(inverse.x, np.eye(self.ctx.classes)[inverse.label])

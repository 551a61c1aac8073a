"""FLD, MixFLD and Mix2FLD [Seo et al. 2022, §3; Oh et al. 2020]: outputs up as in FD, weights down as in FL.

Once, before round 1 (round 0 of the ledger), every device uploads ``n_mix`` seed samples: FLD
raw samples, MixFLD and Mix2FLD mixed-up ones (:func:`frd.classification.mixup.mixup`). The Mix2FLD
server turns the mixed samples it received into ``n_inv`` hard-labelled ones by inverse-Mixup.
Each round the devices train locally on cross-entropy and upload their per-label mean outputs
(FD's bookkeeping); the server averages them per label over the uploads that arrived, runs
``server_iterations`` SGD steps (step ``server_lr``) of the global model on the KD loss
CE(teacher, global output) on the seed samples — the teacher of a sample is the average output
of its label, for a soft label the soft-label-weighted mix of them — and every device downloads
the global weights.

Choices where the sources are silent [our choice]:
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

from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar, Literal, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from frd.classification.context import RunContext
from frd.classification.data import Dataset
from frd.classification.methods.base import GLOBAL, Method, broadcast_weights, load_weights
from frd.classification.methods.fd import OutputRecorder, leave_one_out_teachers
from frd.classification.mixup import MixedSamples, inverse_mixup, mirrored_label_pairs, mixup
from frd.errors import FrdError
from frd.exchange import Exchange
from frd.options import at_least, positive
from frd.payload import PIXEL_BITS, Payload, index_bits
from frd.seeding import MethodStream

PAIR_LIST_FACTOR = 20
"""The shared label-pair list holds this many pairs per seed sample, so a device that lacks some
labels (non-IID data) still finds n_mix pairs it can serve, in the list's order."""


@dataclass(frozen=True)
class FLDOptions:
    """Seed samples and the server's output-to-model distillation."""

    PAPER: ClassVar[dict] = {"server_iterations": 3200, "server_lr": 0.05}
    """[Oh et al. 2020] K_s = 3,200 server KD iterations per global update; ε = 0.05 (our reading: the KD step)."""

    n_mix: int = 50
    """Seed samples each device uploads once (raw or mixed) [Oh et al. 2020: 10 or 50; 50 as in its
    largest setting (50, 100)]; a device whose data cannot give that many uploads what it can (the
    shortfall is in runs.csv)."""
    server_iterations: int = 800
    """Server KD iterations per global update [paper K_s = 3,200; scaled down 4× like K]."""
    server_lr: float = 0.05
    """Server KD step size [Oh et al. 2020 lists ε = 0.05 without defining it; this is our reading]."""
    server_loss: Literal["ce+kd", "kd"] = "ce+kd"
    """Server loss on the seed samples: CE(seed label) + β_s·CE(teacher) [our reading from the
    chapter's notation, f_g and F_g], or the teacher's CE alone (kd, the earlier reading)."""
    server_beta: float = 0.01
    """β_s, the weight of the teacher term in ce+kd [Oh et al. 2020: β = 0.01]."""

    def __post_init__(self) -> None:
        at_least(self, n_mix=1, server_iterations=0, server_beta=0)
        positive(self, "server_lr")


@dataclass(frozen=True)
class MixFLDOptions(FLDOptions):
    """FLD's options plus the mixing ratio."""

    gamma: float = 0.2
    """Mixing ratio γ in (0, 0.5) [Oh et al. 2020: γ ∈ (0, 0.5); the value is our choice]."""
    pairing: Literal["mirrored", "random"] = "mirrored"
    """Label pairs of the mixes: mirrored (a shared list; even devices (a, b), odd ones (b, a),
    so inverse-Mixup finds partners) [our choice], or random different-label pairs per device."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 < self.gamma < 0.5:
            raise FrdError(f"--gamma must lie in (0, 0.5), got {self.gamma}; e.g. 0.2 "
                           "(values near 0 leak raw samples, 0.5 cannot be inverted)")


@dataclass(frozen=True)
class Mix2FLDOptions(MixFLDOptions):
    """MixFLD's options plus the server's inverse-Mixup."""

    n_inv: int | None = 100
    """Inverse-mixed samples the server makes per device, like n_mix [Oh et al. 2020: 10, 20, 50 or 100];
    None: every one it can. Fewer than asked (e.g. uploads lost) is recorded, not an error."""
    n_s: int = 2
    """Mixed samples (of n_s different devices) per inverse-Mixup group [Oh et al. 2020: 2]."""

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least(self, n_inv=1, n_s=2)


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

    def finish_round(self) -> None:
        """Nothing comes down, so nothing is left to apply."""


class FederatedLearningAfterDistillation(Method):
    """FLD with raw seed samples; the devices' per-label mean outputs are recorded as in FD."""

    Options = FLDOptions
    seed_kind = "seed_samples"
    partial_participation = True

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        self.outputs = OutputRecorder(ctx)
        self.server = ctx.new_model()
        self.seed_x = torch.empty(0, *ctx.data.image_shape)
        self.seed_soft = torch.empty(0, ctx.classes)
        self.server_rng = ctx.rng(MethodStream.SERVER_DRAW)
        self.label_bits = index_bits(ctx.classes)
        self.seed_shortfall = np.zeros(ctx.config.devices, dtype=np.int64)  # per device: seed samples it could not make
        self.inverse_shortfall = 0  # inverse-mixed samples the server could not build (Mix2FLD)

    # -- round 0: seed samples

    def setup_exchange(self) -> Exchange:
        return SeedCollection(self)

    def _pixels(self, device: int) -> tuple[np.ndarray, np.ndarray]:
        x, y = self.ctx.device_data(device)
        return x.numpy(), y.numpy()

    def seed_upload(self, device: int) -> Payload:
        """``n_mix`` raw samples drawn without replacement (all of them if it holds fewer), with labels."""
        x, y = self._pixels(device)
        n = min(self.options.n_mix, len(y))
        self.seed_shortfall[device] += self.options.n_mix - n
        pick = self.ctx.rng(MethodStream.SEED_PICK, device).choice(len(y), n, replace=False)
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

    def local_train(self, round_: int) -> None:
        self.outputs.start()
        super().local_train(round_)

    def local_loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        self.outputs.record(logits, labels)
        return super().local_loss(logits, labels)

    def upload(self, device: int) -> Payload:
        return self.outputs.upload(device)

    def aggregate(self, uploads: Mapping[int, Payload], participants: Sequence[int]) -> dict[int, Payload]:
        outputs = leave_one_out_teachers({p: u["outputs"] for p, u in uploads.items()}, [GLOBAL])[GLOBAL]
        self.distill_server(torch.from_numpy(outputs))
        return broadcast_weights(self.server, participants)

    def distill_server(self, outputs: torch.Tensor) -> None:
        """``server_iterations`` SGD steps of the global model over random seed minibatches;
        ``outputs`` [labels, labels] are the global per-label mean outputs (NaN rows: no output).

        The teacher of a seed sample is the mean output of its label (for a soft label, the
        soft-label-weighted mix of them); a sample whose labels have no output has none. Loss
        ``ce+kd``: CE(seed label, f_g(x)) + β_s·CE(teacher, f_g(x)) on every seed sample (the
        teacher term where there is one); ``kd``: CE(teacher, f_g(x)) on the samples with one.
        """
        known = ~outputs.isnan().any(1)
        has_teacher = (self.seed_soft[:, ~known] == 0).all(1)
        options = self.options
        kd_only = options.server_loss == "kd"
        x, soft = (self.seed_x[has_teacher], self.seed_soft[has_teacher]) if kd_only else (self.seed_x, self.seed_soft)
        if len(x) == 0:
            return
        teacher = soft[:, known] @ outputs[known]
        if not kd_only:
            teacher = teacher * has_teacher[:, None]  # no teacher term where a label has no output
        optimizer = torch.optim.SGD(self.server.parameters(), lr=options.server_lr)
        draws = self.server_rng.integers(len(x), size=(options.server_iterations,
                                                       min(self.ctx.config.batch_size, len(x))))
        for batch in torch.from_numpy(draws):
            logp = F.log_softmax(self.server(x[batch]), -1)
            kd = -(teacher[batch] * logp).sum(-1)
            loss = kd.mean() if kd_only else (-(soft[batch] * logp).sum(-1) + options.server_beta * kd).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    def run_summary(self) -> dict[str, float]:
        """Seed samples the devices could not make and inverse-mixed ones the server could not build."""
        return {"seed_shortfall": int(self.seed_shortfall.sum()), "inverse_shortfall": self.inverse_shortfall}

    def participant_summary(self, device: int) -> dict[str, np.ndarray]:
        """The device's seed shortfall (the inverse one is the server's own)."""
        return {"seed_shortfall": self.seed_shortfall[device:device + 1].copy()}

    def restore_participant_summary(self, device: int, summary: Mapping[str, np.ndarray]) -> None:
        self.seed_shortfall[device] = int(summary["seed_shortfall"][0])

    def download(self, device: int, payload: Payload) -> None:
        load_weights(self.ctx, device, payload)

    def global_model(self) -> nn.Module:
        return self.server


class MixFLD(FederatedLearningAfterDistillation):
    """FLD whose seed samples are mixed up on the device: x̂ = γ·x_i + (1−γ)·x_j, y_i ≠ y_j."""

    Options = MixFLDOptions
    seed_kind = "mixed_samples"

    @cached_property
    def shared_pairs(self) -> np.ndarray:
        """The run's one list of label pairs (drawn from its own stream, as if the server sent it)."""
        return mirrored_label_pairs(self.ctx.classes, PAIR_LIST_FACTOR * self.options.n_mix,
                                    self.ctx.rng(MethodStream.LABEL_PAIRS))

    def label_pairs(self, device: int) -> np.ndarray | None:
        """The device's preferred label pairs: the shared list, mirrored on odd devices."""
        if self.options.pairing == "random":
            return None
        return self.shared_pairs[:, ::-1] if device % 2 else self.shared_pairs

    def seed_upload(self, device: int) -> Payload:
        x, y = self._pixels(device)
        mixed = mixup(x, y, self.options.n_mix, self.options.gamma, self.ctx.rng(MethodStream.SEED_PICK, device),
                      n_classes=self.ctx.classes, device=device, label_pairs=self.label_pairs(device))
        self.seed_shortfall[device] += self.options.n_mix - len(mixed)
        pixels = np.clip(np.rint(mixed.x), 0, 255).astype(np.uint8)
        return Payload.of(self.seed_kind, len(mixed), x=(pixels, PIXEL_BITS), label=(mixed.label, self.label_bits))

    def received_mixes(self, uploads: Mapping[int, Payload]) -> MixedSamples:
        """What the server holds: the mixed pixels, soft labels from (label pairs, γ), the senders.
        The devices' private provenance (which local samples) is unknown to it: index −1."""
        gamma = self.options.gamma
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

    Options = Mix2FLDOptions

    def receive_seeds(self, uploads: Mapping[int, Payload]) -> None:
        options = self.options
        wanted = None if options.n_inv is None else options.n_inv * self.ctx.config.participants_per_round
        inverse = inverse_mixup(self.received_mixes(uploads), wanted, self.server_rng, n_s=options.n_s)
        self.inverse_shortfall = 0 if wanted is None else wanted - len(inverse)
        self._keep_seeds(inverse.x, np.eye(self.ctx.classes)[inverse.label])

"""FD [Seo et al. 2022, §2, four steps]: each device keeps its mean softmax output per label during local
training and uploads it; the server sends device c, for each label, the mean over the *other*
devices (Σ_{c'≠c} / (C−1)); devices then train on CE + β·CE(teacher of the label, own output)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from frd.classification.context import RunContext
from frd.classification.methods.base import Method
from frd.options import at_least
from frd.payload import FLOAT_BITS, Payload


def leave_one_out_teachers(outputs: Mapping[int, np.ndarray], participants: Sequence[int]) -> dict[int, np.ndarray]:
    """Per participant c, the per-label mean of the uploaded [labels, labels] matrices of every
    uploader c' ≠ c. A row that is NaN (the uploader had no sample of that label) is skipped;
    a label no other uploader has stays NaN, meaning "no teacher"."""
    stacked = np.stack(list(outputs.values())).astype(np.float64)
    known = ~np.isnan(stacked[..., :1])
    total, count = np.where(known, stacked, 0.0).sum(0), known.sum(0)
    teachers = {}
    for p in participants:
        own_total, own_count = total, count
        if p in outputs:
            i = list(outputs).index(p)
            own_total, own_count = total - np.where(known[i], stacked[i], 0.0), count - known[i]
        with np.errstate(invalid="ignore", divide="ignore"):
            teachers[p] = np.where(own_count > 0, own_total / own_count, np.nan).astype(np.float32)
    return teachers


class OutputRecorder:
    """Each device's per-label mean softmax output over the forward passes of local training
    (FD's upload; FLD's too). ``start`` clears the rows of the round's training devices."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        shape = (len(ctx.local), ctx.classes, ctx.classes)
        self.sums = torch.zeros(shape, dtype=torch.float64)
        self.counts = torch.zeros(shape[:2], dtype=torch.float64)
        self.rows = torch.arange(len(ctx.local)).unsqueeze(1)

    def start(self) -> None:
        """A new round: its training devices' rows (``rows``, the stack rows of a batched step) cleared."""
        self.rows = torch.as_tensor(self.ctx.training_rows, dtype=torch.long).unsqueeze(1)
        self.sums[self.rows[:, 0]] = 0.0
        self.counts[self.rows[:, 0]] = 0.0

    def record(self, logits: torch.Tensor, labels: torch.Tensor) -> None:
        """Add one batched step: logits [training devices, batch, classes], labels [training devices, batch]."""
        classes = self.ctx.classes
        slots = (self.rows * classes + labels).flatten()
        with torch.no_grad():
            self.sums.view(-1, classes).index_add_(0, slots, logits.softmax(-1).flatten(0, 1).double())
            self.counts.view(-1).index_add_(0, slots, torch.ones(slots.numel(), dtype=torch.float64))

    def upload(self, device: int) -> Payload:
        row = self.ctx.devices.row(device)
        means = (self.sums[row] / self.counts[row].unsqueeze(1)).float().numpy()  # NaN rows: label unseen
        return Payload.of("outputs", self.ctx.classes, outputs=(means, FLOAT_BITS))


@dataclass(frozen=True)
class FDOptions:
    """FD's local loss."""

    beta: float = 0.01
    """Weight β of the distillation term in the local loss [Oh et al. 2020: 0.01]."""

    def __post_init__(self) -> None:
        at_least(self, beta=0)


class FederatedDistillation(Method):
    """Mean outputs are collected afresh each round, from the forward passes of local training."""

    Options = FDOptions
    partial_participation = True

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        self.outputs = OutputRecorder(ctx)
        self.teachers = torch.full((len(ctx.local), ctx.classes, ctx.classes), float("nan"))

    def local_train(self, round_: int) -> None:
        self.outputs.start()
        super().local_train(round_)

    def local_loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        self.outputs.record(logits, labels)
        teacher = self.teachers[self.outputs.rows, labels]  # [devices, batch, classes]; NaN: no teacher yet
        distill = -(teacher.nan_to_num(0.0) * F.log_softmax(logits, -1)).sum(-1).mean(1)
        return super().local_loss(logits, labels) + self.options.beta * distill

    def upload(self, device: int) -> Payload:
        return self.outputs.upload(device)

    def aggregate(self, uploads: Mapping[int, Payload], participants: Sequence[int]) -> dict[int, Payload]:
        teachers = leave_one_out_teachers({p: u["outputs"] for p, u in uploads.items()}, participants)
        return {p: Payload.of("outputs", self.ctx.classes, teacher=(t, FLOAT_BITS)) for p, t in teachers.items()}

    def download(self, device: int, payload: Payload) -> None:
        self.teachers[self.ctx.devices.row(device)] = torch.from_numpy(payload["teacher"])

    def participant_state(self, device: int) -> dict[str, np.ndarray]:
        return {"teacher": self.teachers[self.ctx.devices.row(device)].numpy().copy()}

    def restore_participant(self, device: int, state: Mapping[str, np.ndarray]) -> None:
        self.teachers[self.ctx.devices.row(device)] = torch.from_numpy(state["teacher"])

"""The method interface: a method is its exchange (upload / aggregate / download) plus hooks.

The runner owns the round loop. Per run it calls ``Method(ctx)``, then ``setup_exchange()``
(a one-off transfer run through ``frd.exchange.run_round`` as round 0, so it is in the ledger),
then for each round r = 1..R: ``local_train(r)``, ``run_round(method, ...)`` (upload → aggregate
→ download), and an evaluation of every model ``models_to_evaluate()`` returns.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn.utils import parameters_to_vector

from frd.classification.config import ClsConfig
from frd.classification.context import RunContext
from frd.classification.flops import sgd_iteration_flops
from frd.classification.training import per_device_cross_entropy
from frd.exchange import Exchange, broadcast
from frd.options import NoOptions
from frd.payload import FLOAT_BITS, Payload

GLOBAL = -1
"""The ``device`` value of rows that evaluate the server's global model."""


class Method(ABC):
    """Base of every classification method. Override the exchange; override hooks as needed.
    ``Options`` is the method's options dataclass (one docstring per field); the run's resolved
    options are ``self.options``."""

    Options: ClassVar[type] = NoOptions
    partial_participation: ClassVar[bool] = False
    """Whether the method runs when a round samples only some devices (``--clients-per-round``,
    ``--fraction``): its ``local_train`` trains only ``ctx.training`` and its ``aggregate`` serves
    the uploads that arrived and the ``participants`` it is given. A method says so; one that does
    not is refused with those flags."""
    counts_flops: ClassVar[bool] = True
    """Whether ``local_flops`` counts a device's work, so that the virtual clock's options apply."""
    participants_code: ClassVar[bool] = False
    """Whether the devices encode their uploads and decode their downloads themselves (remote
    devices, ``frd.classification.remote``): the server's codecs then only decode and encode."""

    @classmethod
    def resolve(cls, config: ClsConfig) -> ClsConfig:
        """``config`` with what this method decides filled in (e.g. its model for ``--model auto``);
        default: unchanged."""
        return config

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.options: Any = ctx.config.options

    # -- the exchange, one round: every device uploads, the server aggregates, devices download

    @abstractmethod
    def upload(self, device: int) -> Payload:
        """What ``device`` sends to the server this round."""

    @abstractmethod
    def aggregate(self, uploads: Mapping[int, Payload], participants: Sequence[int]) -> dict[int, Payload]:
        """Server side, from the uploads that arrived: what each of ``participants`` downloads
        (the devices sampled for the next round; every device at full participation).
        Server-side training (of ``global_model()``) belongs here."""

    @abstractmethod
    def download(self, device: int, payload: Payload) -> None:
        """Apply what arrived at ``device`` (a failed download never gets here)."""

    def finish_round(self) -> None:  # noqa: B027 (a hook with a default, not abstract)
        """After every download of the round; default: nothing left to do."""

    # -- hooks with defaults

    def setup_exchange(self) -> Exchange | None:
        """A one-off transfer before round 1 (e.g. seed samples), or None."""
        return None

    def local_train(self, round_: int) -> None:
        """The work of the round's devices (``ctx.training``) between exchanges; default: local SGD
        on ``local_loss``. Override to replace local training (e.g. building synthetic sets instead)."""
        self.ctx.train_devices(self.ctx.config.iterations_per_round, self.local_loss)

    def local_flops(self) -> float | None:
        """A device's work in one round's ``local_train``, in FLOPs, for the virtual clock (``frd.clock``);
        default: the round's SGD iterations (``frd.classification.flops``). None: not counted (the clock's
        options are refused, and the tables' virtual times are NaN)."""
        ctx = self.ctx
        return ctx.config.iterations_per_round * sgd_iteration_flops(ctx.devices.template, ctx.data.image_shape,
                                                                      ctx.config.batch_size)

    def local_loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Per-device loss [devices] of one batched step; default cross-entropy. Override to add terms
        or to record outputs (logits [devices, batch, classes], labels [devices, batch])."""
        return per_device_cross_entropy(logits, labels)

    def participant_state(self, device: int) -> dict[str, np.ndarray]:
        """What ``device`` keeps from one round to the next beyond its weights, data stream and
        ``participant_summary`` (a Flower node rebuilds the method for every message); default nothing."""
        return {}

    def restore_participant(self, device: int, state: Mapping[str, np.ndarray]) -> None:  # noqa: B027
        """Put back what ``participant_state`` returned; default nothing."""

    def participant_summary(self, device: int) -> dict[str, np.ndarray]:
        """What ``device`` counted toward ``run_summary``, kept for the whole run: a remote device
        reports it to the server, whose copy of the method never runs the device's side; default nothing."""
        return {}

    def restore_participant_summary(self, device: int, summary: Mapping[str, np.ndarray]) -> None:  # noqa: B027
        """Take what ``device``'s ``participant_summary`` returned (on the server, or on the node
        restoring its state); default nothing."""

    def global_model(self) -> nn.Module | None:
        """The server's model, if the method keeps one."""
        return None

    def run_summary(self) -> dict[str, float]:
        """Extra columns of the run's row in runs.csv (e.g. a privacy budget); default none."""
        return {}

    def saved_models(self) -> dict[str, nn.Module]:
        """What a run saves at its end (``frd.saved``): the server's model, ``global``, where the
        method keeps one (the devices then hold its last broadcast), else every device's, ``device<d>``."""
        server = self.global_model()
        if server is not None:
            return {"global": server}
        return {f"device{d}": self.ctx.devices.module(d) for d in self.ctx.local}

    def models_to_evaluate(self) -> dict[int, nn.Module]:
        """Models evaluated after each round, by device id (``GLOBAL`` for the server's):
        the reference device's and, where one exists, the global model."""
        reference = self.ctx.config.reference_device
        models = {reference: self.ctx.devices.module(reference)}
        server = self.global_model()
        if server is not None:
            models[GLOBAL] = server
        return models


def weights_payload(model: nn.Module, **extra: tuple[Any, int]) -> Payload:
    """A model's weights as one float32 vector (plus ``extra`` arrays), for a download."""
    weights = parameters_to_vector(model.parameters()).detach().numpy().copy()
    return Payload.of("weights", weights.size, weights=(weights, FLOAT_BITS), **extra)


def broadcast_weights(model: nn.Module, participants: Sequence[int], **extra: tuple[Any, int]) -> dict[int, Payload]:
    """Every participant downloads ``model``'s weights."""
    return broadcast(weights_payload(model, **extra), participants)


def load_weights(ctx: RunContext, device: int, payload: Payload) -> None:
    """A device takes the downloaded weights as its model."""
    ctx.devices.load_flat(device, payload["weights"])

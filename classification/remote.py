"""A classification method whose devices are remote participants (one per Flower node).

Server: ``RemoteMethod`` wraps the method built as in process; the runner's loop is unchanged.
``local_train`` asks every device to train and upload, ``aggregate`` is the method's own, and the
downloads go back at the end of the round. After each step every device reports what it counted
toward the run's summary (``Method.participant_summary``, e.g. a seed shortfall or the rounds a DP
budget counts) and the reference device its weights, so the server evaluates the same model and
writes the same runs.csv as the runner in process.

Device: ``participant_reply`` rebuilds the method with only its own device in the stack, restores
what it kept (weights, data stream, the method's participant state and summary), does the step and saves
it again: Flower 1.42 starts a new process for every message.
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import pandas as pd
from torch import nn

from frd.classification.config import ClsConfig
from frd.classification.context import RunContext
from frd.classification.data import Dataset
from frd.classification.methods import Method, get_method
from frd.classification.runner import run_seed
from frd.codecs.link import CodecLink, codec_link
from frd.exchange import Exchange
from frd.payload import Payload
from frd.remote import Link, RemoteExchange, Reply, Request, Transport, array_report, timed
from frd.wire import decode, encode


class RemoteMethod(Method):
    """``inner`` (built on the server with every device, as in process) with its devices remote."""

    participants_code = True

    def __init__(self, inner: Method, link: Link) -> None:
        super().__init__(inner.ctx)
        self.inner, self.link, self.transport = inner, link, Transport()
        self.exchange = self._remote(inner, "round")

    def _remote(self, server: Exchange, stage: str, ahead: RemoteExchange | None = None) -> RemoteExchange:
        return RemoteExchange(self.link, server, stage, seed=self.ctx.seed, run_id=self.ctx.run_id,
                              participants=range(self.ctx.config.devices), transport=self.transport,
                              on_report=self._report, rounds=self.ctx.config.rounds,
                              ahead=ahead)

    def _report(self, device: int, report: Payload) -> None:
        """A device's counts for ``run_summary`` and, from the reference device, its weights for the
        runner's evaluation."""
        arrays = {name: array.values for name, array in report.arrays.items()}
        if "weights" in arrays:
            self.ctx.devices.load_flat(device, arrays.pop("weights"))
        self.inner.restore_participant_summary(device, arrays)

    def setup_exchange(self) -> Exchange | None:
        setup = self.inner.setup_exchange()
        return None if setup is None else self._remote(setup, "setup", ahead=self.exchange)

    def local_train(self, round_: int) -> None:
        self.exchange.gather(round_)

    def local_flops(self) -> float | None:
        return self.inner.local_flops()

    def upload(self, device: int) -> Payload:
        return self.exchange.upload(device)

    def aggregate(self, uploads: Mapping[int, Payload], participants: Sequence[int]) -> dict[int, Payload]:
        return self.exchange.aggregate(uploads, participants)

    def download(self, device: int, payload: Payload) -> None:
        self.exchange.download(device, payload)

    def finish_round(self) -> None:
        self.exchange.finish_round()

    def global_model(self) -> nn.Module | None:
        return self.inner.global_model()

    def models_to_evaluate(self) -> dict[int, nn.Module]:
        return self.inner.models_to_evaluate()

    def saved_models(self) -> dict[str, nn.Module]:
        """The method's, but of the devices only the one whose weights the server holds: the reference device."""
        kept = ("global", f"device{self.ctx.config.reference_device}")
        return {name: model for name, model in self.inner.saved_models().items() if name in kept}

    def run_summary(self) -> dict[str, float]:
        return self.inner.run_summary()


def _save(ctx: RunContext, method: Method, codec: CodecLink | None, device: int) -> bytes:
    arrays = {"weights": ctx.devices.flat(device), **ctx.stream.snapshot(0), **method.participant_state(device),
              **method.participant_summary(device), **(codec.kept(device) if codec is not None else {})}
    return encode(Payload.of("state", 0, **{k: (v, v.dtype.itemsize * 8) for k, v in arrays.items()}))


def _restore(ctx: RunContext, method: Method, codec: CodecLink | None, device: int, state: bytes) -> None:
    arrays = {name: array.values for name, array in decode(state).arrays.items()}
    ctx.devices.load_flat(device, arrays["weights"])
    ctx.stream.restore(0, arrays)
    method.restore_participant(device, arrays)
    method.restore_participant_summary(device, arrays)
    if codec is not None:
        codec.restore(device, arrays)


def participant_reply(config: ClsConfig, data: Dataset, device: int, request: Request,
                      state: bytes | None) -> tuple[Reply, bytes]:
    """Device ``device``'s side of one request; ``config`` is resolved (``Method.resolve``) and
    ``state`` what the previous call returned (None at the start of a run)."""
    ctx = RunContext.build(config, request.seed, data, local=[device])
    method = get_method(config.method)(ctx)
    codec = codec_link(config.codecs(), request.seed)  # this device's end: it encodes its uploads, decodes its downloads
    if state is not None:
        _restore(ctx, method, codec, device, state)
    exchange: Exchange | None = method.setup_exchange() if request.stage == "setup" else method
    assert exchange is not None, "a setup request for a method without a setup exchange"

    def report() -> bytes | None:
        weights = {"weights": ctx.devices.flat(device)} if device == config.reference_device else {}
        arrays = {**method.participant_summary(device), **weights}
        return array_report(**arrays) if arrays else None

    def upload(source: Exchange, round_: int) -> bytes:
        payload = source.upload(device)
        return encode(payload if codec is None else codec.send(payload, device, round_, "up")[0])

    def train_and_upload(round_: int) -> bytes:
        method.local_train(round_)
        return upload(method, round_)

    def work() -> tuple[bytes | None, bytes | None, bytes | None]:
        if request.step == "up":
            payload = (train_and_upload(request.round) if request.stage == "round"
                       else upload(exchange, request.round))
            return payload, report(), None
        if request.payload is not None:
            download = decode(request.payload)
            if codec is not None:
                download = codec.decode(download, device, "down")
                codec.received(device, download)
            exchange.download(device, download)
        exchange.finish_round()
        after_download = report()
        if request.next_round is None:
            return None, after_download, None
        return train_and_upload(request.next_round), after_download, report()

    reply = timed(work)
    return reply, _save(ctx, method, codec, device)


def run_remote(config: ClsConfig, seed: int, data: Dataset, link: Link,
               on_round: Callable[[], object] = lambda: None) -> dict[str, pd.DataFrame]:
    """``run_seed`` with the devices reached over ``link``: its tables plus ``transport``."""
    made: list[RemoteMethod] = []

    def wrap(method: Method) -> Method:
        made.append(RemoteMethod(method, link))
        return made[0]

    tables = run_seed(config, seed, data, on_round, wrap)
    return {**tables, "transport": made[0].transport.frame()}


def resolved(config: ClsConfig) -> ClsConfig:
    """``config`` as the method resolves it (what ``build_run`` uses), for the participants."""
    return get_method(config.method).resolve(config)


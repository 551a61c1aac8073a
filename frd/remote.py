"""An exchange whose participants live elsewhere: the same ``run_round``, the uploads gathered and
the downloads delivered over a ``Link`` (Flower, or a loopback in tests).

The server keeps the method's own object for ``aggregate``; each participant runs the method's
participant side on its node. Payloads cross as ``frd.wire`` bytes. The ledger still charges the
declared bits (``run_round`` does that); what the link measured — wire bytes and seconds per
transfer — goes to ``transport.csv``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol, Sequence

import numpy as np
import pandas as pd

from frd.exchange import Exchange
from frd.payload import Payload
from frd.wire import decode, encode

TRANSPORT_COLUMNS = ["run_id", "round", "participant", "direction", "kind", "bits", "wire_bytes", "seconds"]
"""transport.csv: one row per transfer over a real link. ``bits`` is what the ledger charges,
``wire_bytes`` what crossed (codec header and packing included), ``seconds`` the message's round
trip less the node's own work (so it includes the link's messaging overhead)."""


@dataclass(frozen=True)
class Request:
    """What the server asks of one participant: ``stage`` (``setup`` or ``round``) and ``step``
    (``up``: work, then upload; ``down``: take ``payload``, if any, and finish the round)."""

    stage: str
    step: str
    seed: int
    round: int
    payload: bytes | None = None


@dataclass(frozen=True)
class Reply:
    """A participant's answer: its upload (``up``), a report the server reads for evaluation only
    (never charged: in process the runner reads it directly), and the seconds it worked."""

    payload: bytes | None
    report: bytes | None
    work_s: float


class Link(Protocol):
    def send(self, requests: Mapping[int, Request]) -> dict[int, tuple[Reply, float]]:
        """Deliver one request per participant; each reply with its round trip in seconds."""


@dataclass
class Transport:
    """Rows of transport.csv."""

    rows: list[dict] = field(default_factory=list)

    def record(self, run_id: str, round_: int, participant: int, direction: str, payload: bytes, seconds: float) -> None:
        sent = decode(payload)
        self.rows.append(dict(run_id=run_id, round=round_, participant=participant, direction=direction, kind=sent.kind,
                              bits=sent.bits, wire_bytes=len(payload), seconds=seconds))

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=TRANSPORT_COLUMNS)


class RemoteExchange:
    """``server``'s aggregate with the participants' side run remotely, for one stage of a run."""

    def __init__(self, link: Link, server: Exchange, stage: str, *, seed: int, run_id: str, participants: Sequence[int],
                 transport: Transport, on_report: Callable[[int, Payload], None]) -> None:
        self.link, self.server, self.stage, self.seed, self.run_id = link, server, stage, seed, run_id
        self.participants, self.transport, self.on_report = list(participants), transport, on_report
        self.round = 0
        self.uploads: dict[int, Payload] | None = None
        self.pending: dict[int, bytes] = {}

    def _send(self, step: str, payloads: Mapping[int, bytes | None]) -> dict[int, Reply]:
        replies = self.link.send({p: Request(self.stage, step, self.seed, self.round, payloads.get(p))
                                  for p in self.participants})
        for p, (reply, round_trip) in sorted(replies.items()):
            sent = reply.payload if step == "up" else payloads.get(p)
            if sent is not None:
                self.transport.record(self.run_id, self.round, p, step, sent, max(round_trip - reply.work_s, 0.0))
            if reply.report is not None:
                self.on_report(p, decode(reply.report))
        return {p: reply for p, (reply, _) in replies.items()}

    def gather(self, round_: int) -> None:
        """Every participant works (local training in a round) and uploads."""
        self.round = round_
        replies = self._send("up", {})
        self.uploads = {p: decode(r.payload) for p, r in replies.items() if r.payload is not None}

    def upload(self, participant: int) -> Payload:
        if self.uploads is None:
            self.gather(self.round)
        assert self.uploads is not None
        return self.uploads[participant]

    def aggregate(self, uploads: Mapping[int, Payload], participants: Sequence[int]) -> dict[int, Payload]:
        return self.server.aggregate(uploads, participants)

    def download(self, participant: int, payload: Payload) -> None:
        self.pending[participant] = encode(payload)

    def finish_round(self) -> None:
        """Deliver the downloads; every participant finishes the round (with or without one)."""
        self._send("down", self.pending)
        self.pending, self.uploads = {}, None


def array_report(**arrays: np.ndarray) -> bytes:
    """A report of named float32/any arrays (e.g. a device's weights for evaluation)."""
    return encode(Payload.of("report", 0, **{k: (v, v.dtype.itemsize * 8) for k, v in arrays.items()}))


def timed(work: Callable[[], tuple[bytes | None, bytes | None]]) -> Reply:
    """Run a participant's work and wrap what it returns (payload, report) with its duration."""
    started = time.perf_counter()
    payload, report = work()
    return Reply(payload, report, time.perf_counter() - started)

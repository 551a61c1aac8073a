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
trip less the node's own work (so it includes the link's messaging overhead). A download and
the next round's upload travel as one message (every message costs a Flower node a process
start); its overhead is split equally between their two rows."""


@dataclass(frozen=True)
class Request:
    """What the server asks of one participant: ``stage`` (``setup`` or ``round``) and ``step``
    (``up``: work, then upload; ``down``: take ``payload``, if any, and finish the round, then, if
    ``next_round`` is set, work and upload for that round). An RL agent's requests are of stage
    ``rl`` and name the run's ``method``; ``control`` says how the last round went for it
    (``frd.rl.remote``)."""

    stage: str
    step: str
    seed: int
    round: int
    payload: bytes | None = None
    next_round: int | None = None
    method: str | None = None
    control: bytes | None = None


@dataclass(frozen=True)
class Reply:
    """A participant's answer: its upload (``up``, or the next round's), a report the server reads
    for evaluation and the run's summary only (never charged: in process the runner reads it
    directly), the seconds it worked, and with a next round, the report after that round's work."""

    payload: bytes | None
    report: bytes | None
    work_s: float
    next_report: bytes | None = None


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
        """In the ledger's order: by round, uploads before downloads, by participant."""
        order = sorted(range(len(self.rows)), key=lambda i: (self.rows[i]["round"], self.rows[i]["direction"] != "up",
                                                             self.rows[i]["participant"]))
        return pd.DataFrame([self.rows[i] for i in order], columns=TRANSPORT_COLUMNS)


class RemoteExchange:
    """``server``'s aggregate with the participants' side run remotely, for one stage of a run.

    ``rounds`` (the run's last round) and ``ahead`` (the exchange of the rounds) let a download
    carry the next round's work: ``ahead`` then already holds that round's uploads and reports
    when ``gather`` is called for it."""

    def __init__(self, link: Link, server: Exchange, stage: str, *, seed: int, run_id: str, participants: Sequence[int],
                 transport: Transport, on_report: Callable[[int, Payload], None], rounds: int = 0,
                 ahead: RemoteExchange | None = None) -> None:
        self.link, self.server, self.stage, self.seed, self.run_id = link, server, stage, seed, run_id
        self.participants, self.transport, self.on_report = list(participants), transport, on_report
        self.rounds, self.ahead = rounds, ahead or self
        self.round = 0
        self.uploads: dict[int, Payload] | None = None
        self.pending: dict[int, bytes] = {}
        self.prefetched: tuple[int, dict[int, Reply]] | None = None

    def _send(self, step: str, payloads: Mapping[int, bytes | None], next_round: int | None = None) -> dict[int, Reply]:
        replies = self.link.send({p: Request(self.stage, step, self.seed, self.round, payloads.get(p), next_round)
                                  for p in self.participants})
        for p, (reply, round_trip) in sorted(replies.items()):
            overhead = max(round_trip - reply.work_s, 0.0)
            down = payloads.get(p) if step == "down" else None
            if down is not None:
                self.transport.record(self.run_id, self.round, p, "down", down, overhead / (1 + (next_round is not None)))
            if reply.payload is not None:
                up_round = self.round if step == "up" else next_round
                assert up_round is not None
                self.transport.record(self.run_id, up_round, p, "up", reply.payload,
                                      overhead / (1 + (down is not None)))
            if reply.report is not None:
                self.on_report(p, decode(reply.report))
        return {p: reply for p, (reply, _) in replies.items()}

    def gather(self, round_: int) -> None:
        """Every participant works (local training in a round) and uploads (unless that came with
        the last download)."""
        self.round = round_
        if self.prefetched is not None and self.prefetched[0] == round_:
            replies = self.prefetched[1]
            for p, reply in sorted(replies.items()):
                if reply.next_report is not None:
                    self.on_report(p, decode(reply.next_report))
        else:
            replies = self._send("up", {})
        self.prefetched = None
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
        """Deliver the downloads; every participant finishes the round (with or without one) and,
        unless this was the last round, does the next round's work and upload."""
        next_round = (self.round + 1 if self.stage == "round" else 1) if self.round < self.rounds else None
        replies = self._send("down", self.pending, next_round)
        if next_round is not None:
            self.ahead.prefetched = (next_round, replies)
        self.pending, self.uploads = {}, None


def array_report(**arrays: np.ndarray) -> bytes:
    """A report of named arrays (a device's weights for evaluation, its counts for the run summary)."""
    return encode(Payload.of("report", 0, **{k: (v, v.dtype.itemsize * 8) for k, v in arrays.items()}))


def timed(work: Callable[[], tuple[bytes | None, bytes | None, bytes | None]]) -> Reply:
    """Run a participant's work and wrap what it returns (payload, report, next report) with its duration."""
    started = time.perf_counter()
    payload, report, next_report = work()
    return Reply(payload, report, time.perf_counter() - started, next_report)

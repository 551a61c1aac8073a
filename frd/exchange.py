"""The one exchange contract every method follows: upload → aggregate → download.

A method is only its exchange; this module owns the round itself, so the ledger and the channel
treat every method the same way.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Protocol, Sequence

from frd.channel import Channel, IdealChannel
from frd.clock import RoundTimes, RoundTiming, close_round, round_times
from frd.codecs.link import CodecLink
from frd.ledger import Ledger
from frd.payload import Payload


class Exchange(Protocol):
    """What a method does in one round. Participants are small integers (agents, devices)."""

    def upload(self, participant: int) -> Payload:
        """What ``participant`` sends to the server."""

    def aggregate(self, uploads: Mapping[int, Payload], participants: Sequence[int]) -> dict[int, Payload]:
        """Server side: from the uploads that arrived, what each participant receives."""

    def download(self, participant: int, payload: Payload) -> None:
        """Receive what arrived at ``participant``."""

    def finish_round(self) -> None:
        """After every download of the round: apply what needs all of them (e.g. distil the
        receivers of one memory together)."""


def broadcast(payload: Payload, participants: Sequence[int]) -> dict[int, Payload]:
    """The same payload for every participant (charged once per receiver by the ledger)."""
    return {p: payload for p in participants}


@dataclass(frozen=True)
class RoundReport:
    round: int
    delivered_up: tuple[int, ...]
    bits_up: int
    bits_down: int
    comm_s: float
    times: RoundTimes | None = None
    """The round on the virtual clock (with a ``timing``)."""


def run_round(exchange: Exchange, participants: Sequence[int], *, run_id: str, round_: int,
              ledger: Ledger, channel: Channel | None = None, receivers: Sequence[int] | None = None,
              codec: CodecLink | None = None, timing: RoundTiming | None = None) -> RoundReport:
    """Run one round and append its transfers to ``ledger``.

    Uploads that fail on the channel are left out of the aggregate; a failed download leaves
    that participant unchanged; ``finish_round`` runs once every download is in. The round's
    communication time is the slowest delivered upload plus the slowest delivered download.
    ``receivers``: who the aggregate is for (default the participants; a classification round
    under partial participation sends it to the devices sampled for the next round). ``codec``:
    the run's codecs (``frd.codecs.link``); each transfer is charged as encoded, received as decoded.
    ``timing``: the round on the virtual clock (``frd.clock``): its policy decides which uploads are
    late (left out of the aggregate, marked in the ledger), and each transfer's arrival is recorded
    (``sim_s``); the server's work is one FLOP per value it received [our choice: an average's adds].
    """
    channel = channel or IdealChannel()
    receivers = participants if receivers is None else receivers

    def send(payloads: dict[int, Payload], direction: str) -> dict[int, tuple[Payload, Payload]]:
        """(sent, decoded) of each participant's payload."""
        if codec is None:
            return {p: (x, x) for p, x in payloads.items()}
        return {p: codec.send(x, p, round_, direction) for p, x in payloads.items()}

    uploads = send({p: exchange.upload(p) for p in participants}, "up")
    up = channel.uplink({p: u.bits for p, (u, _) in uploads.items()})
    late: frozenset[int] = frozenset()
    if timing is not None:
        late = close_round(timing, {p: t.latency_s for p, t in up.items()}, {p: t.delivered for p, t in up.items()})[1]
    arrived = {p: decoded for p, (_, decoded) in uploads.items() if up[p].delivered and p not in late}
    downloads = send(exchange.aggregate(arrived, receivers) if arrived else {}, "down")
    down = channel.downlink({p: d.bits for p, (d, _) in downloads.items()})
    times = None if timing is None else round_times(
        timing, {p: t.latency_s for p, t in up.items()}, {p: t.delivered for p, t in up.items()},
        sum(a.values.size for u in arrived.values() for a in u.arrays.values()),
        {p: t.latency_s for p, t in down.items()}, {p: t.delivered for p, t in down.items()})
    for p, (u, _) in uploads.items():
        ledger.record(run_id, round_, p, "up", u.kind, u.entries, u.bits, up[p].latency_s, up[p].delivered,
                      sim_s=times.arrived_up[p] if times else math.nan, late=p in late)
    for p, (d, decoded) in downloads.items():
        ledger.record(run_id, round_, p, "down", d.kind, d.entries, d.bits, down[p].latency_s, down[p].delivered,
                      sim_s=times.arrived_down[p] if times else math.nan)
        if down[p].delivered:
            if codec is not None:
                codec.received(p, decoded)
            exchange.download(p, decoded)
    exchange.finish_round()
    comm_s = (max((up[p].latency_s for p in arrived), default=0.0)
              + max((t.latency_s for t in down.values() if t.delivered), default=0.0))
    return RoundReport(round_, tuple(arrived), sum(u.bits for u, _ in uploads.values()),
                       sum(d.bits for d, _ in downloads.values()), comm_s, times)

"""The Flower ServerApp and ClientApp of frd (Message API, flwr 1.42).

ServerApp: waits until every participant's node is connected and has said who it is, then runs
the domain's ``run_experiment`` unchanged, its devices or agents reached through ``FlowerLink``;
it writes the usual tables plus ``transport.csv`` into the folder named in the run config.

ClientApp: one node is one participant, a classification device or an RL agent (``partition-id``
in its node config). Flower 1.42 starts a new process for every message, so everything the
participant keeps lives in ``context.state`` as bytes: a device's state, an agent's rounds so far.
"""
from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any, Callable, Iterator, Mapping, Sequence

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from frd.backends import Runs, Tables
from frd.errors import FrdError
from frd.flower.spec import RUN_CONFIG_KEY, read_spec
from frd.remote import Reply, Request

# The run's domain comes from the registry (``frd.domains``), which imports only that domain: an
# RL agent's node need not import classification's modules (scikit-learn among them), nor the reverse.

NODE_WAIT_S = 300.0
"""How long the ServerApp waits for every participant's node to connect."""
POLL_S = 0.02
"""Interval between pulls for replies (Flower's own send_and_receive sleeps 3 s between pulls)."""
RECORD = "frd"


def _reply_error(message: Message, what: str) -> None:
    if message.has_error():
        raise FrdError(f"{what} failed: {message.error.reason}")


class FlowerLink:
    """The ``frd.remote.Link`` over a Flower grid: participant k is the node whose config says
    ``partition-id=k``. Every reply says which participant sent it, so the first request (the same
    for everyone: work and upload) also maps participants to nodes, without a message of its own.

    A node that is gone comes back as an error reply from the SuperLink (Flower's, naming no
    node), so a failure is told by the message it answers: the run ends with one line naming the
    participant. The SuperLink knows at once when a SuperNode stops (it leaves), and after two
    missed heartbeats when its machine or network dies (Flower 1.42: about 30 s apart, so 33 to 60 s)."""

    def __init__(self, grid: Grid, participants: int) -> None:
        self.grid, self.participants = grid, participants
        self.nodes: dict[int, int] = {}

    def _connected(self) -> list[int]:
        deadline = time.monotonic() + NODE_WAIT_S
        while len(nodes := sorted(self.grid.get_node_ids())) < self.participants:
            if time.monotonic() > deadline:
                raise FrdError(f"only {len(nodes)} of {self.participants} nodes connected within {NODE_WAIT_S:.0f} s; "
                               "start one frd flower node per participant")
            time.sleep(0.2)
        return nodes

    def _who(self, node: int) -> str:
        """``node`` as the participant it serves, once known."""
        participant = next((p for p, n in self.nodes.items() if n == node), None)
        return f"Flower node {node}" if participant is None else f"participant {participant} (Flower node {node})"

    def send(self, requests: Mapping[int, Request]) -> dict[int, tuple[Reply, float]]:
        if self.nodes:
            targets = {self.nodes[p]: r for p, r in requests.items()}
        else:
            (first, *others) = requests.values()
            assert all(r == first for r in others), "the first request must be the same for every participant"
            targets = {node: first for node in self._connected()}
        messages = [Message(RecordDict({RECORD: _request_record(r)}), node, "train") for node, r in targets.items()]
        started = time.perf_counter()
        sent = dict(zip(self.grid.push_messages(messages), targets))
        waiting = set(sent)
        out: dict[int, tuple[Reply, float]] = {}
        while waiting:
            for message in self.grid.pull_messages(list(waiting)):
                waiting.discard(message.metadata.reply_to_message_id)
                _reply_error(message, self._who(sent[message.metadata.reply_to_message_id]))
                participant, reply = _reply(message.content[RECORD], self.participants)
                self.nodes.setdefault(participant, message.metadata.src_node_id)
                out[participant] = (reply, time.perf_counter() - started)
            if waiting:
                time.sleep(POLL_S)
        if self.nodes.keys() != set(range(self.participants)):
            raise FrdError(f"nodes say they are participants {sorted(out)}, the run needs 0..{self.participants - 1} "
                           "once each")
        assert out.keys() == requests.keys(), "a reply from a participant that was not asked"
        return out


def _request_record(request: Request) -> ConfigRecord:
    record = ConfigRecord({"stage": request.stage, "step": request.step, "seed": request.seed, "round": request.round})
    for name in ("payload", "next_round", "method", "control"):
        if getattr(request, name) is not None:
            record[name] = getattr(request, name)
    return record


def _request(record: Any) -> Request:
    payload, method, control = (record[n] if n in record else None for n in ("payload", "method", "control"))
    next_round = int(record["next_round"]) if "next_round" in record else None
    return Request(str(record["stage"]), str(record["step"]), int(record["seed"]), int(record["round"]), payload,
                   next_round, method, control)


def _reply_record(reply: Reply, participant: int, participants: int) -> ConfigRecord:
    record = ConfigRecord({"work_s": reply.work_s, "participant": participant, "participants": participants})
    for name in ("payload", "report", "next_report"):
        if getattr(reply, name) is not None:
            record[name] = getattr(reply, name)
    return record


def _reply(record: Any, participants: int) -> tuple[int, Reply]:
    """Who sent ``record`` and what it says."""
    if int(record["participants"]) != participants:
        raise FrdError(f"a node was started for {record['participants']!s} participants, the run has {participants}")
    payload, report, next_report = (record[n] if n in record else None for n in ("payload", "report", "next_report"))
    return int(record["participant"]), Reply(payload, report, float(record["work_s"]), next_report)


class FlowerBackend:
    """``run_experiment``'s backend on the ServerApp: each run through the domain's ``run_remote``,
    one after the other."""

    local = False  # not one batch in this process: every run goes through execute

    def __init__(self, link: FlowerLink) -> None:
        self.link = link

    def record(self, config: Any) -> dict:
        return {**asdict(config), "backend": {"name": "flower", "nodes": len(self.link.nodes)}}

    def execute(self, runs: Runs, shared: Any, items: Sequence[Any], on_step: Callable[[], object] = lambda: None,
                on_status: Callable[[str], None] = lambda text: None) -> Iterator[tuple[int, Tables]]:
        for i, item in enumerate(items):
            yield i, runs.run_remote(shared, item, self.link, on_step)


server = ServerApp()
client = ClientApp()


@server.main()
def main(grid: Grid, context: Context) -> None:
    domain, config, out = read_spec(str(context.run_config[RUN_CONFIG_KEY]))
    domain.run_experiment(config, out, FlowerBackend(FlowerLink(grid, domain.participants(config))), progress=False)


def _participant(context: Context) -> tuple[int, int]:
    try:
        return int(str(context.node_config["partition-id"])), int(str(context.node_config["num-partitions"]))
    except KeyError:
        raise FrdError("a node needs partition-id and num-partitions in its node config "
                       "(frd flower node --participant K --participants N)") from None


@client.train()
def step(message: Message, context: Context) -> Message:
    domain, config, _ = read_spec(str(context.run_config[RUN_CONFIG_KEY]))
    participant, participants = _participant(context)
    if participants != domain.participants(config):
        raise FrdError(f"this node was started for {participants} participants, the run has {domain.participants(config)}")
    request = _request(message.content[RECORD])
    key = f"{RECORD}-{request.method or 'cls'}-seed{request.seed}"
    kept = context.state.config_records[key]["state"] if key in context.state else None
    reply, kept = domain.participant_reply(config, participant, request, kept)
    context.state[key] = ConfigRecord({"state": kept})
    return Message(RecordDict({RECORD: _reply_record(reply, participant, participants)}), reply_to=message)

"""The Flower ServerApp and ClientApp of frd (Message API, flwr 1.42).

ServerApp: waits until every participant's node is connected and has said who it is, then runs
``classification.runner.run_experiment`` unchanged, its devices reached through ``FlowerLink``; it
writes the usual tables plus ``transport.csv`` into the folder named in the run config.

ClientApp: one node is one participant (``partition-id`` in its node config). Flower 1.42 starts
a new process for every message, so everything the participant keeps lives in ``context.state``
as ``frd.wire`` bytes.
"""
from __future__ import annotations

import time
from dataclasses import asdict
from functools import lru_cache
from typing import Any, Callable, Iterator, Mapping, Sequence

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from classification.config import ClsConfig
from classification.data import Dataset, load_dataset
from classification.remote import participant_reply, resolved, run_remote
from classification.runner import run_experiment
from frd.backends import Tables
from frd.errors import FrdError
from frd.flower.spec import RUN_CONFIG_KEY, read_spec
from frd.remote import Reply, Request

NODE_WAIT_S = 300.0
"""How long the ServerApp waits for every participant's node to connect."""
POLL_S = 0.02
"""Interval between pulls for replies (Flower's own send_and_receive sleeps 3 s between pulls)."""
RECORD = "frd"


def _reply_error(message: Message, what: str) -> None:
    if message.has_error():
        raise FrdError(f"{what} failed on its node: {message.error.reason}")


class FlowerLink:
    """The ``frd.remote.Link`` over a Flower grid: participant k is the node whose config says
    ``partition-id=k``. Every reply says which participant sent it, so the first request (the same
    for everyone: work and upload) also maps participants to nodes, without a message of its own."""

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

    def send(self, requests: Mapping[int, Request]) -> dict[int, tuple[Reply, float]]:
        if self.nodes:
            targets = {self.nodes[p]: r for p, r in requests.items()}
        else:
            (first, *others) = requests.values()
            assert all(r == first for r in others), "the first request must be the same for every participant"
            targets = {node: first for node in self._connected()}
        messages = [Message(RecordDict({RECORD: _request_record(r)}), node, "train") for node, r in targets.items()]
        started = time.perf_counter()
        waiting = set(self.grid.push_messages(messages))
        out: dict[int, tuple[Reply, float]] = {}
        while waiting:
            for message in self.grid.pull_messages(list(waiting)):
                waiting.discard(message.metadata.reply_to_message_id)
                _reply_error(message, f"node {message.metadata.src_node_id}")
                participant, reply = _reply(message.content[RECORD], self.participants)
                self.nodes.setdefault(participant, message.metadata.src_node_id)
                out[participant] = (reply, time.perf_counter() - started)
            if waiting:
                time.sleep(POLL_S)
        if sorted(out) != list(range(self.participants)):
            raise FrdError(f"nodes say they are participants {sorted(out)}, the run needs 0..{self.participants - 1} "
                           "once each")
        return out


def _request_record(request: Request) -> ConfigRecord:
    record = ConfigRecord({"stage": request.stage, "step": request.step, "seed": request.seed, "round": request.round})
    for name in ("payload", "next_round"):
        if getattr(request, name) is not None:
            record[name] = getattr(request, name)
    return record


def _request(record: Any) -> Request:
    payload = record["payload"] if "payload" in record else None
    next_round = int(record["next_round"]) if "next_round" in record else None
    return Request(str(record["stage"]), str(record["step"]), int(record["seed"]), int(record["round"]), payload,
                   next_round)


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
    """``run_experiment``'s backend on the ServerApp: each seed through a ``RemoteMethod``."""

    def __init__(self, link: FlowerLink) -> None:
        self.link = link

    def record(self, config: Any) -> dict:
        return {**asdict(config), "backend": {"name": "flower", "nodes": len(self.link.nodes)}}

    def iter_cls(self, work: Sequence[tuple[Any, int]], data: Any,
                 on_round: Callable[[], object] = lambda: None) -> Iterator[tuple[int, Tables]]:
        for i, (config, seed) in enumerate(work):
            yield i, run_remote(config, seed, data, self.link, on_round)


server = ServerApp()
client = ClientApp()


@server.main()
def main(grid: Grid, context: Context) -> None:
    config, out = read_spec(str(context.run_config[RUN_CONFIG_KEY]))
    run_experiment(config, out, progress=False, backend=FlowerBackend(FlowerLink(grid, config.devices)))


def _participant(context: Context) -> tuple[int, int]:
    try:
        return int(str(context.node_config["partition-id"])), int(str(context.node_config["num-partitions"]))
    except KeyError:
        raise FrdError("a node needs partition-id and num-partitions in its node config "
                       "(frd flower node --participant K --participants N)") from None


def _data(config: ClsConfig) -> Dataset:
    return _load(config.dataset, config.data_dir, config.download, config.test_fraction, config.split_seed)


@lru_cache(maxsize=2)
def _load(dataset: str, data_dir: str | None, download: bool, test_fraction: float, split_seed: int) -> Dataset:
    """The node's own copy of the data (a simulated node's process may serve many messages)."""
    return load_dataset(dataset, data_dir, download=download, test_fraction=test_fraction, split_seed=split_seed)


@client.train()
def step(message: Message, context: Context) -> Message:
    config, _ = read_spec(str(context.run_config[RUN_CONFIG_KEY]))
    participant, participants = _participant(context)
    request = _request(message.content[RECORD])
    key = f"{RECORD}-seed{request.seed}"
    state = context.state.config_records[key]["state"] if key in context.state else None
    assert state is None or isinstance(state, bytes)
    reply, new_state = participant_reply(resolved(config), _data(config), participant, request, state)
    context.state[key] = ConfigRecord({"state": new_state})
    return Message(RecordDict({RECORD: _reply_record(reply, participant, participants)}), reply_to=message)

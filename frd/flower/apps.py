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
from functools import lru_cache
from typing import Any, Callable, Iterator, Mapping, Sequence, cast

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from frd.backends import Tables
from frd.errors import FrdError
from frd.flower.spec import RUN_CONFIG_KEY, read_spec
from frd.flower.spec import participants as run_participants
from frd.remote import Reply, Request
from frd.rl.config import RLConfig

# Each domain's modules are imported where they are used: every message starts a node process,
# and an RL agent's need not import classification's (scikit-learn among them), nor the reverse.

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
    """``run_experiment``'s backend on the ServerApp: each classification seed through a
    ``RemoteMethod``, each RL run through a ``RemoteRun``, one after the other."""

    local = False  # RL runs go through simulate

    def __init__(self, link: FlowerLink) -> None:
        self.link = link

    def record(self, config: Any) -> dict:
        return {**asdict(config), "backend": {"name": "flower", "nodes": len(self.link.nodes)}}

    def iter_cls(self, work: Sequence[tuple[Any, int]], data: Any,
                 on_round: Callable[[], object] = lambda: None) -> Iterator[tuple[int, Tables]]:
        from frd.classification.remote import run_remote

        for i, (config, seed) in enumerate(work):
            yield i, run_remote(config, seed, data, self.link, on_round)

    def simulate(self, config: RLConfig, runs: Sequence[tuple[str, int]], on_finished: Callable[[Tables], None],
                 on_status: Callable[[str], None] = lambda text: None) -> None:
        from frd.rl.remote import run_remote

        for method, seed in runs:
            on_status(f"{method} seed {seed}")
            on_finished(run_remote(config, method, seed, self.link))


server = ServerApp()
client = ClientApp()


@server.main()
def main(grid: Grid, context: Context) -> None:
    config, out = read_spec(str(context.run_config[RUN_CONFIG_KEY]))
    if isinstance(config, RLConfig):
        from frd.rl.experiment import run_experiment as run_rl

        run_rl(config, out, progress=False, backend=FlowerBackend(FlowerLink(grid, config.agents)))
    else:
        from frd.classification.runner import run_experiment as run_cls

        run_cls(config, out, progress=False, backend=FlowerBackend(FlowerLink(grid, config.devices)))


def _participant(context: Context) -> tuple[int, int]:
    try:
        return int(str(context.node_config["partition-id"])), int(str(context.node_config["num-partitions"]))
    except KeyError:
        raise FrdError("a node needs partition-id and num-partitions in its node config "
                       "(frd flower node --participant K --participants N)") from None


@lru_cache(maxsize=2)
def _load(dataset: str, data_dir: str | None, download: bool, test_fraction: float, split_seed: int) -> Any:
    """The node's own copy of the data (a simulated node's process may serve many messages)."""
    from frd.classification.data import load_dataset

    return load_dataset(dataset, data_dir, download=download, test_fraction=test_fraction, split_seed=split_seed)


@client.train()
def step(message: Message, context: Context) -> Message:
    config, _ = read_spec(str(context.run_config[RUN_CONFIG_KEY]))
    participant, participants = _participant(context)
    if participants != run_participants(config):
        raise FrdError(f"this node was started for {participants} participants, the run has {run_participants(config)}")
    request = _request(message.content[RECORD])
    key = f"{RECORD}-{request.method or 'cls'}-seed{request.seed}"
    kept = context.state.config_records[key]["state"] if key in context.state else None
    reply: Reply
    if isinstance(config, RLConfig):
        from frd.rl.remote import agent_reply

        assert kept is None or isinstance(kept, list)
        reply, history = agent_reply(config, participant, request, cast(list[bytes], kept or []))
        context.state[key] = ConfigRecord({"state": history})
    else:
        from frd.classification.remote import participant_reply, resolved

        assert kept is None or isinstance(kept, bytes)
        data = _load(config.dataset, config.data_dir, config.download, config.test_fraction, config.split_seed)
        reply, state = participant_reply(resolved(config), data, participant, request, kept)
        context.state[key] = ConfigRecord({"state": state})
    return Message(RecordDict({RECORD: _reply_record(reply, participant, participants)}), reply_to=message)

"""An RL run whose agents live elsewhere, one per participant (a Flower node), with the tables of
the same run in process.

Agents share nothing but the rounds, so each plays its own episodes on its own node as far as
its next event: the barrier (its upload then comes back with the reply), its mission or its
episode cap. The server merges the agents' episodes by the batch's clock (steps since the
start; every lane's rollout slots follow it), takes them through the batch's own episode-end
rule (``frd.rl.episode_end``) in that order, and runs the round where the batch in process
would: at the first safe point (every learner just updated) after the last agent's event. It
tells each agent that clock, the live agents' recent means (the round's leader is chosen from
them) and where in the round's generator the agent's distillation starts; the agent idles to
that clock, takes its download and finishes the round as its lane would in process. Under
``until first`` the run ends at the first completion, and what other agents played past it is
dropped, as in process.

What a node keeps between messages is what the server sent (in Flower's ``context.state``), from
which it can replay its agent from the seed: exactly, since a lane's arithmetic depends on that
lane alone, but at a cost of O(rounds²) steps of one agent over a run. So a process that lives
across messages (a warm runner, a simulation actor) also keeps the agent itself, paused at its
barrier, and the next message of the same run goes on from there (``LiveAgents``); a process
that does not have it (a fresh one, or one that served other runs since) replays. ``work_s``
counts only the steps past the replay.
"""
from __future__ import annotations

import json
import math
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from frd.channel import make_channel
from frd.clock import RoundTimes
from frd.codecs.link import codec_link
from frd.envs.lanes import check_env_id
from frd.errors import FrdError
from frd.exchange import run_round
from frd.payload import Payload
from frd.remote import Link, Reply, Request, Transport, array_report
from frd.results import run_id
from frd.rl import episode_end
from frd.rl.config import RLConfig
from frd.rl.methods import Strategy, get_method
from frd.rl.runner import ROUND_COLUMNS, RLBatch, RunState, clock_round, episode_row, round_rng, run_clock, run_tables
from frd.seeding import Stream, derive_seed
from frd.wire import decode, encode

STAGE = "rl"
"""The ``Request.stage`` of an RL agent's requests."""
LOG_FIELDS = [c for c in ROUND_COLUMNS if c not in ("round", "agent")]


def check_remote(config: RLConfig) -> None:
    """Refuse partial participation, SB3 agents, and methods whose agents cannot run apart, before any process starts."""
    if config.per_round() < config.agents:
        raise FrdError("--agents-per-round and --fraction run in process only (--backend local or ray): a remote "
                       "run takes every agent in every round")
    if config.sb3_configs():
        raise FrdError("Stable-Baselines3 agents (--agent-spec algo=…) cannot be Flower nodes yet: a node replays "
                       "its agent from the seed, which an SB3 model's own loop cannot do; run them in process or on ray")
    for name in config.methods:
        method = get_method(name)
        if method.draws_at_upload:
            raise FrdError(f"{name} draws its uploads from the round's generator agent after agent, which agents "
                           "on different nodes cannot share; run it in process")
        if method.hooks_updates():
            raise FrdError(f"{name} acts on all of a run's agents after every update, which agents on different "
                           "nodes cannot do; run it in process")


def safe_points(config: RLConfig) -> int:
    """Steps between the batch's safe points, where every learner has just updated (the lcm of
    the agents' rollout lengths): rounds happen only there."""
    return math.lcm(*(c.n_steps for c in config.agent_configs()))


@dataclass(frozen=True)
class RoundInput:
    """What an agent hears of a round besides its download: the round's clock, the live agents'
    recent means, and where its distillation starts in the round's generator (None: fresh)."""

    clock: int
    scores: dict[int, float]
    rng_state: Mapping[str, Any] | None = None

    def encode(self) -> bytes:
        arrays = dict(clock=np.array([self.clock], np.int64), agents=np.array(list(self.scores), np.int64),
                      scores=np.array(list(self.scores.values()), np.float64))
        if self.rng_state is not None:
            arrays["rng"] = np.frombuffer(json.dumps(self.rng_state).encode(), np.uint8)
        return array_report(**arrays)

    @classmethod
    def decode(cls, data: bytes) -> RoundInput:
        p = decode(data)
        rng = json.loads(p["rng"].tobytes()) if "rng" in p.arrays else None
        return cls(int(p["clock"][0]), {int(a): float(s) for a, s in zip(p["agents"], p["scores"])}, rng)


class AgentReplay(RLBatch):
    """One agent of one run, replayed from its seed through the rounds the server has reported
    (``given``: each round's input and the download, if one arrived) up to its next event: it
    pauses at the barrier of the round the server waits for, with that round's upload."""

    saves_models = False  # a remote run's tables are the server's, which holds no weights

    def __init__(self, config: RLConfig, method: str, seed: int, agent: int,
                 given: Sequence[tuple[RoundInput, Payload | None]]) -> None:
        super().__init__(config, [(method, seed)], agents=[agent])
        self.agent, self.given = agent, list(given)
        self.clocks: list[int] = []  # the clock at each of the run's episodes
        self.upload: Payload | None = None
        self.coded = 0  # the last round whose upload went through the agent's codec
        self.uploaded_memories: Mapping[int, tuple[np.ndarray, np.ndarray]] | None = None  # taken for the waiting upload
        self.caught_up = time.perf_counter()  # when the replay reached the last given round

    def go_on(self, given: tuple[RoundInput, Payload | None]) -> None:
        """Take the server's answer to the upload it waits at, and play on to the next event."""
        self.given.append(given)
        self.upload, self.caught_up = None, time.perf_counter()
        self._exchange_rounds()  # the round may be due at the very safe point it paused at
        for _ in self.proceed():
            pass

    def _record(self, lane: int, episode: int, score: float, env_steps: int, what: int) -> None:
        self.clocks.append(self.clock)
        super()._record(lane, episode, score, env_steps, what)

    def exchange(self, i: int, rows: dict[int, int]) -> bool:
        run = self.runs[i]
        rng = round_rng(run.seed, run.rounds)
        if run.rounds == len(self.given):  # the round the server waits for
            ctx = self.round_context(i, rows, rng)
            self.uploaded_memories = ctx.memories
            run.strategy.begin_round(ctx)
            self.upload = self._encoded(run, run.strategy.upload(self.agent))
            self.paused = True
            return False
        given, download = self.given[run.rounds]
        if self.clock < given.clock:
            return False
        assert self.clock == given.clock, "an agent went past the clock of its round"
        if given.rng_state is not None:
            rng.bit_generator.state = given.rng_state
        ctx = self.round_context(i, rows, rng, given.scores)
        if self.uploaded_memories is not None:  # went on from its upload: the memory was taken then
            ctx, self.uploaded_memories = replace(ctx, memories=self.uploaded_memories), None
        run.strategy.begin_round(ctx)
        if run.codec is not None and run.codec.settings.error_feedback and self.coded != run.rounds + 1:
            self._encoded(run, run.strategy.upload(self.agent))  # a replay: to keep what its codec dropped then
        if download is not None:
            if run.codec is not None:
                download = run.codec.decode(download, self.agent, "down")
                run.codec.received(self.agent, download)
            run.strategy.download(self.agent, download)
        run.strategy.finish_round()
        if run.rounds + 1 == len(self.given):
            self.caught_up = time.perf_counter()
        return True

    def _encoded(self, run: RunState, upload: Payload) -> Payload:
        """``upload`` as this agent's codec sends it, its residual kept for the next round's."""
        if run.codec is None:
            return upload
        self.coded = run.rounds + 1
        return run.codec.send(upload, self.agent, self.coded, "up")[0]

    def report(self) -> bytes:
        """The episodes since the last round, the agent's counts and recent mean, and its rows of
        the last round's log."""
        run = self.runs[0]
        since = self.given[-1][0].clock if self.given else 0
        new = [(c, *run.episodes[i][1:4]) for i, c in enumerate(self.clocks) if c > since]
        clock, episode, score, env_steps = (np.array(col) for col in zip(*new))
        log = [row for row in run.round_log if row["round"] == len(self.given)]
        return array_report(
            clock=clock.astype(np.int64), episode=episode.astype(np.int64), score=score.astype(np.float64),
            env_steps=env_steps.astype(np.int64), steps_now=np.array([self.env_steps[0]], np.int64),
            recent=np.array([episode_end.recent_mean(self.standing, 0)], np.float64),
            completed_at=np.array([run.completed_at.get(self.agent, 0)], np.int64),
            **{f"log_{k}": np.array([row[k] for row in log], np.float64) for k in LOG_FIELDS})


def agent_reply(config: RLConfig, agent: int, request: Request, history: Sequence[bytes]) -> tuple[Reply, list[bytes]]:
    """Agent ``agent``'s side of one request; ``history`` is what the previous call returned (empty
    at the start of a run): each round's input and download as the server sent them."""
    assert request.method is not None, "an RL request names its method"
    kept = [*history, request.control, request.payload or b""] if request.control is not None else list(history)
    given = [(RoundInput.decode(c), decode(d) if d else None) for c, d in zip(kept[::2], kept[1::2])]
    assert len(given) == request.round, "the server's rounds and the agent's history disagree"
    key = (repr(config), request.method, request.seed, agent)
    replay = LIVE.pop(key, kept[:-2])
    if replay is not None and given:
        replay.go_on(given[-1])
    else:
        replay = AgentReplay(config, request.method, request.seed, agent, given)
        for _ in replay.run():
            pass
    if replay.upload is not None:
        LIVE.keep(key, kept, replay)
    upload = encode(replay.upload) if replay.upload is not None else None
    return Reply(upload, replay.report(), time.perf_counter() - replay.caught_up), kept


class LocalAgents:
    """A ``Link`` whose agents answer in this process, each keeping only the bytes it returned, as
    a Flower node does (for tests, and to measure the nodes' work without a network)."""

    def __init__(self, config: RLConfig) -> None:
        self.config, self.kept = config, dict[int, list[bytes]]()

    def send(self, requests: Mapping[int, Request]) -> dict[int, tuple[Reply, float]]:
        out = {}
        for agent, request in requests.items():
            started = time.perf_counter()
            reply, self.kept[agent] = agent_reply(self.config, agent, request, self.kept.get(agent, []))
            out[agent] = (reply, time.perf_counter() - started)
        return out


class LiveAgents:
    """Agents paused at their barrier in this process, each with the history it was left at
    (the server's messages so far), so that the next message of its run needs no replay."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._agents: OrderedDict[tuple, tuple[list[bytes], AgentReplay]] = OrderedDict()

    def keep(self, key: tuple, history: list[bytes], agent: AgentReplay) -> None:
        self._agents[key] = (history, agent)
        while len(self._agents) > self.size:  # the oldest runs go: a replay brings one back
            self._agents.popitem(last=False)

    def pop(self, key: tuple, history: list[bytes]) -> AgentReplay | None:
        """The agent of ``key`` if it was left at exactly ``history``, else None (and it is dropped)."""
        kept, agent = self._agents.pop(key, (None, None))
        return agent if kept == history else None


LIVE = LiveAgents(size=64)
"""This process's paused agents [our choice: 64 agents of a few MB each at most]."""


class _ServerSide:
    """One round on the server: the uploads as the agents sent them, the method's own aggregate,
    the downloads kept to send back (the agents finish the round with their next request)."""

    def __init__(self, strategy: Strategy, uploads: Mapping[int, Payload]) -> None:
        self.strategy, self.uploads = strategy, uploads
        self.downloads: dict[int, Payload] = {}

    def upload(self, agent: int) -> Payload:
        return self.uploads[agent]

    def aggregate(self, uploads: Mapping[int, Payload], participants: Sequence[int]) -> dict[int, Payload]:
        return self.strategy.aggregate(uploads, participants)

    def download(self, agent: int, payload: Payload) -> None:
        self.downloads[agent] = payload

    def finish_round(self) -> None:
        """Nothing here: the agents finish the round on their nodes."""


class RemoteRun:
    """Run (``method``, ``seed``) with agent k on participant k of ``link``."""

    def __init__(self, config: RLConfig, method: str, seed: int, link: Link) -> None:
        env = check_env_id(config.env_id)
        setup = config.run_setup(env.observation_space, int(env.action_space.n), seed)  # type: ignore[attr-defined]
        strategy = get_method(method)(config.options_for(method), setup)
        self.config, self.link, self.id = config, link, run_id(method, seed)
        self.run = RunState(method, strategy, seed, np.arange(config.agents),
                            codec=codec_link(config.codecs(), seed, participants_code=True),
                            clock=run_clock(config, method, seed, int(env.observation_space.shape[0]),  # type: ignore[index]
                                            int(env.action_space.n)))  # type: ignore[attr-defined]
        self.clocked: tuple[RoundTimes | None, dict[int, int]] | None = None  # the last round, until its log is in
        # the agents' episodes go through the rule again here, in the order the batch would take them
        self.standing = episode_end.standing(np.array([strategy.exchanges]), config.agents, config.window,
                                             config.period)
        self.mission = episode_end.mission(config, config.agents)
        self.channel = make_channel(config.channel, derive_seed(seed, Stream.RL_CHANNEL), **dict(config.channel_options))
        self.transport = Transport()
        self.episodes = np.zeros(config.agents, np.int64)   # each agent's episodes so far
        self.env_steps = np.zeros(config.agents, np.int64)  # and steps
        self.live = list(range(config.agents))
        self.resumed = 1                                    # the clock at which the live agents stepped again
        self.sent: dict[int, tuple[bytes | None, bytes]] = {}  # agent → (download, round input) of the last round
        self.log_order: list[int] = []                      # agents in the order the last round logged them
        self.events: dict[int, int] = {}                    # live agent → the clock of its latest event

    def play(self) -> dict[str, pd.DataFrame]:
        """Rounds until the run ends; its tables, plus ``transport``."""
        while True:
            reports, uploads = self._advance()
            if self._ended(reports, uploads):
                break
            self._round(reports, uploads)
        tables = run_tables(self.config, self.run, self.episodes, self.env_steps)
        return {**tables, "transport": self.transport.frame()}

    def _advance(self) -> tuple[dict[int, Payload], dict[int, Payload]]:
        """Every live agent finishes the last round and plays to its next event: its report, and
        its upload if that event is the barrier."""
        run = self.run
        requests = {}
        for a in self.live:
            download, control = self.sent.get(a, (None, None))
            requests[a] = Request(STAGE, "advance", run.seed, run.rounds, download, method=run.method, control=control)
        replies = self.link.send(requests)
        reports, uploads = {}, {}
        for a, (reply, round_trip) in sorted(replies.items()):
            overhead, down = max(round_trip - reply.work_s, 0.0), requests[a].payload
            if down is not None:
                self.transport.record(self.id, run.rounds, a, "down", down, overhead / (1 + (reply.payload is not None)))
            if reply.payload is not None:
                uploads[a] = decode(reply.payload)
                self.transport.record(self.id, run.rounds + 1, a, "up", reply.payload, overhead / (1 + (down is not None)))
            assert reply.report is not None
            reports[a] = decode(reply.report)
        run.compute_s += max(reply.work_s for reply, _ in replies.values())
        position = {a: i for i, a in enumerate(self.log_order)}
        logged = len(run.round_log)
        for a in sorted(reports, key=lambda a: (position.get(a, len(position)), a)):
            log = {k: reports[a][f"log_{k}"] for k in LOG_FIELDS}
            run.round_log += [{"round": run.rounds, "agent": a, "entries": int(log["entries"][i]),
                               "steps": int(log["steps"][i]), "loss_before": float(log["loss_before"][i]),
                               "loss_after": float(log["loss_after"][i])} for i in range(len(log["entries"]))]
        if self.clocked is not None:  # the last round's distillations are known now: its clocks resume
            clock_round(run, *self.clocked, run.round_log[logged:])
            self.clocked = None
        return reports, uploads

    def _ended(self, reports: dict[int, Payload], uploads: dict[int, Payload]) -> bool:
        """Merge the agents' episodes by clock and take each through the episode-end rule, as the
        batch would at that clock; whether the run ended (what an agent played past its end is
        dropped, as in process)."""
        rows = sorted((int(r["clock"][i]), a, int(r["episode"][i]), float(r["score"][i]), int(r["env_steps"][i]))
                      for a, r in reports.items() for i in range(len(r["clock"])))
        self.events = {a: int(r["clock"][-1]) for a, r in reports.items()}
        ended_at = None  # the clock at which the run ended
        for clock, a, episode, score, env_steps in rows:
            what = episode_end.end_episode(a, score, self.mission, self.standing)
            if what == episode_end.DROPPED:
                continue
            assert self.standing.episode[a] == episode, "an agent's episodes disagree with the server's count"
            self.run.episodes.append(episode_row(self.run, a, episode, score, env_steps))
            self.episodes[a] = episode
            if what & episode_end.LANE == episode_end.COMPLETED:
                self.run.completed_at[a] = episode
            if what & episode_end.ENDS_RUN:
                ended_at = clock
        for a in self.live:
            stepped = self.events[a] - self.resumed + 1  # active at every clock from the last round to its event
            assert self.env_steps[a] + stepped == reports[a]["steps_now"][0], "an agent's steps disagree with the clock"
            self.env_steps[a] += stepped if ended_at is None else max(min(self.events[a], ended_at) - self.resumed + 1, 0)
        self.live = [a for a in self.live if not self.standing.capped[a]]
        assert ended_at is not None or set(self.live) == set(uploads), "an agent's barrier disagrees with the server's"
        return ended_at is not None

    def _round(self, reports: dict[int, Payload], uploads: dict[int, Payload]) -> None:
        """The round among the live agents, at the first safe point after the last event; what
        each agent needs to finish it goes out with its next request."""
        run, started = self.run, time.perf_counter()
        points = safe_points(self.config)
        clock = -(-max(self.events.values()) // points) * points
        exchange = _ServerSide(run.strategy, uploads)
        steps = {a: int(self.env_steps[a]) for a in self.live}
        report = run_round(exchange, self.live, run_id=self.id, round_=run.rounds + 1, ledger=run.ledger,
                           channel=self.channel, codec=run.codec, timing=run.clock.timing(steps) if run.clock else None)
        self.clocked = (report.times, steps)
        scores = {a: float(reports[a]["recent"][0]) for a in self.live}
        states = run.strategy.finish_rng_states(
            exchange.downloads, scores, round_rng(run.seed, run.rounds))
        self.sent = {a: (encode(exchange.downloads[a]) if a in exchange.downloads else None,
                         RoundInput(clock, scores, states.get(a)).encode()) for a in self.live}
        self.log_order = list(states)
        self.resumed = clock + 1
        every = np.arange(self.config.agents)  # every agent takes part (``check_remote``)
        episode_end.next_round(self.standing, every, every[~self.standing.capped], self.config.period)
        run.rounds += 1
        run.comm_s += report.comm_s
        run.compute_s += time.perf_counter() - started


def run_remote(config: RLConfig, method: str, seed: int, link: Link) -> dict[str, pd.DataFrame]:
    """``simulate``'s tables of (``method``, ``seed``) with agent k on participant k of ``link``,
    plus ``transport``."""
    return RemoteRun(config, method, seed, link).play()

"""The RL round loop: every lane of every run stepped in lockstep (CartPole with one learner:
whole update periods per call, ``frd.rl.fused``), rounds at the barrier, each run retired at
its mission or its episode cap and handed out, with its agents' final weights, at the next safe
point.

A Stable-Baselines3 agent (``frd.agents.sb3``) is a lane whose env and learner are SB3's: its
population row and env lane stay idle, and when it is due to step and has nothing left to play it
plays one whole collection (``SB3Learner.collect``: a rollout and its update, or DQN's
``train_freq`` steps and their gradient steps), whose steps then follow its run's clock
(``run_clock``: the run's steps so far, since runs of a batch part in fused calls) one per step,
so that its episode ends go through the same rule (``frd.rl.episode_end``), in lane order with
ours, at the step they would have happened in lockstep. At its barrier it plays on to the end
of that collection (its partial rollout is completed and learned from; the episodes it ends
there count towards its next period, its states join this period's memory), and only then is it
ready for the round: the round happens at the first safe point after that and every other
agent's barrier. Under ``until first`` what it played past the run's end is dropped, as for ours.
On CartPole our lanes beside SB3 agents still step whole update periods, several in one call:
a run goes on through the periods that every SB3 agent of it plays from its collection (or waits
at its barrier through), and stops before one in which an SB3 agent must start its next collection
(or after one in which a collection ended at the barrier: the round's safe point). A period in
which one must start steps in lockstep, every run by one period on its own clock, since
``collect`` is Python: with the zoo's 256-step PPO rollouts, one period in 32 of each run."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import numpy as np
import pandas as pd
import torch

from frd.agents import kernel
from frd.agents.grouped import GroupedPopulation
from frd.agents.sb3 import MixedPopulation, SB3Learner
from frd.channel import make_channel
from frd.clock import RoundTimes
from frd.codecs.link import CodecLink, codec_link
from frd.envs.lanes import RESET_BLOCK, CartPoleLanes, make_lanes
from frd.exchange import run_round
from frd.ledger import Ledger
from frd.results import MODELS, run_id
from frd.rl import episode_end, fused
from frd.rl.checkpoint import BatchCheckpoint
from frd.rl.clock import RunClock
from frd.rl.config import RLConfig
from frd.rl.memory import ExperienceMemory
from frd.rl.methods import RoundContext, Strategy, get_method
from frd.rl.saved import agents_file
from frd.seeding import Stream, derive_seed

ALGORITHM = "algorithm"
"""Column of episodes.csv (the agent's learner, ``algo=``) and runs.csv (its agents', joined by +)."""

ROUND_COLUMNS = ["round", "agent", "entries", "steps", "loss_before", "loss_after"]
"""rounds.csv (RL): per exchange round and distilling agent, the teacher's entries, the
distillation minibatches and the cross-entropy to the teacher before and after."""


@dataclass
class RunState:
    """Bookkeeping of one run (seed) inside the batch."""

    method: str
    strategy: Strategy
    seed: int
    lanes: np.ndarray
    ledger: Ledger = field(default_factory=Ledger)
    episodes: list[tuple] = field(default_factory=list)
    round_log: list[dict] = field(default_factory=list)  # the strategy's per-round rows
    completed_at: dict[int, int] = field(default_factory=dict)  # agent → its episode at completion, in order
    rounds: int = 0
    compute_s: float = 0.0
    comm_s: float = 0.0
    finished: bool = False
    codec: CodecLink | None = None  # its codecs (``frd.codecs.link``); None at the defaults
    clock: RunClock | None = None   # its agents on the virtual clock (``frd.rl.clock``)
    participation: np.random.Generator = field(init=False)  # draws each round's participants (a stream of its own)

    def __post_init__(self) -> None:
        self.participation = np.random.default_rng(derive_seed(self.seed, Stream.RL_PARTICIPANTS))


class RLBatch:
    """Runs (method, seed) as lanes of one vector env and one A2C population.

    Runs of different methods can share a batch: a run's results do not depend on its
    batch-mates (tested), and one batch keeps more lanes busy than one per method would.
    Each run has its own strategy object, built once, which owns the run's state across rounds.
    ``agents`` holds only some of each run's agents (a remote participant holds its own one).
    """

    saves_models = True
    """Whether a finished run's tables carry its agents' weights (``frd.results.MODELS``)."""

    def __init__(self, config: RLConfig, runs: Sequence[tuple[str, int]], agents: Sequence[int] | None = None) -> None:
        self.config = config
        seeds = [seed for _, seed in runs]
        self._configure_torch()
        self.agent_ids = list(range(config.agents)) if agents is None else list(agents)
        A = len(self.agent_ids)
        lane_seeds = [derive_seed(s, a) for s in seeds for a in self.agent_ids]
        self.env = make_lanes(config.env_id, lane_seeds)
        learners = config.agent_configs()
        # shared: the agents of a run with one architecture start from the same networks, as from a
        # server's initial model (one init seed per run); separate: each from its own.
        init_seeds = [derive_seed(s, Stream.RL_INIT) if config.init == "shared" else derive_seed(s, a, Stream.RL_INIT)
                      for s in seeds for a in self.agent_ids]
        self.pop = GroupedPopulation(lane_seeds, self.env.obs_dim, self.env.n_actions,
                                     [learners[a] for a in self.agent_ids] * len(seeds), init_seeds)
        self.rows = np.arange(len(lane_seeds))      # population row → env lane
        # SB3 agents: env lane → learner; the step of its run's clock (``run_clock``) at each one's
        # collection's last step; its episode ends still to come, (step, score), in order
        sb3 = config.sb3_configs()
        self.sb3 = {lane: SB3Learner(sb3[self.agent_of(lane)], config.env_id, lane_seeds[lane], init_seeds[lane])
                    for lane in range(len(lane_seeds)) if self.agent_of(lane) in sb3}
        self.external = np.isin(np.arange(len(lane_seeds)), list(self.sb3))
        self.sb3_until = np.zeros(len(lane_seeds), np.int64)
        self.sb3_ends: dict[int, list[tuple[int, float]]] = {lane: [] for lane in self.sb3}

        def strategy(method: str, seed: int) -> Strategy:
            setup = config.run_setup(self.env.observation_space, self.env.n_actions, seed)
            return get_method(method)(config.options_for(method), setup)

        self.runs = [RunState(method, strategy(method, s), s, np.arange(i * A, (i + 1) * A),
                              codec=codec_link(config.codecs(), s),
                              clock=run_clock(config, method, s, self.env.obs_dim, self.env.n_actions))
                     for i, (method, s) in enumerate(runs)]
        self.channels = [make_channel(config.channel, derive_seed(s, Stream.RL_CHANNEL), **dict(config.channel_options))
                         for s in seeds]
        L = len(lane_seeds)
        # which lanes step, wait at the barrier or have retired, their episodes and mission windows,
        # which runs have ended: what the episode-end rule reads and writes (``frd.rl.episode_end``)
        self.standing = episode_end.standing(np.array([run.strategy.exchanges for run in self.runs]), A, config.window,
                                             config.period)
        self.mission = episode_end.mission(config, A)
        self.score = np.zeros(L)
        self.env_steps = np.zeros(L, np.int64)
        self.records = np.repeat([run.strategy.records_memory for run in self.runs], A)  # lanes that keep a memory
        self.memory = (ExperienceMemory(L, self.env.obs_dim, self.env.n_actions)
                       if self.records.any() else None)
        for i in range(len(self.runs)):
            self._open_round(i)
        self.hooked = [run for run in self.runs if run.strategy.hooks_updates()]
        self.live_runs = len(self.runs)
        self.at_barrier: set[int] = set()  # runs whose barrier may have just completed
        self.stale_rows = False            # a run finished since the last compaction
        self.done: list[dict] = []         # tables of runs finished, not yet handed out
        self.finishing: list[tuple[RunState, dict]] = []  # finished runs and tables still without their weights
        self.clock = 0                     # steps of the batch so far (every lane's rollout slot follows it;
                                           # fused, each call adds its furthest run's)
        self.run_clock = np.zeros(len(self.runs), np.int64)  # each run's own steps (runs part, ``fused``)
        self.paused = False                # set by a subclass to leave ``run`` at the next safe point
        # CartPole with one learner: a whole update period per call, run by run (``frd.rl.fused``)
        self.fused = (isinstance(self.env, CartPoleLanes) and len(self.pop.groups) == 1
                      and self.pop.groups[0].config.n_steps <= RESET_BLOCK)

    @property
    def active(self) -> np.ndarray:
        """Lanes that step now."""
        return self.standing.active

    @property
    def waiting(self) -> np.ndarray:
        """Lanes at the exchange barrier."""
        return self.standing.waiting

    @property
    def capped(self) -> np.ndarray:
        """Lanes retired (capped, or completed while others go on)."""
        return self.standing.capped

    @property
    def episode(self) -> np.ndarray:
        """Each lane's episodes so far."""
        return self.standing.episode

    def _configure_torch(self) -> None:
        torch.set_num_threads(self.config.threads)
        torch.set_flush_denormal(True)  # denormal weights and moments would slow every op
        kernel.one_blas_thread()

    def __setstate__(self, state: dict) -> None:
        """Unpickled (``BatchCheckpoint``): torch's process settings are not part of the state."""
        self.__dict__.update(state)
        self._configure_torch()

    def run(self, on_status: Callable[[str], None] = lambda text: None) -> Iterator[dict[str, pd.DataFrame]]:
        """Step from the start until every run has finished, yielding each run's tables as it
        finishes; ``on_status`` hears how far the live runs are."""
        self.reset()
        yield from self.proceed(on_status)

    def proceed(self, on_status: Callable[[str], None] = lambda text: None,
                checkpoint: Callable[[RLBatch], None] | None = None) -> Iterator[dict[str, pd.DataFrame]]:
        """``run`` from where the batch stands (a subclass paused it, see ``paused``; or it was
        unpickled); ``checkpoint`` is offered the batch at safe points, once its finished runs
        were handed out. Once the last run has finished, the lanes step idle to the next safe point
        for its weights (as they would beside runs still going)."""
        self.paused = False
        tick = last_status = time.perf_counter()
        while (self.live_runs or self.finishing) and not self.paused:
            self.step()
            safe = self.pop.between_updates  # every group just updated: a safe point for rounds
            if safe:
                self._take_models()
                now = time.perf_counter()
                self._charge_compute(now - tick)
                self._after_updates()
                self._exchange_rounds()
                self._compact()
                tick = time.perf_counter()
                if tick - last_status > 1.0:
                    self._report_status(on_status)
                    last_status = tick
            while self.done:
                yield self.done.pop(0)
            if safe and checkpoint is not None and self.live_runs:
                checkpoint(self)

    def reset(self) -> None:
        self.obs = self.env.reset()

    def step(self) -> None:
        """One env step of every active lane, learning when the rollout is full (exchange rounds
        and compaction are ``run``'s, between updates); a whole update period when ``fused``, unless
        an SB3 agent is to start a collection in it after its first step."""
        if self.fused and self.pop.between_updates:
            self._collect_at_first_step()
            if not self._collection_due():
                self._step_period()
                return
        self.clock += 1
        self.run_clock += 1
        r = self.rows
        compacted = len(r) < len(self.obs)  # else every lane has its own row, in lane order
        rows_obs = self.obs[r] if compacted else self.obs
        stepping = self.active & ~self.external
        actions, probs = self.pop.act(rows_obs, stepping[r] if compacted else stepping)
        if compacted:
            full_actions = np.zeros(len(self.obs), np.int64)
            full_actions[r] = actions
        if self.memory is not None:
            lanes = np.flatnonzero((stepping & self.records)[r])
            self.memory.add(r[lanes], rows_obs[lanes], probs[lanes])
        out = self.env.step(full_actions if compacted else actions, stepping)
        taken = (out.reward, out.final_obs, out.terminated, out.truncated, stepping.astype(np.float32))
        self.pop.observe(rows_obs, actions, *(part[r] for part in taken) if compacted else taken)
        self.score += out.reward
        self.env_steps += stepping
        ended = np.flatnonzero((out.terminated | out.truncated) & stepping).tolist()
        if not self.sb3:
            for lane in ended:
                self._end_episode(lane)
        else:
            ends: list[tuple[int, float | None]] = [(lane, None) for lane in ended]
            for lane, score in sorted(ends + self._step_sb3(), key=lambda end: end[0]):
                if score is None:
                    self._end_episode(lane)
                else:
                    self._end_sb3_episode(lane, score)
            for lane in self.sb3:  # a collection ended at the barrier: its agent is ready for the round
                if self.waiting[lane] and self.sb3_until[lane] == self._clock_of(lane):
                    self.at_barrier.add(self._run_of(lane))
        self.obs = out.obs

    def _collection_due(self) -> bool:
        """Whether an SB3 agent that plays on may have to start a collection in its run's next update
        period (a fused call stops a run before any later such period, ``fused``)."""
        n = self.pop.groups[0].config.n_steps
        return any(self.sb3_until[lane] < self._clock_of(lane) + n and self.active[lane]
                   and not self.standing.finished[self._run_of(lane)] for lane in self.sb3)

    def _collect_at_first_step(self) -> None:
        """The collections that SB3 agents start at the next step, played now: lockstep would start
        them at that step from the same standing (``_step_sb3`` reads it before the step's episode
        ends), and a collection is the agent's own (its env, its generators), so a fused period
        follows. With collections a whole number of periods long (the zoo's 256 steps) every one
        starts so."""
        for lane, learner in self.sb3.items():
            clock = self._clock_of(lane) + 1
            if (self.sb3_until[lane] < clock and self.active[lane] and not self.capped[lane]
                    and not self.standing.finished[self._run_of(lane)]):
                self._collect(lane, learner, clock)

    def _clock_of(self, lane: int) -> int:
        """The steps of ``lane``'s run so far: its SB3 collections and their ends follow it."""
        return int(self.run_clock[self._run_of(lane)])

    def _step_sb3(self) -> list[tuple[int, float | None]]:
        """This step of every SB3 agent still playing (a new collection where one is due and it
        is not at its barrier), and the scores of its episodes that end at it."""
        ends: list[tuple[int, float | None]] = []
        for lane, learner in self.sb3.items():
            if self.standing.finished[self._run_of(lane)] or self.capped[lane]:
                continue
            if self.sb3_until[lane] < self._clock_of(lane):  # at a safe point
                if not self.active[lane]:
                    continue  # at the barrier: it waits there for the round
                self._collect(lane, learner, self._clock_of(lane))
            self.env_steps[lane] += 1
            queue = self.sb3_ends[lane]
            if queue and queue[0][0] == self._clock_of(lane):
                ends.append((lane, queue.pop(0)[1]))
        return ends

    def _collect(self, lane: int, learner: SB3Learner, clock: int) -> None:
        """``learner`` plays its next collection from its run's step ``clock`` on; its states join the memory."""
        played = learner.collect()
        self.sb3_until[lane] = clock + played.steps - 1
        self.sb3_ends[lane] = [(clock + step - 1, score) for step, score in played.ends]
        if self.memory is not None and self.records[lane] and played.steps:
            assert played.probs is not None
            self.memory.extend(lane, np.array(played.states, np.float32), played.probs)

    def _end_sb3_episode(self, lane: int, score: float) -> None:
        what = episode_end.end_episode(lane, score, self.mission, self.standing)
        if what != episode_end.DROPPED:
            self._record(lane, int(self.episode[lane]), score, int(self.env_steps[lane]), what)

    def _report_status(self, on_status: Callable[[str], None]) -> None:
        live = [r for r in self.runs if not r.finished]
        if live:
            methods = ",".join(dict.fromkeys(r.method for r in live))
            episodes = self.episode[np.concatenate([r.lanes for r in live])]
            on_status(f"{methods}: episode ~{int(np.median(episodes))} in {len(live)} live runs")

    def _charge_compute(self, seconds: float) -> None:
        """Split the batch's compute time equally over the live runs (each has the same lanes)."""
        live = [r for r in self.runs if not r.finished]
        for run in live:
            run.compute_s += seconds / len(live)

    def _run_of(self, lane: int) -> int:
        """The index of ``lane``'s run."""
        return lane // len(self.agent_ids)

    def agent_of(self, lane: int) -> int:
        """The agent of its run that ``lane`` is."""
        return self.agent_ids[lane % len(self.agent_ids)]

    def _end_episode(self, lane: int) -> None:
        score = float(self.score[lane])
        what = episode_end.end_episode(lane, score, self.mission, self.standing)
        if what != episode_end.DROPPED:
            self.score[lane] = 0.0
            self._record(lane, int(self.episode[lane]), score, int(self.env_steps[lane]), what)

    def _record(self, lane: int, episode: int, score: float, env_steps: int, what: int) -> None:
        """Record ``lane``'s episode, whose end did ``what`` (``episode_end.end_episode``), and what
        follows from it here: the run's tables when it ended, a look for a round when a lane stopped."""
        i = self._run_of(lane)
        run, agent = self.runs[i], self.agent_of(lane)
        run.episodes.append(episode_row(run, agent, episode, score, env_steps))
        if what & episode_end.LANE == episode_end.COMPLETED:
            run.completed_at[agent] = episode
        if what & episode_end.ENDS_RUN:
            self._finish(run)
        elif what != episode_end.GOES_ON:
            self.at_barrier.add(i)  # its barrier may be complete (or the others were waiting for this lane)

    def _step_period(self) -> None:
        """``fused.periods``: the next update periods of every run in one call, as many as can pass
        without the runner (``_periods_at_once``, each run's own count), then their episodes
        recorded here in lockstep order."""
        group, env = self.pop.groups[0], self.env
        assert isinstance(env, CartPoleLanes)
        n, rows, start = group.config.n_steps, self.rows, self.clock
        run_start = self.run_clock.copy()
        most = self._periods_at_once(n)
        env.reserve_resets(n * most)
        if self.memory is not None:
            self.memory.reserve(n * most)
            memory = fused.MemoryArrays(self.memory.states, self.memory.probs, self.memory.size)
        else:
            memory = fused.MemoryArrays(np.zeros((0, 0, env.obs_dim), np.float32),
                                        np.zeros((0, 0, env.n_actions), np.float32), np.zeros(0, np.int64))
        room = len(rows) * n * most
        events = fused.Events(tick=np.empty(room, np.int64), lane=np.empty(room, np.int64),
                              episode=np.empty(room, np.int64), score=np.empty(room), steps=np.empty(room, np.int64),
                              what=np.empty(room, np.int64))
        periods = np.empty(len(rows), np.int64)  # each row's, written by the call
        count = fused.periods(most, rows, group.dims, group.nets, group.adam, group.rollout.arrays, group.cache,
                              group.hyper, group.draw_uniforms(n * most), env.kernel_state(),
                              fused.LaneArrays(self.obs, self.score, self.env_steps, self.records),
                              self._external(n * most), memory, self.mission, self.standing, events, periods)
        tick, lane_of, episode, score, steps, what = events
        group.undraw_uniforms(n * (most - periods))
        order = np.lexsort((lane_of[:count], tick[:count]))
        for t, lane, ep, points, taken, did in zip(*(column[order].tolist() for column in (
                tick, lane_of, episode, score, steps, what))):  # Python numbers: cheaper per event than numpy's
            self.clock = start + t + 1  # as in lockstep while that step's episodes end
            self._record(lane, ep, points, taken, did)
        self.clock = start + n * int(periods.max(initial=1))  # the furthest run's (runs may part, ``fused``)
        run_of_row = rows // len(self.agent_ids)
        self.run_clock[run_of_row] = run_start[run_of_row] + n * periods  # the rows of a run took its periods
        for lane in self.sb3:
            i, clock = self._run_of(lane), self._clock_of(lane)
            self.sb3_ends[lane] = [end for end in self.sb3_ends[lane] if end[0] > clock]
            if self.waiting[lane] and run_start[i] < self.sb3_until[lane] <= clock:  # ready for the round
                self.at_barrier.add(i)

    def _external(self, steps: int) -> fused.External:
        """The SB3 agents' next ``steps`` steps, each on its run's clock, as a fused call plays them
        (``fused.External``)."""
        if not self.sb3:
            return fused.External(self.external, self.sb3_until, np.zeros((0, 0)))  # never read
        ends = np.full((len(self.external), steps), np.nan)
        for lane, queue in self.sb3_ends.items():  # a retired lane's may be behind: never played
            start = self._clock_of(lane)
            for clock, score in queue:
                if start < clock <= start + steps:
                    ends[lane, clock - start - 1] = score
        starts = self.run_clock[np.arange(len(self.external)) // len(self.agent_ids)]
        return fused.External(self.external, self.sb3_until - starts - 1, ends)

    def _periods_at_once(self, n: int) -> int:
        """How many update periods the next fused call may take: one where the runner has work
        between every two (a learner hook, a round still to hold), else those whose steps fill
        half a block of first states reserved ahead (so that lanes refill it rarely); each run
        stops at its first episode end that needs the runner, or at its SB3 agents' next
        collection (``fused.External``). Fewer Python round trips
        (~110 µs each at 64 lanes), the same results."""
        if self.hooked or self.at_barrier:
            return 1
        return max(1, RESET_BLOCK // (2 * n))

    def _row_of(self) -> dict[int, int]:
        return {int(lane): row for row, lane in enumerate(self.rows)}

    def _after_updates(self) -> None:
        """The learner hook of the strategies that have one, for their runs' live agents."""
        if not self.hooked:
            return
        row_of = self._row_of()
        for run in self.hooked:
            if not run.finished:
                start = time.perf_counter()
                run.strategy.after_update(self.pop, [row_of[int(lane)] for lane in run.lanes[~self.capped[run.lanes]]])
                run.compute_s += time.perf_counter() - start

    def _exchange_rounds(self) -> None:
        """A round for every run whose live participants have all reached the barrier."""
        if not self.at_barrier:
            return
        row_of = self._row_of()
        candidates, self.at_barrier = sorted(self.at_barrier), set()
        for i in candidates:
            run = self.runs[i]
            if run.finished:
                continue
            live = episode_end.participating(self.standing, run.lanes)
            if len(live) == 0:  # the round's participants all retired before it: it is drawn again
                self._open_round(i)
                continue
            if not self.waiting[live].all():
                continue
            if (self.sb3_until[live] > self.run_clock[i]).any():  # an SB3 agent still plays to its safe point
                continue
            start = time.perf_counter()
            if self.exchange(i, {self.agent_of(int(lane)): row_of[int(lane)] for lane in live}):
                run.rounds += 1
                run.round_log += [{"round": run.rounds, **row} for row in run.strategy.log]
                run.strategy.log = []
                self._open_round(i)
            else:
                self.at_barrier.add(i)  # not yet: look again at the next safe point
            run.compute_s += time.perf_counter() - start

    def _open_round(self, i: int) -> None:
        """Draw run ``i``'s participants in its next round, K of its live agents (``RLConfig.per_round``;
        all of them, and no draw, when K covers them), and open the round's period
        (``episode_end.next_round``): the waiting step again, the participants wait next after
        ``period`` more episodes, and only they record a memory [our reading of partial
        participation: the server samples at the start of a period, as FedAvg at the start of a round;
        the others learn on alone, so a round waits for no agent that takes no part in it]."""
        run = self.runs[i]
        live = run.lanes[~self.capped[run.lanes]]
        k = self.config.per_round()
        chosen = live if k >= len(live) else np.sort(live[run.participation.choice(len(live), k, replace=False)])
        episode_end.next_round(self.standing, run.lanes, chosen, self.config.period)
        self.records[run.lanes] = False
        self.records[chosen] = run.strategy.records_memory

    def round_context(self, i: int, rows: dict[int, int], rng: np.random.Generator,
                      recent_scores: dict[int, float] | None = None) -> RoundContext:
        """Run ``i``'s round as its strategy sees it; each agent's memory of the period is taken."""
        run = self.runs[i]
        lanes = {a: run.lanes[self.agent_ids.index(a)] for a in rows}
        memories = ({a: self.memory.take(lane) for a, lane in lanes.items()}
                    if self.memory is not None and run.strategy.records_memory else {})
        scores = (recent_scores if recent_scores is not None
                  else {a: episode_end.recent_mean(self.standing, lane) for a, lane in lanes.items()})
        return RoundContext(self.population, rows, memories, rng, scores)

    @property
    def population(self) -> GroupedPopulation | MixedPopulation:
        """The learners by population row, SB3 agents at theirs (``MixedPopulation``)."""
        if not self.sb3:
            return self.pop
        return MixedPopulation(self.pop, {row: self.sb3[int(lane)] for row, lane in enumerate(self.rows)
                                          if int(lane) in self.sb3})

    def exchange(self, i: int, rows: dict[int, int]) -> bool:
        """Run ``i``'s round among its live participants (``rows``: agent → population row); whether it
        took place (a remote agent may have to wait for its server)."""
        run = self.runs[i]
        run.strategy.begin_round(self.round_context(i, rows, round_rng(run.seed, run.rounds)))
        steps = {a: int(self.env_steps[run.lanes[self.agent_ids.index(a)]]) for a in rows}
        report = run_round(run.strategy, list(rows), run_id=run_id(run.method, run.seed),
                           round_=run.rounds + 1, ledger=run.ledger, channel=self.channels[i], codec=run.codec,
                           timing=run.clock.timing(steps) if run.clock else None)
        run.comm_s += report.comm_s
        clock_round(run, report.times, steps, run.strategy.log)
        return True

    def _finish(self, run: RunState) -> None:
        """The rule ended ``run``: its tables, handed out with its weights (``_take_models``)."""
        run.finished = True
        self.live_runs -= 1
        self.stale_rows = True
        tables = run_tables(self.config, run, self.episode[run.lanes], self.env_steps[run.lanes])
        if self.saves_models:
            self.finishing.append((run, tables))
        else:
            self.done.append(tables)

    def _take_models(self) -> None:
        """At a safe point, the finished runs' tables with each agent's actor and critic. A run
        ends mid-rollout, and its lanes still learn from the steps they took in it at the update
        that closes it [our reading of "final": after that update]; so the weights are the same
        whether a run's lanes step one step per call or a whole period (``fused``), and whether
        other runs share the batch."""
        if not self.finishing:
            return
        row_of, population = self._row_of(), self.population
        for run, tables in self.finishing:
            networks = {a: population.networks(row_of[int(lane)]) for a, lane in zip(self.agent_ids, run.lanes)}
            self.done.append({**tables, MODELS: agents_file(self.config, run.method, run.seed, networks)})
            for lane in run.lanes:
                self.sb3.pop(int(lane), None)  # its SB3 agents are done
        self.finishing = []

    def _compact(self) -> None:
        """Drop the population rows of finished runs once they are a quarter of the stack."""
        if not self.stale_rows:
            return
        self.stale_rows = False
        keep = np.flatnonzero([not self.runs[self._run_of(int(lane))].finished for lane in self.rows])
        if len(keep) and len(keep) <= 0.75 * len(self.rows):
            self.pop.keep(keep.tolist())
            self.rows = self.rows[keep]  # otherwise look again when the next run finishes


def run_clock(config: RLConfig, method: str, seed: int, obs_dim: int, n_actions: int) -> RunClock:
    """Run (``method``, ``seed``)'s agents on the virtual clock (distilling at its minibatch size)."""
    return RunClock(config, obs_dim, n_actions, seed, getattr(config.options_for(method), "distill_batch", 64))


def episode_row(run: RunState, agent: int, episode: int, score: float, env_steps: int) -> tuple:
    """An episodes.csv row of ``run``: with the agent's time at its end on the virtual clock."""
    return agent, episode, score, env_steps, run.clock.at(agent, env_steps) if run.clock else np.nan


def clock_round(run: RunState, times: RoundTimes | None, steps: dict[int, int], log: Sequence[dict]) -> None:
    """After a round of ``run``: its participants' clocks resume, each after the minibatches it distilled
    (its rows of the round's ``log``, ``ROUND_COLUMNS``)."""
    if run.clock is not None and times is not None:
        run.clock.after_round(times, steps, {row["agent"]: int(row["steps"]) for row in log})


def round_rng(seed: int, rounds_done: int) -> np.random.Generator:
    """The generator of a run's next round (its method's draws: shuffles, mixes)."""
    return np.random.default_rng(derive_seed(seed, rounds_done, Stream.RL_EXCHANGE))


def run_tables(config: RLConfig, run: RunState, episodes: np.ndarray, env_steps: np.ndarray) -> dict[str, pd.DataFrame]:
    """A finished run's tables; ``episodes`` and ``env_steps`` are each agent's counts when it finished.
    runs.csv has ``agents_per_round`` under partial participation only [our choice: so that tables at
    the default stay those of results saved before it]."""
    rid = run_id(run.method, run.seed)
    frame = pd.DataFrame(run.episodes, columns=["agent", "episode", "score", "env_steps", "sim_s"])
    algorithms = config.algorithms()
    frame.insert(1, ALGORITHM, [algorithms[a] for a in frame["agent"]])
    frame.insert(0, "seed", run.seed)
    frame.insert(0, "method", run.method)
    frame.insert(0, "run_id", rid)
    totals = run.ledger.totals()
    first = next(iter(run.completed_at.values()), None)  # the first agent to complete
    per_agent = [run.completed_at.get(a, int(n)) for a, n in enumerate(episodes)]
    every = config.until == "all"
    partial = {"agents_per_round": config.per_round()} if config.per_round() < config.agents else {}
    runs = pd.DataFrame([dict(
        run_id=rid, method=run.method, seed=run.seed, n_agents=config.agents, **partial,
        **{ALGORITHM: "+".join(algorithms)},
        completed=first is not None,
        mission_episodes=first if first is not None else int(max(episodes)),
        all_agents_episodes=max(per_agent) if every else np.nan,
        median_agent_episodes=float(np.median(per_agent)) if every else np.nan,
        agents_completed=len(run.completed_at),
        mission_env_steps=int(sum(env_steps)),
        compute_s=run.compute_s, comm_s=run.comm_s, **virtual_times(run, episodes, env_steps),
        rounds=run.rounds, bits_up=totals["bits_up"], bits_down=totals["bits_down"])])
    rounds = pd.DataFrame(run.round_log, columns=ROUND_COLUMNS)
    rounds.insert(0, "seed", run.seed)
    rounds.insert(0, "method", run.method)
    rounds.insert(0, "run_id", rid)
    return {"episodes": frame, "ledger": run.ledger.frame(), "rounds": rounds, "runs": runs}


def virtual_times(run: RunState, episodes: np.ndarray, env_steps: np.ndarray) -> dict[str, float]:
    """runs.csv's virtual seconds: ``mission_sim_s``, when the first agent in seconds completed (the run's
    end if none did), and ``sim_s``, when the run ended (its latest agent's time). ``env_steps``: each
    agent's steps at the end; a completion's time is its episode's (``episode_row``)."""
    if run.clock is None:
        return {"mission_sim_s": np.nan, "sim_s": np.nan}
    end = max(run.clock.at(a, int(n)) for a, n in enumerate(env_steps))
    at = {(a, e): t for a, e, _, _, t in run.episodes}
    completions = [at[(a, e)] for a, e in run.completed_at.items()]
    return {"mission_sim_s": min(completions, default=end), "sim_s": end}


def iter_simulate(config: RLConfig, runs: Sequence[tuple[str, int]],
                  on_status: Callable[[str], None] = lambda text: None,
                  checkpoint: BatchCheckpoint | None = None) -> Iterator[dict[str, pd.DataFrame]]:
    """Run every (method, seed) of ``runs`` in one batch, yielding each run's tables as it finishes;
    with a ``checkpoint``, from the batch saved there when it holds these runs (a run it holds
    that finished after it was saved runs again, to the same tables), saving it as it goes."""
    if not runs:
        return
    if config.sb3_configs():  # an SB3 model does not pickle with its env: such runs resume whole
        checkpoint = None
    batch = checkpoint.resume(runs) if checkpoint is not None else None
    if batch is None:
        batch = RLBatch(config, runs)
        batch.reset()
    yield from batch.proceed(on_status, checkpoint)
    if checkpoint is not None:
        checkpoint.clear()


def simulate(config: RLConfig, runs: Sequence[tuple[str, int]],
             on_finished: Callable[[dict[str, pd.DataFrame]], None],
             on_status: Callable[[str], None] = lambda text: None,
             checkpoint: BatchCheckpoint | None = None) -> None:
    """``iter_simulate`` with a callback per finished run."""
    for tables in iter_simulate(config, runs, on_status, checkpoint):
        on_finished(tables)

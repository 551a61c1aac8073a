"""The RL round loop: every lane of every run stepped in lockstep, rounds at the barrier,
each run retired at its mission or its episode cap and saved at once."""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterator, Sequence

import numpy as np
import pandas as pd
import torch

from agents.a2c import A2CPopulation, recipe
from envs.grid import grid_for
from envs.lanes import check_env_id, make_lanes
from frd.channel import make_channel
from frd.errors import FrdError
from frd.exchange import run_round
from frd.ledger import Ledger
from frd.mission import MissionWindow
from frd.rl_memory import ExperienceMemory
from frd.rl_methods import RLMethod, RunRound, get_method
from frd.seeding import derive_seed

CODECS = ("paper", "compact")
WEIGHTINGS = ("mean", "count")


@dataclass(frozen=True)
class RLConfig:
    methods: tuple[str, ...] = ("independent",)  # exchange schemes to run (frd.rl_methods.METHODS)
    env_id: str = "CartPole-v1"    # any gymnasium env with Box observations and Discrete actions
    agents: int = 2                # agents per run, each with its own env and seed
    seeds: int = 20                # runs per method, seeds first_seed … first_seed+seeds−1
    first_seed: int = 0            # seed of the first run
    max_episodes: int = 2000       # per-agent episode cap; a run that hits it is "not completed"
    period: int = 25               # E: episodes per agent between exchange rounds
    target: float = 490.0          # mission: mean score over the latest `window` episodes ≥ target
    window: int = 10               # episodes in the mission average
    recipe: str = "nstep"          # A2C recipe: nstep (default) or rlcode
    hidden: int = 64               # hidden width h of actor and critic
    activation: str = "tanh"       # hidden activation
    grid: int = 30                 # S: FRD intervals per observation dimension
    grid_bounds: tuple | None = None  # FRD grid bounds per dimension; None: env default
    codec: str = "paper"           # FRD payload codec: paper (state floats) or compact (cell index)
    frd_weighting: str = "mean"    # FRD server average: mean of agents' means, or count-weighted
    frl_critic: bool = False       # FRL averages the critic too
    channel: str = "ideal"         # channel model of every transfer (frd.channel.CHANNELS)
    channel_options: tuple = ()    # (name, value) overrides of the channel's parameters
    distill_epochs: int = 1        # PD/FRD: passes over the downloaded memory
    distill_batch: int = 64        # PD/FRD: minibatch of that distillation
    distill_lr: float = 1e-4       # PD/FRD: learning rate of the distillation optimizer
    threads: int = 1               # torch threads (1 is fastest below ~256 lanes here)

    def validate(self) -> None:
        for name, value in (("agents", self.agents), ("seeds", self.seeds), ("max-episodes", self.max_episodes),
                            ("period", self.period), ("window", self.window), ("grid", self.grid),
                            ("hidden", self.hidden), ("threads", self.threads),
                            ("distill-epochs", self.distill_epochs), ("distill-batch", self.distill_batch)):
            if value < 1:
                raise FrdError(f"--{name} must be at least 1, got {value}")
        if not self.methods:
            raise FrdError("give at least one method")
        methods = [get_method(m) for m in self.methods]
        if self.codec not in CODECS:
            raise FrdError(f"unknown codec {self.codec!r}; choose {' or '.join(CODECS)}")
        if self.frd_weighting not in WEIGHTINGS:
            raise FrdError(f"unknown FRD weighting {self.frd_weighting!r}; choose {' or '.join(WEIGHTINGS)}")
        recipe(self.recipe, hidden=self.hidden, activation=self.activation)
        if self.activation not in ("tanh", "relu"):
            raise FrdError(f"unknown activation {self.activation!r}; choose tanh or relu")
        env = check_env_id(self.env_id)
        if any(m.needs_grid for m in methods):
            grid_for(self.env_id, env.observation_space, self.grid, self.grid_bounds)
        make_channel(self.channel, 0, **dict(self.channel_options))

    def resume_key(self) -> dict:
        """What must match to resume a folder: everything but the seeds and the method list."""
        return {k: v for k, v in asdict(self).items() if k not in ("seeds", "methods", "threads")}


def run_id(method: str, seed: int) -> str:
    return f"{method}-seed{seed}"


@dataclass
class RunState:
    """Bookkeeping of one run (seed) inside the batch."""

    method: RLMethod
    seed: int
    lanes: np.ndarray
    windows: list[MissionWindow]
    ledger: Ledger = field(default_factory=Ledger)
    episodes: list[tuple] = field(default_factory=list)
    rounds: int = 0
    compute_s: float = 0.0
    comm_s: float = 0.0
    finished: bool = False


class RLBatch:
    """Runs (method, seed) as lanes of one vector env and one A2C population.

    Runs of different methods can share a batch: a run's results do not depend on its
    batch-mates (tested), and one batch keeps more lanes busy than one per method would.
    """

    def __init__(self, config: RLConfig, runs: Sequence[tuple[RLMethod, int]]) -> None:
        self.config = config
        seeds = [seed for _, seed in runs]
        torch.set_num_threads(config.threads)
        torch.set_flush_denormal(True)  # denormal weights and moments would slow every op
        A = config.agents
        lane_seeds = [derive_seed(s, a) for s in seeds for a in range(A)]
        self.env = make_lanes(config.env_id, lane_seeds)
        a2c = recipe(config.recipe, hidden=config.hidden, activation=config.activation,
                     distill_epochs=config.distill_epochs, distill_batch=config.distill_batch,
                     distill_lr=config.distill_lr)
        # Every agent of a run starts from the same networks, as from a server's initial model.
        init_seeds = [derive_seed(s, 0x1417) for s in seeds for _ in range(A)]
        self.pop = A2CPopulation(lane_seeds, self.env.obs_dim, self.env.n_actions, a2c, init_seeds)
        self.rows = np.arange(len(lane_seeds))      # population row → env lane
        self.runs = [RunState(method, s, np.arange(i * A, (i + 1) * A),
                              [MissionWindow(config.target, config.window) for _ in range(A)])
                     for i, (method, s) in enumerate(runs)]
        self.channels = [make_channel(config.channel, derive_seed(s, 0xC4A), **dict(config.channel_options))
                         for s in seeds]
        L = len(lane_seeds)
        self.active = np.ones(L, bool)       # lanes that step now
        self.waiting = np.zeros(L, bool)     # lanes at the exchange barrier
        self.capped = np.zeros(L, bool)      # lanes that reached the episode cap
        self.score = np.zeros(L)
        self.episode = np.zeros(L, np.int64)
        self.env_steps = np.zeros(L, np.int64)
        self.records = np.repeat([method.records_memory for method, _ in runs], A)  # lanes that keep a memory
        self.memory = (ExperienceMemory(L, self.env.obs_dim, self.env.n_actions)
                       if self.records.any() else None)
        self.live_runs = len(self.runs)
        self.at_barrier: set[int] = set()  # runs whose barrier may have just completed
        self.stale_rows = False            # a run finished since the last compaction
        self.grid = (grid_for(config.env_id, self.env.observation_space, config.grid, config.grid_bounds)
                     if any(method.needs_grid for method, _ in runs) else None)

    def run(self, on_finished: Callable[[dict[str, pd.DataFrame]], None],
            on_status: Callable[[str], None] = lambda text: None) -> None:
        """Step until every run has finished; ``on_status`` hears how far the live runs are."""
        for tables in self.iter_run(on_status):
            on_finished(tables)

    def iter_run(self, on_status: Callable[[str], None] = lambda text: None) -> Iterator[dict[str, pd.DataFrame]]:
        """``run`` as a generator: each run's tables are yielded the step it finishes."""
        self.reset()
        finished: list[dict[str, pd.DataFrame]] = []
        tick = last_status = time.perf_counter()
        while self.live_runs:
            self.step(finished.append)
            while finished:
                yield finished.pop(0)
            if self.pop.rollout.t == 0:  # an update just happened: a safe point for rounds
                now = time.perf_counter()
                self._charge_compute(now - tick)
                self._exchange_rounds()
                self._compact()
                tick = time.perf_counter()
                if tick - last_status > 1.0:
                    self._report_status(on_status)
                    last_status = tick

    def reset(self) -> None:
        self.obs = self.env.reset()

    def step(self, on_finished: Callable[[dict[str, pd.DataFrame]], None]) -> None:
        """One env step of every active lane, learning when the rollout is full (exchange rounds
        and compaction are ``run``'s, between updates)."""
        rows_obs = self.obs[self.rows]
        actions, probs = self.pop.act(rows_obs)
        full_actions = np.zeros(len(self.obs), np.int64)
        full_actions[self.rows] = actions
        stepping = self.active.copy()
        if self.memory is not None:
            lanes = np.flatnonzero((stepping & self.records)[self.rows])
            self.memory.add(self.rows[lanes], rows_obs[lanes], probs[lanes])
        out = self.env.step(full_actions, stepping)
        r = self.rows
        self.pop.observe(rows_obs, actions, out.reward[r], out.final_obs[r], out.terminated[r],
                         out.truncated[r], stepping[r].astype(np.float32))
        self.score += out.reward
        self.env_steps += stepping
        for lane in np.flatnonzero((out.terminated | out.truncated) & stepping):
            self._end_episode(lane, on_finished)
        self.obs = out.obs

    def _report_status(self, on_status: Callable[[str], None]) -> None:
        live = [r for r in self.runs if not r.finished]
        if live:
            methods = ",".join(dict.fromkeys(r.method.name for r in live))
            episodes = self.episode[np.concatenate([r.lanes for r in live])]
            on_status(f"{methods}: episode ~{int(np.median(episodes))} in {len(live)} live runs")

    def _charge_compute(self, seconds: float) -> None:
        """Split the batch's compute time equally over the live runs (each has the same lanes)."""
        live = [r for r in self.runs if not r.finished]
        for run in live:
            run.compute_s += seconds / len(live)

    def _end_episode(self, lane: int, on_finished) -> None:
        cfg, A = self.config, self.config.agents
        run, agent = self.runs[lane // A], lane % A
        score, self.score[lane] = self.score[lane], 0.0
        self.episode[lane] += 1
        run.episodes.append((agent, int(self.episode[lane]), float(score), int(self.env_steps[lane])))
        if run.windows[agent].add(score):
            self._finish(run, completed_by=agent, on_finished=on_finished)
        elif self.episode[lane] >= cfg.max_episodes:
            self.capped[lane], self.active[lane] = True, False
            if self.capped[run.lanes].all():
                self._finish(run, completed_by=None, on_finished=on_finished)
            else:
                self.at_barrier.add(lane // A)  # the others may be waiting for this agent
        elif run.method.exchange is not None and self.episode[lane] % cfg.period == 0:
            self.waiting[lane], self.active[lane] = True, False
            self.at_barrier.add(lane // A)

    def _exchange_rounds(self) -> None:
        """A round for every run whose live agents have all reached the barrier."""
        if not self.at_barrier:
            return
        cfg = self.config
        row_of = {lane: row for row, lane in enumerate(self.rows)}
        candidates, self.at_barrier = sorted(self.at_barrier), set()
        for i in candidates:
            run = self.runs[i]
            live = run.lanes[~self.capped[run.lanes]]
            if run.finished or len(live) == 0 or not self.waiting[live].all():
                continue
            start = time.perf_counter()
            agents = [int(l % cfg.agents) for l in live]
            memories = {a: self.memory.take(l) for a, l in zip(agents, live)} if run.method.records_memory else {}
            ctx = RunRound(self.pop, {a: row_of[l] for a, l in zip(agents, live)}, memories, self.grid,
                           cfg.codec, cfg.frd_weighting, cfg.frl_critic,
                           np.random.default_rng(derive_seed(run.seed, run.rounds, 0xD15)))
            exchange = run.method.exchange(ctx)
            report = run_round(exchange, agents, run_id=run_id(run.method.name, run.seed),
                               round_=run.rounds + 1, ledger=run.ledger, channel=self.channels[i])
            exchange.apply()
            run.rounds += 1
            run.comm_s += report.comm_s
            run.compute_s += time.perf_counter() - start
            self.waiting[live], self.active[live] = False, True

    def _finish(self, run: RunState, completed_by: int | None, on_finished) -> None:
        run.finished = True
        self.live_runs -= 1
        self.stale_rows = True
        self.active[run.lanes] = self.waiting[run.lanes] = False
        rid, method = run_id(run.method.name, run.seed), run.method.name
        episodes = pd.DataFrame(run.episodes, columns=["agent", "episode", "score", "env_steps"])
        episodes.insert(0, "seed", run.seed)
        episodes.insert(0, "method", method)
        episodes.insert(0, "run_id", rid)
        totals = run.ledger.totals()
        runs = pd.DataFrame([dict(
            run_id=rid, method=method, seed=run.seed, n_agents=self.config.agents,
            completed=completed_by is not None,
            mission_episodes=int(self.episode[run.lanes[completed_by]] if completed_by is not None
                                 else self.episode[run.lanes].max()),
            mission_env_steps=int(self.env_steps[run.lanes].sum()),
            wall_seconds=run.compute_s, comm_seconds=run.comm_s,
            rounds=run.rounds, bits_up=totals["bits_up"], bits_down=totals["bits_down"])])
        on_finished({"episodes": episodes, "ledger": run.ledger.frame(), "runs": runs})

    def _compact(self) -> None:
        """Drop the population rows of finished runs once they are a quarter of the stack."""
        if not self.stale_rows:
            return
        self.stale_rows = False
        keep = np.flatnonzero([not self.runs[lane // self.config.agents].finished for lane in self.rows])
        if len(keep) and len(keep) <= 0.75 * len(self.rows):
            self.pop.keep(keep.tolist())
            self.rows = self.rows[keep]  # otherwise look again when the next run finishes


def iter_simulate(config: RLConfig, runs: Sequence[tuple[str, int]],
                  on_status: Callable[[str], None] = lambda text: None) -> Iterator[dict[str, pd.DataFrame]]:
    """Run every (method, seed) of ``runs`` in one batch, yielding each run's tables as it finishes."""
    if runs:
        yield from RLBatch(config, [(get_method(method), seed) for method, seed in runs]).iter_run(on_status)


def simulate(config: RLConfig, runs: Sequence[tuple[str, int]],
             on_finished: Callable[[dict[str, pd.DataFrame]], None],
             on_status: Callable[[str], None] = lambda text: None) -> None:
    """Run every (method, seed) of ``runs`` in one batch; ``on_finished`` receives each run's tables."""
    for tables in iter_simulate(config, runs, on_status):
        on_finished(tables)

"""Speed of mixed runs (issue 43): an SB3 agent inside a batch of ours against SB3 alone, and our
lanes beside SB3 agents against the same lanes alone, in one process.

    python -m benchmarks.sb3_mixed [--frd-agents 8 32] [--algos ppo dqn] [--seeds 2] [--episodes 60]
                                   [--repeats 3] [--csv benchmarks/results/sb3_mixed.csv --variant NAME [--commit C]]

Every run is ``independent`` (no exchange) with a fixed number of episodes per agent (target inf,
until all): each of our N agents per run plays exactly ``--episodes`` episodes, and the same ones
beside an SB3 agent as alone (the SB3 agent is the last of the run, so our agents keep their seeds;
the non-interference test of ``tests/test_sb3.py``), so both batches do the same work for them.

- **Our lanes, µs per env step**: the batch's process CPU seconds up to our lanes' last episode
  end (what the batch does after it, while the SB3 agent finishes its own episodes, is not
  counted), less the CPU seconds spent inside the SB3 agents' ``SB3Learner.collect`` calls (SB3
  playing and learning), over our lanes' env steps; alone, the batch's CPU seconds over the same
  steps. The ratio beside / alone is the slowdown of our lanes per step. Also shown: our lanes
  alone with one update period per fused call (what a batch with SB3 agents did while they played
  before each run had its own clock, ``RLBatch.run_clock``: that round trip's cost).
- **The SB3 agent, env steps per CPU second**: its steps over the CPU seconds of its ``collect``
  calls in the mixed batch, against the same algorithm and hyperparameters (``SB3Learner``'s
  model, fresh, same seeds) learning as many steps in one ``model.learn`` call, SB3's own loop.

Process CPU time (fair while other jobs share the machine), medians over ``--repeats``; each repeat
measures every variant once, in turn. ``--csv`` appends one row per measurement (``benchmarks.tidy``).
"""
from __future__ import annotations

import argparse
import gc
import time

import numpy as np
import pandas as pd

from benchmarks.tidy import record
from frd.agents import kernel
from frd.agents.sb3 import Collection, SB3Learner
from frd.rl.config import RLConfig, rl_config
from frd.rl.runner import RLBatch
from frd.seeding import Stream, derive_seed

HIDDEN = 64


class SB3Time:
    """CPU seconds and env steps inside ``SB3Learner.collect``, per learner, while installed."""

    def __init__(self) -> None:
        self.cpu = 0.0
        self.steps: dict[int, int] = {}
        self.original = SB3Learner.collect

    def __enter__(self) -> "SB3Time":
        original, totals = self.original, self

        def collect(learner: SB3Learner) -> Collection:
            start = time.process_time()
            played = original(learner)
            totals.cpu += time.process_time() - start
            totals.steps[id(learner)] = totals.steps.get(id(learner), 0) + played.steps
            return played

        SB3Learner.collect = collect  # type: ignore[method-assign, assignment]
        return self

    def __exit__(self, *exc) -> None:
        SB3Learner.collect = self.original  # type: ignore[method-assign]


class TimedBatch(RLBatch):
    """Notes the process CPU time, and SB3's share so far, when our lanes' last episode is recorded."""

    ours_left: int
    sb3_time: SB3Time
    ours_done: tuple[float, float] | None = None

    def _record(self, lane: int, episode: int, score: float, env_steps: int, what: int) -> None:
        if not self.external[lane] and episode == self.config.max_episodes:
            self.ours_left -= 1
            if self.ours_left == 0:  # before the run's tables, if this ends it
                self.ours_done = (time.process_time(), self.sb3_time.cpu)
        super()._record(lane, episode, score, env_steps, what)


def config(frd_agents: int, algo: str | None, episodes: int, seeds: int) -> RLConfig:
    """N of our agents, then one ``algo`` agent when given, ``episodes`` each."""
    spec = ";".join([f"h={HIDDEN}"] * frd_agents + ([f"algo={algo}"] if algo else []))
    return rl_config("independent", agents=frd_agents + bool(algo), seeds=seeds, hidden=HIDDEN, agent_spec=spec,
                     max_episodes=episodes, target=float("inf"), until="all")


def measure(cfg: RLConfig, frd_agents: int, one_period: bool = False) -> dict:
    """One batch of every seed, run to its end: our lanes' steps and CPU, the SB3 agents' likewise."""
    batch = TimedBatch(cfg, [("independent", seed) for seed in range(cfg.seeds)])
    if one_period:
        batch._periods_at_once = lambda n: 1  # type: ignore[method-assign]
    batch.ours_left = frd_agents * cfg.seeds
    gc.collect()
    gc.freeze()
    with SB3Time() as sb3:
        batch.sb3_time = sb3
        start = time.process_time()
        finished = list(batch.run())
        total = time.process_time() - start
    assert batch.ours_done is not None
    ours_cpu, sb3_cpu_then = batch.ours_done[0] - start, batch.ours_done[1]
    episodes = pd.concat([t["episodes"] for t in finished])
    ours = episodes[episodes["algorithm"] == "frd"]
    assert (ours.groupby(["seed", "agent"]).size() == cfg.max_episodes).all(), "each of our agents plays every episode"
    frd_steps = int(ours.groupby(["seed", "agent"])["env_steps"].max().sum())
    sb3_steps = sum(sb3.steps.values())
    return dict(frd_steps=frd_steps, cpu_s=total, sb3_cpu_s=sb3.cpu, sb3_steps=sb3_steps,
                frd_us_per_step=(ours_cpu - sb3_cpu_then) / frd_steps * 1e6,
                sb3_steps_per_cpu_s=sb3_steps / sb3.cpu if sb3.cpu else np.nan,
                per_learner_steps=list(sb3.steps.values()))


def sb3_alone(cfg: RLConfig, frd_agents: int, steps: list[int]) -> float:
    """SB3's own ``learn`` on fresh learners of the mixed runs' SB3 agent, as many steps as each
    played there: env steps per CPU second over all of them."""
    sb3 = cfg.sb3_configs()[frd_agents]
    cpu = 0.0
    for seed, n in zip(range(cfg.seeds), steps):
        learner = SB3Learner(sb3, cfg.env_id, derive_seed(seed, frd_agents), derive_seed(seed, Stream.RL_INIT))
        gc.collect()
        with learner.own_rng():
            start = time.process_time()
            learner.model.learn(n, log_interval=None)
            cpu += time.process_time() - start
    return sum(steps) / cpu


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Medians over repeats, and the ratios against the references of the same repeats."""
    out = []
    for (n, algo), group in rows[rows["setting"] == "beside SB3"].groupby(["frd_agents", "algo"], sort=False):
        alone = rows[(rows["setting"] == "alone") & (rows["frd_agents"] == n)].set_index("repeat")
        one = rows[(rows["setting"] == "alone, one period per call") & (rows["frd_agents"] == n)].set_index("repeat")
        g = group.set_index("repeat")
        out.append({
            "frd_agents": n, "algo": algo,
            "alone_us": alone["frd_us_per_step"].median(), "one_period_us": one["frd_us_per_step"].median(),
            "beside_us": g["frd_us_per_step"].median(),
            "beside/alone": (g["frd_us_per_step"] / alone["frd_us_per_step"]).median(),
            "sb3_in_batch_steps_per_s": g["sb3_steps_per_cpu_s"].median(),
            "sb3_alone_steps_per_s": g["sb3_alone_steps_per_cpu_s"].median(),
            "in_batch/alone": (g["sb3_steps_per_cpu_s"] / g["sb3_alone_steps_per_cpu_s"]).median(),
            "sb3_share_of_cpu": (g["sb3_cpu_s"] / g["cpu_s"]).median(),
        })
    return pd.DataFrame(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frd-agents", type=int, nargs="+", default=[8, 32], help="our agents per run")
    parser.add_argument("--algos", nargs="+", default=["ppo", "dqn"], help="the SB3 agent's algo= (one per run)")
    parser.add_argument("--seeds", type=int, default=2, help="runs per batch")
    parser.add_argument("--episodes", type=int, default=100, help="episodes of every agent")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--csv", help="also append the measurements to this tidy CSV")
    parser.add_argument("--variant", default="adhoc", help="the variant name its rows are tagged with")
    parser.add_argument("--commit", help="the commit its rows are tagged with (default: the checked-out one; "
                                         "for frd code run from elsewhere on PYTHONPATH)")
    args = parser.parse_args()
    kernel.warm_up()
    measure(config(2, "ppo", 3, 1), 2)  # the fused period with SB3 lanes, the lockstep step, SB3 loaded
    measure(config(2, None, 20, 1), 2)
    rows = []
    for repeat in range(1, args.repeats + 1):
        for n in args.frd_agents:
            alone = config(n, None, args.episodes, args.seeds)
            reference = dict(repeat=repeat, frd_agents=n, algo="", setting="alone", **measure(alone, n))
            rows.append(reference)
            rows.append(dict(repeat=repeat, frd_agents=n, algo="", setting="alone, one period per call",
                             **measure(alone, n, one_period=True)))
            for algo in args.algos:
                mixed = config(n, algo, args.episodes, args.seeds)
                row = dict(repeat=repeat, frd_agents=n, algo=algo, setting="beside SB3", **measure(mixed, n))
                row["sb3_alone_steps_per_cpu_s"] = sb3_alone(mixed, n, row["per_learner_steps"])
                rows.append(row)
                print(f"repeat {repeat}, {n} + {algo}: ours {row['frd_us_per_step']:.2f} µs/step beside "
                      f"(alone {reference['frd_us_per_step']:.2f}); {algo} {row['sb3_steps_per_cpu_s']:,.0f} steps/CPU s "
                      f"in the batch, {row['sb3_alone_steps_per_cpu_s']:,.0f} alone", flush=True)
    table = pd.DataFrame(rows).drop(columns="per_learner_steps")
    print(summary(table).to_string(index=False, float_format=lambda x: f"{x:,.2f}"))
    if args.csv:
        record(table, args.csv, args.variant, args.commit)


if __name__ == "__main__":
    main()

"""Training throughput of the A2C population vs Stable-Baselines3 A2C, in one process.

    python -m benchmarks.throughput [--lanes 8 64 256] [--steps-per-lane 5000] [--csv FILE --variant NAME] [--breakdown]

Both train from scratch for the same number of steps per environment: SB3 A2C with the rl-zoo
CartPole settings on 8 envs, and our population (independent agents, the runner's real step:
acting, env step, A2C updates, episode bookkeeping) with every lane stepping throughout. That
is what "throughput at N lanes" means here; the end-to-end effect of lanes idling at barriers
or after their run finished is what ``benchmarks.mission_time`` measures. Reported per second
of this process's CPU time (fair while other jobs load the machine) and per wall second.
``--breakdown`` also prints how much of the wall time is the fused period kernel (acting, env
steps and updates of a whole update period, ``frd.rl.fused``) and how much the Python around it.
``--lockstep`` also measures the runner with the fused period turned off (one env step per call).
``--csv`` appends the table to a tidy CSV (``benchmarks/results/throughput.csv`` holds every repeat
so far), tagged with the commit, ``--variant`` and the next repeat number (``benchmarks.tidy``).
"""
from __future__ import annotations

import argparse
import gc
import time

import numpy as np
import pandas as pd

from benchmarks.common import Clock, sb3_steps, set_threads
from benchmarks.tidy import record
from frd.agents import kernel
from frd.envs.lanes import CartPoleLanes
from frd.rl import fused
from frd.rl.config import RLConfig
from frd.rl.runner import RLBatch


class PhaseTimes:
    """Wall seconds spent inside chosen methods of chosen objects (wrapped on the instance)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.wrapped: list[tuple[object, str, object]] = []

    def unwrap(self) -> None:
        for obj, method, original in reversed(self.wrapped):
            setattr(obj, method, original)
        self.wrapped = []

    def wrap(self, obj: object, method: str, phase: str) -> None:
        original = getattr(obj, method)
        self.seconds[phase] = 0.0
        self.wrapped.append((obj, method, original))

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[phase] += time.perf_counter() - start

        setattr(obj, method, timed)


def population_steps(lanes: int, steps_per_lane: int, threads: int, phases: PhaseTimes | None = None,
                     lockstep: bool = False) -> tuple[int, Clock]:
    """Env steps taken by ``lanes`` always-stepping lanes in ``steps_per_lane`` steps of each."""
    config = RLConfig(agents=2, seeds=lanes // 2, max_episodes=10**9, target=float("inf"), threads=threads)
    batch = RLBatch(config, [("independent", seed) for seed in range(lanes // 2)])
    batch.fused = batch.fused and not lockstep
    gc.collect()
    gc.freeze()  # what ran before (SB3's heap, another measure's) is no garbage of this one: no full pass over it
    if phases is not None:
        phases.wrap(fused, "periods", "kernel")
    try:
        with Clock() as clock:
            batch.reset()
            while batch.clock < steps_per_lane:  # a step is one env step, or a whole update period (fused)
                batch.step()
    finally:
        if phases is not None:
            phases.unwrap()
    return int(batch.env_steps.sum()), clock


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lanes", type=int, nargs="+", default=[8, 64, 256])
    parser.add_argument("--steps-per-lane", type=int, default=5000,
                        help="steps per env for both runners (SB3 takes 8× this many in all)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for both")
    parser.add_argument("--csv", help="also append the table to this tidy CSV, e.g. benchmarks/results/throughput.csv")
    parser.add_argument("--variant", default="adhoc", help="the variant name its rows are tagged with")
    parser.add_argument("--breakdown", action="store_true", help="also time the fused kernel and the rest per step")
    parser.add_argument("--lockstep", action="store_true", help="also run the runner one env step per call")
    args = parser.parse_args()
    set_threads(args.threads)
    # numba compiles on first use (cached on disk afterwards): load it before any clock starts
    start = time.perf_counter()
    kernel.warm_up()
    lanes = CartPoleLanes([0])
    lanes.reset()
    lanes.step(np.zeros(1, np.int64), np.ones(1, bool))
    population_steps(2, 200, args.threads)  # the fused period, past episode ends (their rule is loaded at the first)
    population_steps(2, 200, args.threads, lockstep=True)
    print(f"numba kernels ready in {time.perf_counter() - start:.1f} s (compile on first run, then cache load)", flush=True)
    sb3_total = 8 * args.steps_per_lane
    sb3 = sb3_steps(sb3_total)
    rows = [("SB3 A2C (8 envs)", 8, sb3_total, sb3)]
    for lanes in args.lanes:
        phases = PhaseTimes() if args.breakdown else None
        rows.append(("frd population", lanes, *population_steps(lanes, args.steps_per_lane, args.threads, phases)))
        print(f"{lanes} lanes: {rows[-1][2] / rows[-1][3].cpu:,.0f} env steps per CPU second", flush=True)
        if phases is not None:
            per_step = {k: v / args.steps_per_lane * 1e6 for k, v in phases.seconds.items()}
            per_step["rest"] = rows[-1][3].wall / args.steps_per_lane * 1e6 - sum(per_step.values())
            print("  µs per step of the batch: " + ", ".join(f"{k} {v:,.0f}" for k, v in per_step.items()), flush=True)
        if args.lockstep:
            rows.append(("frd, lockstep", lanes, *population_steps(lanes, args.steps_per_lane, args.threads,
                                                                    lockstep=True)))
            print(f"{lanes} lanes, lockstep: {rows[-1][2] / rows[-1][3].cpu:,.0f} env steps per CPU second", flush=True)
    table = pd.DataFrame([{
        "runner": runner, "lanes": lanes,
        "steps_per_cpu_s": steps / clock.cpu, "ratio_cpu": (steps / clock.cpu) / (sb3_total / sb3.cpu),
        "steps_per_wall_s": steps / clock.wall, "ratio_wall": (steps / clock.wall) / (sb3_total / sb3.wall),
    } for runner, lanes, steps, clock in rows])
    print(table.to_string(index=False, float_format=lambda x: f"{x:,.1f}"))
    if args.csv:
        record(table, args.csv, args.variant)


if __name__ == "__main__":
    main()

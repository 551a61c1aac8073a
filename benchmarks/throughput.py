"""Training throughput of the A2C population vs Stable-Baselines3 A2C, in one process.

    python benchmarks/throughput.py [--lanes 8 64 256] [--episodes 100] [--sb3-steps 40000]

Each population figure is the real training loop (``frd.rl_runner.simulate``: independent
agents, unreachable target, episode cap): env steps taken by all lanes over its wall time.
SB3 runs the rl-zoo CartPole settings for a fixed number of steps.
"""
from __future__ import annotations

import argparse
import time

import pandas as pd

from benchmarks.common import sb3_steps_per_second, set_threads
from frd.rl_runner import RLConfig, simulate


def population_steps_per_second(lanes: int, episodes: int, threads: int) -> float:
    config = RLConfig(agents=2, seeds=lanes // 2, max_episodes=episodes, target=float("inf"), threads=threads)
    steps = []
    start = time.perf_counter()
    simulate(config, "independent", list(range(lanes // 2)),
             lambda tables: steps.append(tables["runs"]["mission_env_steps"].iloc[0]))
    return sum(steps) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lanes", type=int, nargs="+", default=[8, 64, 256])
    parser.add_argument("--episodes", type=int, default=100, help="episode cap per lane")
    parser.add_argument("--sb3-steps", type=int, default=40_000)
    parser.add_argument("--threads", type=int, default=1, help="torch threads for both")
    parser.add_argument("--csv", help="also write the table here")
    args = parser.parse_args()
    set_threads(args.threads)
    sb3 = sb3_steps_per_second(args.sb3_steps)
    rows = [{"runner": "SB3 A2C (8 envs)", "lanes": 8, "env_steps_per_s": sb3, "ratio_vs_sb3": 1.0}]
    for lanes in args.lanes:
        rate = population_steps_per_second(lanes, args.episodes, args.threads)
        rows.append({"runner": "frd population", "lanes": lanes, "env_steps_per_s": rate, "ratio_vs_sb3": rate / sb3})
    table = pd.DataFrame(rows)
    print(table.to_string(index=False, float_format=lambda x: f"{x:,.1f}"))
    if args.csv:
        table.to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()

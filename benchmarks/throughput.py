"""Training throughput of the A2C population vs Stable-Baselines3 A2C, in one process.

    python benchmarks/throughput.py [--lanes 8 64 256] [--episodes 100] [--sb3-steps 40000]

Each population figure is the real training loop (``frd.rl_runner.simulate``: independent
agents, unreachable target, episode cap): env steps taken by all lanes per second. SB3 runs
the rl-zoo CartPole settings for a fixed number of steps. Both are reported per second of this
process's CPU time (fair while other jobs load the machine) and per wall second.
"""
from __future__ import annotations

import argparse

import pandas as pd

from benchmarks.common import Clock, sb3_steps, set_threads
from frd.rl_runner import RLConfig, simulate


def population_steps(lanes: int, episodes: int, threads: int) -> tuple[int, Clock]:
    config = RLConfig(agents=2, seeds=lanes // 2, max_episodes=episodes, target=float("inf"), threads=threads)
    steps = []
    with Clock() as clock:
        simulate(config, "independent", list(range(lanes // 2)),
                 lambda tables: steps.append(tables["runs"]["mission_env_steps"].iloc[0]))
    return sum(steps), clock


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lanes", type=int, nargs="+", default=[8, 64, 256])
    parser.add_argument("--episodes", type=int, default=100, help="episode cap per lane")
    parser.add_argument("--sb3-steps", type=int, default=40_000)
    parser.add_argument("--threads", type=int, default=1, help="torch threads for both")
    parser.add_argument("--csv", help="also write the table here")
    args = parser.parse_args()
    set_threads(args.threads)
    sb3 = sb3_steps(args.sb3_steps)
    rows = [("SB3 A2C (8 envs)", 8, args.sb3_steps, sb3)]
    for lanes in args.lanes:
        rows.append(("frd population", lanes, *population_steps(lanes, args.episodes, args.threads)))
    table = pd.DataFrame([{
        "runner": runner, "lanes": lanes,
        "steps_per_cpu_s": steps / clock.cpu, "ratio_cpu": (steps / clock.cpu) / (args.sb3_steps / sb3.cpu),
        "steps_per_wall_s": steps / clock.wall, "ratio_wall": (steps / clock.wall) / (args.sb3_steps / sb3.wall),
    } for runner, lanes, steps, clock in rows])
    print(table.to_string(index=False, float_format=lambda x: f"{x:,.1f}"))
    if args.csv:
        table.to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()

"""Wall seconds to the mission: the batched population vs Stable-Baselines3 A2C, one process.

    python benchmarks/mission_time.py [--seeds 20] [--sb3-cap 300000]

Ours: ``seeds`` runs × 2 independent agents, all lanes in one batch, until each run's mission
(SPEC §1) or the 2000-episode cap. SB3: the same number of agent-seeds (2 × seeds), run one
after another with the rl-zoo CartPole settings, each until the same 490 rule on its own
episodes or ``sb3-cap`` env steps.
"""
from __future__ import annotations

import argparse
import time

import pandas as pd

from benchmarks.common import MissionCallback, sb3_a2c, set_threads
from frd.rl_runner import RLConfig, simulate
from frd.summary import quartiles


def ours(seeds: int, threads: int) -> tuple[float, pd.DataFrame]:
    runs = []
    start = time.perf_counter()
    simulate(RLConfig(agents=2, seeds=seeds, threads=threads), "independent", list(range(seeds)),
             lambda tables: runs.append(tables["runs"]))
    return time.perf_counter() - start, pd.concat(runs, ignore_index=True)


def sb3(agent_seeds: int, cap: int) -> tuple[float, pd.DataFrame]:
    rows = []
    start = time.perf_counter()
    for seed in range(agent_seeds):
        callback = MissionCallback()
        model = sb3_a2c(seed)
        model.learn(total_timesteps=cap, callback=callback)
        rows.append({"seed": seed, "completed": callback.completed, "episodes": callback.episodes,
                     "env_steps": model.num_timesteps})
    return time.perf_counter() - start, pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=20, help="runs of 2 agents (SB3 gets 2 × seeds)")
    parser.add_argument("--sb3-cap", type=int, default=300_000, help="env steps cap per SB3 agent")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--csv", help="also write the table here")
    args = parser.parse_args()
    set_threads(args.threads)
    our_s, our_runs = ours(args.seeds, args.threads)
    sb3_s, sb3_runs = sb3(2 * args.seeds, args.sb3_cap)
    table = pd.DataFrame([
        {"runner": f"frd, {args.seeds} runs × 2 agents batched", "wall_s": our_s,
         "completed": our_runs["completed"].mean(), "env_steps": quartiles(our_runs["mission_env_steps"])},
        {"runner": f"SB3 A2C, {2 * args.seeds} agents in sequence", "wall_s": sb3_s,
         "completed": sb3_runs["completed"].mean(), "env_steps": quartiles(sb3_runs["env_steps"])},
    ])
    print(table.to_string(index=False))
    print(f"\nwall-clock ratio SB3 / frd: {sb3_s / our_s:.1f}×")
    if args.csv:
        table.assign(ratio=sb3_s / our_s).to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()

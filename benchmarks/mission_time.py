"""Wall seconds to the mission: the batched population vs Stable-Baselines3 A2C, one process.

    python benchmarks/mission_time.py [--seeds 20] [--sb3-cap 300000]

Ours: ``seeds`` runs × 2 independent agents, all lanes in one batch, until each run's mission
[Seo et al. 2022, §4] or the 2000-episode cap. SB3: the same number of agent-seeds (2 × seeds), run one
after another with the rl-zoo CartPole settings, each until the same 490 rule on its own
episodes or ``sb3-cap`` env steps.
"""
from __future__ import annotations

import argparse

import pandas as pd

from benchmarks.common import Clock, MissionCallback, sb3_a2c, set_threads
from frd.rl.config import RLConfig
from frd.rl.runner import simulate
from frd.stats import quartiles


def ours(seeds: int, threads: int) -> tuple[Clock, pd.DataFrame]:
    runs = []
    with Clock() as clock:
        simulate(RLConfig(agents=2, seeds=seeds, threads=threads), [("independent", s) for s in range(seeds)],
                 lambda tables: runs.append(tables["runs"]))
    return clock, pd.concat(runs, ignore_index=True)


def sb3(agent_seeds: int, cap: int) -> tuple[Clock, pd.DataFrame]:
    rows = []
    with Clock() as clock:
        for seed in range(agent_seeds):
            callback = MissionCallback()
            model = sb3_a2c(seed)
            model.learn(total_timesteps=cap, callback=callback)
            rows.append({"seed": seed, "completed": callback.completed, "episodes": callback.episodes,
                         "env_steps": model.num_timesteps})
    return clock, pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=20, help="runs of 2 agents (SB3 gets 2 × seeds)")
    parser.add_argument("--sb3-cap", type=int, default=300_000, help="env steps cap per SB3 agent")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--csv", help="also write the table here")
    args = parser.parse_args()
    set_threads(args.threads)
    our, our_runs = ours(args.seeds, args.threads)
    ref, sb3_runs = sb3(2 * args.seeds, args.sb3_cap)
    table = pd.DataFrame([
        {"runner": f"frd, {args.seeds} runs × 2 agents batched", "cpu_s": our.cpu, "wall_s": our.wall,
         "completed": our_runs["completed"].mean(), "episodes": quartiles(our_runs["mission_episodes"]),
         "env_steps (all agents of a run)": quartiles(our_runs["mission_env_steps"])},
        {"runner": f"SB3 A2C, {2 * args.seeds} agents in sequence", "cpu_s": ref.cpu, "wall_s": ref.wall,
         "completed": sb3_runs["completed"].mean(), "episodes": quartiles(sb3_runs["episodes"]),
         "env_steps (all agents of a run)": quartiles(sb3_runs["env_steps"])},
    ])
    print(table.to_string(index=False))
    print(f"\nratio SB3 / frd: {ref.cpu / our.cpu:.1f}× in CPU seconds, {ref.wall / our.wall:.1f}× in wall seconds")
    if args.csv:
        table.assign(ratio_cpu=ref.cpu / our.cpu, ratio_wall=ref.wall / our.wall).to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()

"""End-to-end mission time through the CLI vs Stable-Baselines3 A2C reaching the same rule.

    python -m benchmarks.mission_cli [--seeds 16] [--sb3-agents 32] [--sb3-cap 300000] [--csv FILE --variant NAME]

Ours: ``frd rl --agents 2 --seeds N`` as a child process, timed as a whole (interpreter start,
imports, numba cache load, every run to its mission or cap, writing the tables and plots), in
wall seconds and the child's CPU seconds. SB3: A2C with the rl-zoo CartPole settings, one
agent-seed after another in this process, each until the mean of its latest 10 episodes
reaches 490 [Seo et al. 2022, §4] or ``--sb3-cap`` env steps. ``frd`` needs N runs × 2 agents = 2N agent
missions; when ``--sb3-agents`` is below 2N the SB3 total is extrapolated from its mean
per agent (said so in the table). ``--csv`` appends the table to a tidy CSV
(``benchmarks/results/mission_cli.csv``) tagged with the commit, ``--variant`` and a repeat number.
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from benchmarks.common import set_threads
from benchmarks.mission_time import sb3
from benchmarks.tidy import record
from frd.stats import quartiles


def ours_cli(seeds: int, out: Path) -> tuple[float, float, pd.DataFrame]:
    """Wall and CPU seconds of the whole ``frd rl`` process, and its runs table."""
    command = [sys.executable, "-m", "frd", "rl", "--agents", "2", "--seeds", str(seeds), "--out", str(out),
               "--no-progress"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, pd.read_csv(out / "runs.csv")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=16, help="frd runs of 2 agents")
    parser.add_argument("--sb3-agents", type=int, help="SB3 agent-seeds to run (default 2 × seeds)")
    parser.add_argument("--sb3-cap", type=int, default=300_000, help="env steps cap per SB3 agent")
    parser.add_argument("--csv", help="also append the table to this tidy CSV, e.g. benchmarks/results/mission_cli.csv")
    parser.add_argument("--variant", default="adhoc", help="the variant name its rows are tagged with")
    args = parser.parse_args()
    set_threads(1)
    needed = 2 * args.seeds
    sb3_agents = args.sb3_agents or needed
    with tempfile.TemporaryDirectory() as tmp:
        wall, cpu, runs = ours_cli(args.seeds, Path(tmp) / "out")
    ref, sb3_runs = sb3(sb3_agents, args.sb3_cap)
    scale = needed / sb3_agents
    sb3_label = (f"SB3 A2C, {needed} agents one after another" if scale == 1 else
                 f"SB3 A2C, {sb3_agents} agents run, ×{scale:.2f} for {needed}")
    table = pd.DataFrame([
        {"runner": f"frd rl --agents 2 --seeds {args.seeds} (whole process)", "cpu_s": cpu, "wall_s": wall,
         "completed": runs["completed"].mean(), "episodes": quartiles(runs["mission_episodes"])},
        {"runner": sb3_label, "cpu_s": ref.cpu * scale, "wall_s": ref.wall * scale,
         "completed": sb3_runs["completed"].mean(), "episodes": quartiles(sb3_runs["episodes"])},
    ])
    print(table.to_string(index=False, float_format=lambda x: f"{x:,.1f}"))
    print(f"\nratio SB3 / frd: {ref.cpu * scale / cpu:.1f}× in CPU seconds, {ref.wall * scale / wall:.1f}× in wall seconds")
    if args.csv:
        record(table.assign(ratio_cpu=ref.cpu * scale / cpu, ratio_wall=ref.wall * scale / wall), args.csv, args.variant)


if __name__ == "__main__":
    main()

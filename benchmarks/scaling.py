"""Cost curves (issue 44 §4), RL part: seconds per agent-episode and peak memory of one run against
its agents per run (2 … 256) for each method, against FRD's grid S (5 … 50 on CartPole's 4
dimensions) and against the hidden width h (16 … 256).

    python -m benchmarks.scaling rl [--axes agents grid hidden] [--episodes 15] [--period 5]
                                    [--csv benchmarks/results/scaling_rl.csv --variant NAME]

Each point is one run (seed 0) in a fresh process, so that its peak resident memory (``VmHWM``) is
its own. Every agent plays exactly ``--episodes`` episodes (target inf, until all: no mission, so the
same work at every point, not a learning curve) with a round every ``--period`` episodes. The child
loads the numba kernels before its clock starts and reports the run's process CPU seconds (fair
while other jobs share the machine) and wall seconds, its env steps, the resident memory before the
run (interpreter, torch, kernels) and the peak. Seconds per agent-episode = CPU seconds ÷ (agents ×
episodes); µs per env step is also reported, since an episode's length changes with the policy.
``--csv`` appends the table to a tidy CSV (``benchmarks.tidy``).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from benchmarks.tidy import record

METHODS = ("independent", "frl", "pd", "frd")
AGENTS = (2, 8, 32, 128, 256)
GRIDS = (5, 10, 20, 30, 50)
WIDTHS = (16, 32, 64, 128, 256)
AXIS_AGENTS = 8
"""Agents per run on the S and h axes [our choice: the seed study's largest count]."""


def _status_kib(field: str) -> int:
    """A ``/proc/self/status`` memory line (``VmRSS``, ``VmHWM``) in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def one_point(method: str, agents: int, grid: int, hidden: int, episodes: int, period: int) -> dict:
    """Run one point in this process (the child's side): its timings, steps and memory."""
    import numpy as np

    from frd.agents import kernel
    from frd.rl.config import rl_config
    from frd.rl.runner import iter_simulate

    kernel.warm_up()
    options = {"grid": grid} if method in ("frd", "mixfrd") else {}

    def config(n: int, cap: int):
        return rl_config(method, agents=n, hidden=hidden, max_episodes=cap, period=period, target=float("inf"),
                         until="all", **options)
    list(iter_simulate(config(2, 2 * period), [(method, 1)]))  # the fused period, a round and the rule loaded
    rss_before = _status_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # the peak so far (the warm-up's) is forgotten
    wall, cpu = time.perf_counter(), time.process_time()
    tables = list(iter_simulate(config(agents, episodes), [(method, 0)]))[0]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    runs = tables["runs"].iloc[0]
    assert (tables["episodes"].groupby("agent").size() == episodes).all(), "every agent plays every episode"
    return dict(method=method, agents=agents, grid=grid if options else np.nan, hidden=hidden, episodes=episodes,
                period=period, rounds=int(runs["rounds"]), env_steps=int(runs["mission_env_steps"]),
                bits_up=int(runs["bits_up"]), cpu_s=cpu, wall_s=wall,
                s_per_agent_episode=cpu / (agents * episodes), us_per_env_step=cpu / runs["mission_env_steps"] * 1e6,
                rss_before_mib=rss_before / 1024, peak_rss_mib=_status_kib("VmHWM") / 1024)


def points(axes: list[str]) -> list[dict]:
    """The (method, agents, grid, hidden) of every point on ``axes``."""
    out = []
    if "agents" in axes:
        out += [dict(method=m, agents=n, grid=30, hidden=64) for m in METHODS for n in AGENTS]
    if "grid" in axes:
        out += [dict(method="frd", agents=AXIS_AGENTS, grid=s, hidden=64) for s in GRIDS]
    if "hidden" in axes:
        out += [dict(method=m, agents=AXIS_AGENTS, grid=30, hidden=h) for m in METHODS for h in WIDTHS]
    return out


def measure(point: dict, episodes: int, period: int) -> dict:
    """``one_point`` in a fresh process."""
    args = [sys.executable, "-m", "benchmarks.scaling", "point", "--method", point["method"],
            "--agents", str(point["agents"]), "--grid", str(point["grid"]), "--hidden", str(point["hidden"]),
            "--episodes", str(episodes), "--period", str(period)]
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="part", required=True)
    rl = sub.add_parser("rl", help="the RL cost curves")
    rl.add_argument("--axes", nargs="+", choices=("agents", "grid", "hidden"), default=["agents", "grid", "hidden"])
    rl.add_argument("--episodes", type=int, default=15, help="episodes per agent at every point")
    rl.add_argument("--period", type=int, default=5, help="episodes between rounds")
    rl.add_argument("--csv", help="also append the table to this tidy CSV, e.g. benchmarks/results/scaling_rl.csv")
    rl.add_argument("--variant", default="adhoc", help="the variant name its rows are tagged with")
    point = sub.add_parser("point", help="one point in this process (what rl runs in each child)")
    point.add_argument("--method", required=True)
    for name in ("agents", "grid", "hidden", "episodes", "period"):
        point.add_argument(f"--{name}", type=int, required=True)
    args = parser.parse_args()
    if args.part == "point":
        print(json.dumps(one_point(args.method, args.agents, args.grid, args.hidden, args.episodes, args.period)))
        return
    rows = []
    for p in points(args.axes):
        rows.append(measure(p, args.episodes, args.period))
        r = rows[-1]
        print(f"{r['method']:>11} agents {r['agents']:>3} S {p['grid']:>2} h {r['hidden']:>3}: "
              f"{r['s_per_agent_episode'] * 1e3:8.2f} ms/agent-episode, {r['us_per_env_step']:6.1f} µs/step, "
              f"peak {r['peak_rss_mib']:7.1f} MiB (before {r['rss_before_mib']:.0f})", flush=True)
    table = pd.DataFrame(rows)
    if args.csv:
        record(table, args.csv, args.variant)


if __name__ == "__main__":
    main()

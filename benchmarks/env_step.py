"""Cost of one lane-step of Acrobot-v1: all lanes at once (``AcrobotLanes``) against one
gymnasium instance per lane (``GenericLanes``, what every other env uses), in one process.

    python -m benchmarks.env_step [--lanes 8 64 256] [--steps 500] [--csv FILE]

Both step the same lanes with the same random actions (every lane active) and produce the same
trajectories bit for bit (``tests/test_lanes.py``); reported per lane-step in µs of this
process's CPU time (after one warm-up step), and the ratio.
"""
from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from benchmarks.common import Clock
from frd.envs.acrobot import ACROBOT, AcrobotLanes
from frd.envs.lanes import GenericLanes
from frd.envs.step import Lanes


def us_per_lane_step(lanes: Lanes, count: int, steps: int) -> float:
    rng = np.random.default_rng(0)
    active = np.ones(count, bool)
    lanes.reset()
    lanes.step(rng.integers(0, lanes.n_actions, count), active)  # numba's first call loads its kernel
    with Clock() as clock:
        for _ in range(steps):
            lanes.step(rng.integers(0, lanes.n_actions, count), active)
    return clock.cpu / (steps * count) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lanes", nargs="+", type=int, default=[8, 64, 256])
    parser.add_argument("--steps", type=int, default=500, help="steps of every lane per measurement")
    parser.add_argument("--csv", default=None, help="also write the rows here")
    args = parser.parse_args()
    rows = []
    for count in args.lanes:
        seeds = list(range(count))
        per_instance = us_per_lane_step(GenericLanes(ACROBOT, seeds), count, args.steps)
        at_once = us_per_lane_step(AcrobotLanes(seeds), count, args.steps)
        rows.append(dict(env=ACROBOT, lanes=count, instance_per_lane_us=round(per_instance, 2),
                         all_lanes_at_once_us=round(at_once, 2), speedup=round(per_instance / at_once, 1)))
    table = pd.DataFrame(rows)
    print(table.to_string(index=False))
    if args.csv:
        table.to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()

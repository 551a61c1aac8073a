"""A remote RL agent's work over a run: kept alive between messages vs replayed from the seed.

    python -m benchmarks.remote_replay [--method frl] [--agents 2] [--episodes 500] [--seed 0]

One run of ``--method`` (rounds every 25 episodes, every agent to the episode cap: a mission it
cannot reach keeps the work the same for both) with its agents answering in this process as
Flower nodes do (``frd.rl.remote.LocalAgents``): once with every agent replayed from its seed for
every message (a node process that has not kept it), once with each agent kept alive between
messages (a warm runner or a simulation actor). Reports CPU seconds of each and of the same run
in process, and checks that the three give the same episodes, ledger and rounds.
"""
from __future__ import annotations

import argparse
import time
from typing import Callable

import pandas as pd

import frd.rl.remote as remote
from frd.rl.config import rl_config
from frd.rl.runner import iter_simulate

TABLES = ("episodes", "ledger", "rounds")


def cpu_seconds(work: Callable[[], dict[str, pd.DataFrame]]) -> tuple[float, dict[str, pd.DataFrame]]:
    started = time.process_time()
    tables = work()
    return time.process_time() - started, tables


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", default="frl")
    parser.add_argument("--agents", type=int, default=2)
    parser.add_argument("--episodes", type=int, default=500, help="the episode cap every agent plays to")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    config = rl_config(args.method, agents=args.agents, max_episodes=args.episodes, target=float("inf"))
    rows, reference = [], None
    for label, kept in (("in process", None), ("replayed every message", 0), ("kept alive", 64)):
        if kept is None:
            seconds, tables = cpu_seconds(lambda: next(iter_simulate(config, [(args.method, args.seed)])))
            reference = tables
        else:
            remote.LIVE = remote.LiveAgents(size=kept)
            seconds, tables = cpu_seconds(
                lambda: remote.run_remote(config, args.method, args.seed, remote.LocalAgents(config)))
            assert reference is not None
            for table in TABLES:
                pd.testing.assert_frame_equal(tables[table], reference[table], check_exact=True)
        rows.append(dict(way=label, cpu_s=seconds, rounds=int(tables["runs"]["rounds"].iloc[0])))
        print(f"{label}: {seconds:.1f} CPU s", flush=True)
    table = pd.DataFrame(rows)
    print(f"\n{args.method}, {args.agents} agents, {args.episodes} episodes each, seed {args.seed}; "
          "tables identical in all three\n")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    return table


if __name__ == "__main__":
    main()

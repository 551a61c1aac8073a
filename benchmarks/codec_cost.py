"""What a codec costs per round: FRL's rounds with ``--codec-up C`` against fp32, in one process.

    python -m benchmarks.codec_cost [--codecs fp32 fp16 q8 topk:0.01+q8] [--runs 32] [--episodes 200]
                                    [--repeats 3] [--csv FILE]

Each codec trains the same batch of FRL runs (2 agents each, the default 64-unit networks, a
round every 25 episodes, ``RLBatch`` as ``frd rl`` runs it) to the same episode cap; the runner's ``exchange`` (one
round of one run: upload, encode, aggregate, download, decode) is timed on the instance. Per
codec: CPU seconds per round and env steps per CPU second, each as a ratio to fp32 in the same
repeat, medians over repeats (the codecs take turns within a repeat, so load drifts hit all alike).
"""
from __future__ import annotations

import argparse
from typing import Any

import pandas as pd

from benchmarks.common import Clock, set_threads
from benchmarks.throughput import PhaseTimes
from benchmarks.tidy import record
from frd.agents import kernel
from frd.rl.config import RLConfig
from frd.rl.runner import RLBatch


def frl_steps(codec: str, runs: int, episodes: int) -> dict[str, Any]:
    """One batch of ``runs`` FRL runs under ``codec`` (uplink; error feedback for top-k) to ``episodes``."""
    config = RLConfig(methods=("frl",), agents=2, seeds=runs, max_episodes=episodes, target=float("inf"),
                      codec_up=codec, error_feedback=codec.startswith("topk"))
    batch = RLBatch(config, [("frl", seed) for seed in range(runs)])
    phases, rounds = PhaseTimes(), [0]
    exchange = batch.exchange

    def counted(*args):
        rounds[0] += 1
        return exchange(*args)

    batch.exchange = counted  # type: ignore[method-assign]
    phases.wrap(batch, "exchange", "rounds")
    with Clock() as clock:
        batch.reset()
        for _ in batch.proceed():
            pass
    return {"codec": codec, "rounds": rounds[0], "round_ms": 1e3 * phases.seconds["rounds"] / max(rounds[0], 1),
            "round_share": phases.seconds["rounds"] / clock.wall, "steps_per_cpu_s": int(batch.env_steps.sum()) / clock.cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--codecs", nargs="+", default=["fp32", "fp16", "q8", "topk:0.01+q8"])
    parser.add_argument("--runs", type=int, default=32)
    parser.add_argument("--episodes", type=int, default=200, help="episodes per agent (a round every 25)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--csv", help="also append the rows to this tidy CSV, e.g. benchmarks/results/codec_cost.csv")
    args = parser.parse_args()
    set_threads(1)
    kernel.warm_up()
    frl_steps("topk:0.01+q8", 2, 50)  # every kernel and codec path loaded before a clock starts
    rows = []
    for repeat in range(args.repeats):
        for codec in args.codecs:
            rows.append({"repeat": repeat, **frl_steps(codec, args.runs, args.episodes)})
            print(rows[-1], flush=True)
    frame = pd.DataFrame(rows)
    base = frame[frame.codec == "fp32"].set_index("repeat")
    frame["round_ratio"] = frame["round_ms"] / frame["repeat"].map(base["round_ms"])
    frame["throughput_ratio"] = frame["steps_per_cpu_s"] / frame["repeat"].map(base["steps_per_cpu_s"])
    table = frame.groupby("codec", sort=False)[["rounds", "round_ms", "round_share", "steps_per_cpu_s",
                                                  "round_ratio", "throughput_ratio"]].median().reset_index()
    print(table.to_string(index=False, float_format=lambda x: f"{x:,.3f}"))
    if args.csv:
        record(frame, args.csv, "codecs")


if __name__ == "__main__":
    main()

"""What one PD/FRD distillation minibatch costs as the batch of lanes around it grows.

    python -m benchmarks.rl_distill [--lanes 8 160 320 800] [--rows 8] [--memory 8000]

A population of ``--lanes`` default A2C lanes (CartPole sizes) distils ``--rows`` of them (one
run's 8 agents) towards a random memory of ``--memory`` states, one epoch of 64-state
minibatches, one torch thread; reports milliseconds per minibatch (wall, median of 3) and the
cross-entropy diagnostic that ``rounds.csv`` logs before and after each distillation. Run it at
two commits to compare them.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from frd.agents.a2c import A2CPopulation, recipe


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lanes", nargs="+", type=int, default=[8, 160, 320, 800])
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--memory", type=int, default=8000)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    states = rng.normal(size=(args.memory, 4)).astype(np.float32)
    target = rng.dirichlet([1, 1], size=args.memory).astype(np.float32)
    rows = list(range(args.rows))
    print("| lanes | ms per minibatch | ms per cross-entropy |\n|---|---|---|")
    for lanes in args.lanes:
        pop = A2CPopulation(list(range(lanes)), 4, 2, recipe("nstep"))
        per_step, per_loss = [], []
        for repeat in range(3):
            started = time.perf_counter()
            steps = pop.distill(rows, states, target, np.random.default_rng(repeat), epochs=1, batch=64, lr=1e-4)
            per_step.append((time.perf_counter() - started) / steps)
            started = time.perf_counter()
            pop.cross_entropy(rows, states, target)
            per_loss.append(time.perf_counter() - started)
        print(f"| {lanes} | {1e3 * statistics.median(per_step):.2f} | {1e3 * statistics.median(per_loss):.1f} |",
              flush=True)


if __name__ == "__main__":
    main()

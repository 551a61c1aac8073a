"""Both cores for one experiment: a whole CLI command with ``--workers 1`` (one batch in one
process) against ``--workers N``, in wall and CPU seconds, and the check that their tables agree.

    python -m benchmarks.workers [--workers 2] [--repeats 3] [--workloads rl-mission cls-digits]
                                 [--csv FILE --variant NAME]

Each workload is run as a child process, timed as a whole (start-up, imports, workers' spawn,
every run, tables and figures), the variants taking turns within a repeat so that load drifts hit
both alike; medians over repeats. The tables of every variant must equal those of ``--workers 1``
(all but ``compute_s``, this machine's time), or the benchmark fails.
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import pandas as pd

from benchmarks.common import frd_child
from benchmarks.tidy import record

WORKLOADS = {
    "rl-mission": ["compare", "--methods", "frd,pd,frl,independent", "--agents", "2", "--seeds", "20"],
    "cls-digits": ["cls", "--method", "fl,fd", "--dataset", "digits", "--seeds", "4"],
}
"""The README's mission experiment (recipe 1, 2 agents), and two classification methods on digits."""
TABLES = ("runs", "ledger", "rounds", "episodes")


def tables(out: Path) -> dict[str, pd.DataFrame]:
    return {t: pd.read_csv(out / f"{t}.csv").drop(columns="compute_s", errors="ignore")
            for t in TABLES if (out / f"{t}.csv").exists()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument("--csv", help="also append the rows to this tidy CSV, e.g. benchmarks/results/workers.csv")
    parser.add_argument("--variant", default="adhoc", help="the variant name its rows are tagged with")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for workload in args.workloads:
                reference = None
                for workers in (1, args.workers):
                    out = Path(tmp) / f"{workload}-{workers}-{repeat}"
                    wall, cpu = frd_child([*WORKLOADS[workload], "--workers", str(workers), "--out", str(out),
                                           "--no-progress"])
                    got = tables(out)
                    reference = reference or got
                    for name, frame in reference.items():
                        pd.testing.assert_frame_equal(frame, got[name], obj=f"{workload} {name}")
                    rows.append(dict(workload=workload, workers=workers, repeat=repeat, wall_s=wall, cpu_s=cpu))
                    print(rows[-1], flush=True)
    frame = pd.DataFrame(rows)
    medians = frame.groupby(["workload", "workers"])[["wall_s", "cpu_s"]].median()
    one = medians.xs(1, level="workers")["wall_s"]
    medians["speed-up"] = [one[w] / medians.loc[(w, n), "wall_s"] for w, n in medians.index]
    print(medians.round(2).to_string())
    if args.csv:
        record(frame, Path(args.csv), args.variant)


if __name__ == "__main__":
    main()

"""Wall time of one sweep on the Ray backend vs the local one, as a user would run it.

    python -m benchmarks.ray_speed [--repeats 1] [--groups N ...] [--csv FILE] [--variant NAME] [-- extra frd rl options]
    python -m benchmarks.ray_speed --variant balanced -- --target 1e9 --max-episodes 300

Runs ``frd rl --agents 2 --seeds 32`` (CartPole, defaults otherwise) as its own process, once
with ``--backend local`` and once per ``--groups`` value with ``--backend ray`` (Ray started by
frd and stopped after: start-up and shutdown included), alternating when repeated. Reports wall
seconds, the speed-up over local, the 1-minute load average before each run (the machines are
shared), how many runs' episodes match the local run's exactly, and the slowest run (its
mission episodes and its share of compute): a sweep can finish no sooner than its slowest run,
which runs alone at the end on either backend. The second command gives every run the same
work (no mission, a fixed episode cap), which shows what the backend itself gains. The table is
appended to the tidy ``--csv`` tagged with the commit and ``--variant`` (``benchmarks.tidy``).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from benchmarks.tidy import record

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ["rl", "--agents", "2", "--seeds", "32", "--no-progress"]


def timed_sweep(out: Path, extra: list[str], backend: list[str]) -> float:
    command = [sys.executable, "-m", "frd", *SWEEP, *extra, *backend, "--out", str(out)]
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def matching_runs(a: Path, b: Path) -> int:
    """Runs whose episodes table is identical in both folders."""
    ea, eb = (pd.read_csv(d / "episodes.csv") for d in (a, b))
    return sum(part.reset_index(drop=True).equals(eb[eb.run_id == rid].reset_index(drop=True))
               for rid, part in ea.groupby("run_id"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--groups", type=int, nargs="*", default=[0], help="ray groups to try (0: the default)")
    parser.add_argument("--csv", default="benchmarks/results/ray_speed.csv", help="the tidy CSV the table is appended to")
    parser.add_argument("--variant", default="adhoc", help="the variant name its rows are tagged with")
    parser.add_argument("--work", default=None, help="keep the sweeps' folders here (default: a temp dir)")
    parser.add_argument("extra", nargs=argparse.REMAINDER, help="more frd rl options after --")
    args = parser.parse_args()
    extra = [a for a in args.extra if a != "--"]
    variants: list[tuple[str, list[str]]] = [("local", [])]
    variants += [(f"ray groups={g or 'default'}", ["--backend", "ray"] + (["--groups", str(g)] if g else []))
                 for g in args.groups]
    rows = []
    with tempfile.TemporaryDirectory(prefix="frd-ray-speed-") as temp:
        work = args.work or temp
        for repeat in range(args.repeats):
            for name, backend in variants:
                out = Path(work) / f"{name.replace(' ', '_')}-{repeat}"
                shutil.rmtree(out, ignore_errors=True)  # a fresh sweep, never a resumed one
                load = os.getloadavg()[0]
                seconds = timed_sweep(out, extra, backend)
                same = matching_runs(Path(work) / f"local-{repeat}", out)
                runs = pd.read_csv(out / "runs.csv")
                slowest = runs.loc[runs["mission_episodes"].idxmax()]
                rows.append(dict(backend=name, repeat=repeat, wall_s=seconds, load_1min_before=load,
                                 cpus=os.cpu_count(), runs_identical_to_local=same,
                                 compute_s=runs["compute_s"].sum(), slowest_run=slowest["run_id"],
                                 slowest_episodes=slowest["mission_episodes"],
                                 slowest_compute_s=slowest["compute_s"]))
                print(f"{name:>20} repeat {repeat}: {seconds:6.1f} s  (load {load:.2f}, "
                      f"{same}/{len(runs)} runs identical to local)", flush=True)
    table = pd.DataFrame(rows)
    local = table[table.backend == "local"].set_index("repeat")["wall_s"]
    table["speedup_vs_local"] = local.reindex(table["repeat"]).to_numpy() / table["wall_s"]
    record(table, args.csv, args.variant)
    print(table.to_string(index=False))


if __name__ == "__main__":
    main()

"""Wall time per round of a method over a Flower deployment vs in process.

    python -m benchmarks.flower_overhead [--method fd|frl|...] [--participants 2] [--rounds 4] [-- extra flags]

Starts a SuperLink and one node (a SuperNode and its warm runner) per participant (device or agent) on free loopback ports
(as ``frd flower link`` / ``frd flower node`` would), runs ``frd flower run`` and ``frd cls`` (or,
for an RL method, ``frd rl``: one seed, rounds every 25 episodes, the cap just past the last
round) with the same flags, checks the ledgers agree, and reports: seconds per round of each
(from their ``frd`` command to the tables; the Flower side without starting the SuperLink and
nodes, which a deployment does once), the overhead per round, the mean seconds a transfer spent
outside the nodes' own work (transport.csv) and the 1-minute load average (the machines are
shared). Every process is stopped by its PID.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd

from frd.cli import main
from frd.flower.launch import start_deployment, stop
from frd.rl.methods import RL_METHODS

PERIOD = 25


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    if main(argv) != 0:
        raise SystemExit(f"frd {' '.join(argv)} failed")
    return time.perf_counter() - started


def run(method: str, participants: int, rounds: int, extra: list[str]) -> dict:
    rl = method in RL_METHODS
    scale = (["--agents", str(participants), "--seeds", "1", "--period", str(PERIOD), "--max-episodes",
              str(PERIOD * rounds + PERIOD // 5)] if rl else ["--devices", str(participants), "--rounds", str(rounds)])
    flags = ["--method", method, *scale, "--no-progress", *extra]
    with tempfile.TemporaryDirectory(prefix="frd-bench-") as tmp:
        tmp_path = Path(tmp)
        processes: list[subprocess.Popen] = []
        try:
            address = start_deployment(participants, tmp_path, processes)
            load = os.getloadavg()[0]
            flower_s = timed(["flower", "run", "--superlink", address, *flags, "--out", str(tmp_path / "flower")])
        finally:
            stop(*processes)
        local_s = timed(["rl" if rl else "cls", *flags, "--out", str(tmp_path / "local")])
        same = pd.read_csv(tmp_path / "flower" / "ledger.csv").equals(pd.read_csv(tmp_path / "local" / "ledger.csv"))
        transport = pd.read_csv(tmp_path / "flower" / "transport.csv")
        if rl:
            rounds = int(pd.read_csv(tmp_path / "local" / "runs.csv")["rounds"].iloc[0])
    return {"method": method, "participants": participants, "rounds": rounds, "load_1min": round(load, 1),
            "flower_s_per_round": flower_s / rounds, "in_process_s_per_round": local_s / rounds,
            "overhead_s_per_round": (flower_s - local_s) / rounds, "transfer_s_mean": transport["seconds"].mean(),
            "wire_bytes_per_round": transport["wire_bytes"].sum() / rounds, "ledger_identical": same}


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--method", default="fd")
    parser.add_argument("--participants", type=int, default=2, help="devices, or agents of an RL method")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("extra", nargs="*", help="more frd cls flags, after --")
    args = parser.parse_args()
    row = run(args.method, args.participants, args.rounds, args.extra)
    print(pd.Series(row).to_string())


if __name__ == "__main__":
    cli()

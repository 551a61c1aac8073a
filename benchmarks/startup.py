"""Fixed costs: how long ``frd`` takes before and around a tiny run, per command, and what its
imports cost.

    python -m benchmarks.startup [--repeats 5] [--csv FILE --variant NAME]

Each command runs as a child process, timed whole (wall seconds), medians of ``--repeats``, the
commands taking turns within a repeat. It also prints what the heavy packages cost to import in one
tiny ``frd rl`` (``python -X importtime``, cumulative).
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from benchmarks.common import frd_child
from benchmarks.tidy import record

TINY_RL = ["rl", "--method", "frd", "--agents", "2", "--seeds", "1", "--hidden", "8", "--max-episodes", "4",
           "--period", "2"]
TINY_CLS = ["cls", "--method", "fl", "--dataset", "digits", "--devices", "3", "--rounds", "1", "--iterations", "2",
            "--seeds", "1"]
COMMANDS = {
    "frd --help": (["--help"], False),
    "frd rl, a bad flag": (["rl", "--seed", "1"], False),
    "frd rl, tiny run": (TINY_RL, True),
    "frd cls, tiny run (digits)": (TINY_CLS, True),
}
"""Name → (arguments, whether it writes a folder)."""


HEAVY = ("torch", "numba", "matplotlib", "pandas", "sklearn", "scipy", "gymnasium", "stable_baselines3", "ray", "flwr")
"""Packages whose import is measured (cumulative, where first imported)."""


def imports(out: Path) -> pd.DataFrame:
    """The seconds each of ``HEAVY`` takes to import in a tiny ``frd rl`` (absent: not imported)."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "frd", *TINY_RL, "--out", str(out), "--no-progress"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    rows = re.findall(r"import time:\s+\d+ \|\s+(\d+) \| *(\S+)", done.stderr)
    seconds = {name: int(us) / 1e6 for us, name in rows if name in HEAVY}
    return pd.Series(seconds, name="import_s").sort_values(ascending=False).to_frame()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--csv", help="also append the rows to this tidy CSV, e.g. benchmarks/results/startup.csv")
    parser.add_argument("--variant", default="adhoc", help="the variant name its rows are tagged with")
    args = parser.parse_args()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for name, (command, writes) in COMMANDS.items():
                out = Path(tmp) / f"{len(rows)}" if writes else None
                flags = ["--out", str(out), "--no-progress"] if out else []
                rows.append(dict(command=name, repeat=repeat, wall_s=frd_child([*command, *flags])[0]))
        print(imports(Path(tmp) / "imports").round(2).to_string())
    frame = pd.DataFrame(rows)
    print(frame.groupby("command", sort=False)["wall_s"].median().round(2).to_string())
    if args.csv:
        record(frame, Path(args.csv), args.variant)


if __name__ == "__main__":
    main()

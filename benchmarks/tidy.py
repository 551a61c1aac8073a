"""One tidy CSV per kind of repeated measurement: each run of a benchmark appends its rows, tagged
with the commit of the code measured, a variant name and a repeat number, instead of writing a
file of its own per repeat [our choice]."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd


def head_commit() -> str:
    """The short hash of the checked-out commit, ``+`` appended when the work tree differs from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()
    return git("rev-parse", "--short", "HEAD") + ("+" if git("status", "--porcelain", "--untracked-files=no") else "")


def record(table: pd.DataFrame, path: Path | str, variant: str, commit: str | None = None) -> pd.DataFrame:
    """Append ``table`` to the tidy CSV at ``path`` with ``commit``, ``variant`` and, unless the table
    has its own, ``repeat`` (one more than the latest of that commit and variant) columns first."""
    path = Path(path)
    earlier = pd.read_csv(path) if path.exists() else pd.DataFrame(columns=["commit", "variant", "repeat"])
    commit = commit or head_commit()
    tags: dict[str, object] = {"commit": commit, "variant": variant}
    if "repeat" not in table.columns:
        same = earlier[(earlier["commit"] == commit) & (earlier["variant"] == variant)]["repeat"]
        tags["repeat"] = int(same.max()) + 1 if len(same) else 1
    tagged = pd.concat([pd.DataFrame({k: [v] * len(table) for k, v in tags.items()}, index=table.index), table], axis=1)
    path.parent.mkdir(parents=True, exist_ok=True)
    combined = tagged if earlier.empty else pd.concat([earlier, tagged], ignore_index=True)
    combined.to_csv(path, index=False)
    return combined


def select(path: Path | str, variants: list[str] | None = None) -> pd.DataFrame:
    """The rows of a tidy CSV, only those of ``variants`` when given (an unknown name is an error)."""
    table = pd.read_csv(path)
    if variants is None:
        return table
    unknown = sorted(set(variants) - set(table["variant"]))
    if unknown:
        raise SystemExit(f"{path} has no variant {', '.join(unknown)} (it has {', '.join(table['variant'].unique())})")
    return table[table["variant"].isin(variants)].reset_index(drop=True)

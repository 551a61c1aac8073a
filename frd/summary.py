"""Summaries people trust: completion rate, median and 25–75 % over seeds, and a bootstrap
confidence interval of the median (SPEC §1 reports median and quartiles, as the seed does).

Runs that hit the episode cap count at the cap: their mission time is a lower bound, and the
completion rate says how many there are.
"""
from __future__ import annotations

import numpy as np
import pandas as pd


def quartiles(values: pd.Series) -> str:
    v = values.dropna().to_numpy(float)
    if len(v) == 0:
        return "–"
    q25, q50, q75 = np.percentile(v, [25, 50, 75])
    return f"{_fmt(q50)} [{_fmt(q25)}–{_fmt(q75)}]"


def median_ci(values: pd.Series, level: float = 0.95, resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the median."""
    v = values.dropna().to_numpy(float)
    if len(v) < 2:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    medians = np.median(rng.choice(v, size=(resamples, len(v))), axis=1)
    return tuple(np.percentile(medians, [50 * (1 - level), 50 * (1 + level)]))


def _fmt(x: float) -> str:
    if not np.isfinite(x):
        return "–"
    if abs(x) >= 1e6:
        return f"{x:.3g}"
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def rl_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per method (and agent count) with the figures of SPEC §1."""
    rows = []
    for (method, agents), g in runs.groupby(["method", "n_agents"], sort=False):
        rounds = g["rounds"].replace(0, np.nan)
        lo, hi = median_ci(g["mission_episodes"])
        rows.append({
            "method": method, "agents": agents, "runs": len(g),
            "completed": f"{g['completed'].mean():.0%}",
            "mission episodes": quartiles(g["mission_episodes"]),
            "episodes 95% CI": f"{_fmt(lo)}–{_fmt(hi)}",
            "env steps": quartiles(g["mission_env_steps"]),
            "seconds": quartiles(g["wall_seconds"] + g["comm_seconds"]),
            "comm seconds": quartiles(g["comm_seconds"]),
            "rounds": quartiles(g["rounds"]),
            "bits up/agent/round": quartiles(g["bits_up"] / rounds / agents),
            "bits down/agent/round": quartiles(g["bits_down"] / rounds / agents),
            "bits up total": quartiles(g["bits_up"]),
            "bits down total": quartiles(g["bits_down"]),
        })
    return pd.DataFrame(rows)


def quartile_columns(frame: pd.DataFrame, by: list[str], column: str, name: str | None = None) -> pd.DataFrame:
    """Numeric 25 %, median and 75 % of ``column`` per group, for CSV summaries and plots."""
    name = name or column
    g = frame.groupby(by, sort=False)[column]
    return pd.DataFrame({f"{name}_q25": g.quantile(0.25), f"{name}_median": g.median(),
                         f"{name}_q75": g.quantile(0.75)}).reset_index()

"""Statistics over seeds that both domains report: median and 25–75 % (SPEC §1 reports median
and quartiles, as the seed does) and a bootstrap confidence interval of the median."""
from __future__ import annotations

import numpy as np
import pandas as pd


def quartiles(values: pd.Series) -> str:
    v = values.dropna().to_numpy(float)
    if len(v) == 0:
        return "–"
    q25, q50, q75 = np.percentile(v, [25, 50, 75])
    return f"{fmt(q50)} [{fmt(q25)}–{fmt(q75)}]"


def median_ci(values: pd.Series, level: float = 0.95, resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the median."""
    v = values.dropna().to_numpy(float)
    if len(v) < 2:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    medians = np.median(rng.choice(v, size=(resamples, len(v))), axis=1)
    return tuple(np.percentile(medians, [50 * (1 - level), 50 * (1 + level)]))


def fmt(x: float) -> str:
    if not np.isfinite(x):
        return "–"
    if abs(x) >= 1e6:
        return f"{x:.3g}"
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def quartile_columns(frame: pd.DataFrame, by: list[str], column: str, name: str | None = None) -> pd.DataFrame:
    """Numeric 25 %, median and 75 % of ``column`` per group, for CSV summaries and plots."""
    name = name or column
    g = frame.groupby(by, sort=False)[column]
    return pd.DataFrame({f"{name}_q25": g.quantile(0.25), f"{name}_median": g.median(),
                         f"{name}_q75": g.quantile(0.75)}).reset_index()

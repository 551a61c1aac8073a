"""Statistics over seeds that both domains report: median and 25–75 % (the FRD chapter reports median
and quartiles [Seo et al. 2022, §4]), a bootstrap interval of the median, and the interquartile mean
(IQM) and probability of improvement with stratified-bootstrap intervals (Agarwal et al. 2021,
"Deep RL at the edge of the statistical precipice"; computed here, since rliable does not import
with pandas 3)."""
from __future__ import annotations

from typing import Callable, Mapping

import numpy as np
import pandas as pd

CI95 = "95% CI"
"""How a printed table names a 95 % bootstrap interval (of a median, an IQM or a probability)."""
IQR = "IQR"
"""How a printed table names the 25–75 % range of the runs (the interquartile range), which is a
spread, not an interval of the statistic: one notation for each, so that no reader takes one for
the other [issue 61]."""


def bracketed(mid: float, lo: float, hi: float, show: Callable[[float], str] | None = None) -> str:
    """``mid [lo–hi]`` as every printed table shows a value and its interval or range (``show``:
    how a number is written, ``fmt`` by default); ``mid`` alone where there is no interval, – for none."""
    text = show or fmt
    if not np.isfinite(mid):
        return "–"
    return f"{text(mid)} [{text(lo)}–{text(hi)}]" if np.isfinite(lo) and np.isfinite(hi) else text(mid)


def nearest_rank_quartiles(values: pd.Series) -> tuple[float, float, float]:
    """q25, median and q75 as nearest ranks (numpy's ``inverted_cdf``): each one of the values,
    for counts such as a best round, which a median of two seeds would make 15.5 [our choice]."""
    v = values.dropna().to_numpy(float)
    if len(v) == 0:
        return (float("nan"),) * 3
    q25, q50, q75 = np.percentile(v, [25, 50, 75], method="inverted_cdf")
    return float(q25), float(q50), float(q75)


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


def iqm(values: np.ndarray) -> float:
    """Interquartile mean: the mean of the middle 50 % of the values, ⌊n/4⌋ cut from each end
    (Agarwal et al. 2021; scipy's ``trim_mean(x, 0.25)``)."""
    v = np.sort(np.asarray(values, float))
    cut = len(v) // 4
    return float(v[cut:len(v) - cut].mean()) if len(v) else float("nan")


def stratified_bootstrap(statistic, strata: list[np.ndarray], level: float = 0.95, resamples: int = 2000,
                         seed: int = 0) -> tuple[float, float]:
    """Percentile interval of ``statistic(list of resampled strata)``, each stratum (a task, or
    one method's runs) resampled with replacement on its own, as rliable does."""
    rng = np.random.default_rng(seed)
    draws = [statistic([s[rng.integers(len(s), size=len(s))] for s in strata]) for _ in range(resamples)]
    lo, hi = np.percentile(draws, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def iqm_ci(values: pd.Series, level: float = 0.95, resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """IQM and its 95 % stratified-bootstrap interval (one stratum: the runs of one cell)."""
    v = values.dropna().to_numpy(float)
    if len(v) < 2:
        return iqm(v), float("nan"), float("nan")
    lo, hi = stratified_bootstrap(lambda s: iqm(s[0]), [v], level, resamples, seed)
    return iqm(v), lo, hi


def probability_of_improvement(x: np.ndarray, y: np.ndarray, lower_is_better: bool = True) -> float:
    """P(X better than Y) over every pair of runs, ties counting a half (Agarwal et al. 2021)."""
    x, y = np.asarray(x, float)[:, None], np.asarray(y, float)[None, :]
    wins = (x < y) if lower_is_better else (x > y)
    return float((wins + 0.5 * (x == y)).mean())


def improvement_ci(x: pd.Series, y: pd.Series, level: float = 0.95, resamples: int = 2000,
                   seed: int = 0, lower_is_better: bool = True) -> tuple[float, float, float]:
    """P(X better than Y) (by default fewer is better) and its stratified-bootstrap interval (each
    method's runs resampled on their own)."""
    a, b = x.dropna().to_numpy(float), y.dropna().to_numpy(float)
    if not min(len(a), len(b)):
        return float("nan"), float("nan"), float("nan")
    p = probability_of_improvement(a, b, lower_is_better)
    if min(len(a), len(b)) < 2:
        return p, float("nan"), float("nan")
    lo, hi = stratified_bootstrap(lambda s: probability_of_improvement(s[0], s[1], lower_is_better), [a, b], level,
                                  resamples, seed)
    return p, lo, hi


def improvement_columns(mine: pd.DataFrame, theirs: pd.DataFrame, measures: Mapping[str, str],
                        lower_is_better: bool) -> dict[str, float]:
    """Per measure (a ``runs.csv`` column → the summary column it fills), P(a run of ``mine``
    better than one of ``theirs``) and its 95 % interval as ``name``, ``name_lo``, ``name_hi``
    (``improvement_ci``): one function for a summary's rows, a report's and its pairwise table,
    so that they agree. NaN where ``theirs`` has no runs."""
    columns = {}
    for measure, name in measures.items():
        p, lo, hi = improvement_ci(mine[measure], theirs[measure], lower_is_better=lower_is_better)
        columns.update({name: p, f"{name}_lo": lo, f"{name}_hi": hi})
    return columns


def paired_mean_ci(before: pd.Series, after: pd.Series, level: float = 0.95) -> tuple[float, float, float]:
    """Mean of ``after − before`` over paired runs (same seeds) and its Student-t interval: the
    question "did a change move a metric", each seed its own control."""
    from scipy import stats

    d = np.asarray(after, float) - np.asarray(before, float)
    if len(d) < 2:
        return float(d.mean()) if len(d) else float("nan"), float("nan"), float("nan")
    half = stats.t.ppf(0.5 + level / 2, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
    return float(d.mean()), float(d.mean() - half), float(d.mean() + half)

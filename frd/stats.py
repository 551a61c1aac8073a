"""Statistics over seeds that both domains report: median and 25–75 % (the FRD chapter reports median
and quartiles [Seo et al. 2022, §4]), a bootstrap interval of the median, and the interquartile mean
(IQM) and probability of improvement with stratified-bootstrap intervals (Agarwal et al. 2021,
"Deep RL at the edge of the statistical precipice"; computed here, since rliable does not import
with pandas 3). Every interval is rliable's: a percentile interval of ``RESAMPLES`` stratified
resamples, drawn in blocks and evaluated with numpy a block at a time, so that 50,000 cost about
what 2,000 did one at a time."""
from __future__ import annotations

from typing import Callable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd

RESAMPLES = 50_000
"""Bootstrap resamples of every interval: rliable's default (``get_interval_estimates(reps=50000)``,
google-research/rliable ``rliable/library.py``). At 2,000 an endpoint moved with the bootstrap seed
(a median's upper one between 352 and 376 episodes [issue 61]); at 50,000, over seeds 0–19 of one
CartPole cell of 20 runs a method, a median's endpoints held still, an IQM's moved by at most 1.8
episodes (15 at 2,000) and a P's by 0.0075 (0.030): an IQM's printed unit can still tick by one
(``tests/test_stats_rliable.py``)."""
BLOCK = 1 << 21
"""Resampled values drawn and evaluated at once (16 MiB of float64), so that memory stays bounded
for large strata [our choice]; the block structure is part of what a seed draws."""

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


def median_ci(values: pd.Series, level: float = 0.95, resamples: int = RESAMPLES,
              seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the median (rliable's method with the median as its
    statistic)."""
    v = values.dropna().to_numpy(float)
    if len(v) < 2:
        return (float("nan"), float("nan"))
    return stratified_bootstrap(lambda s: median_rows(s[0]), [v], level, resamples, seed, batched=True)


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


def median_rows(samples: np.ndarray) -> np.ndarray:
    """The median of each row of ``samples`` (one resample a row): the middle of the sorted row,
    or the mean of its two middle values, as ``np.median``."""
    s = np.sort(samples, axis=1)
    n = s.shape[1]
    return s[:, n // 2] if n % 2 else (s[:, n // 2 - 1] + s[:, n // 2]) / 2


def iqm_rows(samples: np.ndarray) -> np.ndarray:
    """The IQM of each row of ``samples`` (one resample a row), ⌊n/4⌋ cut from each end as ``iqm``."""
    s = np.sort(samples, axis=1)
    cut = s.shape[1] // 4
    return s[:, cut:s.shape[1] - cut].mean(axis=1)


def resample_blocks(sizes: Sequence[int], resamples: int = RESAMPLES, seed: int = 0) -> Iterator[list[np.ndarray]]:
    """The positions of a stratified bootstrap, a block of resamples at a time: per stratum of
    size n a (rows, n) array drawn with replacement, each row one resample, each stratum on its
    own (rliable's ``StratifiedIndependentBootstrap``; with one stratum its ``StratifiedBootstrap``
    over runs). The same seed draws the same positions."""
    rng = np.random.default_rng(seed)
    rows = max(1, BLOCK // max(1, sum(sizes)))
    for start in range(0, resamples, rows):
        yield [rng.integers(n, size=(min(rows, resamples - start), n)) for n in sizes]


def percentile_interval(draws: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The ``level`` percentile interval of bootstrap draws: their (1 − level)/2 and (1 + level)/2
    quantiles, numpy's linear interpolation (arch's ``conf_int(method='percentile')``, which
    rliable calls)."""
    lo, hi = np.percentile(draws, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def stratified_bootstrap(statistic: Callable, strata: list[np.ndarray], level: float = 0.95,
                         resamples: int = RESAMPLES, seed: int = 0, batched: bool = False) -> tuple[float, float]:
    """Percentile interval of ``statistic(list of resampled strata)``, each stratum (a task, or
    one method's runs) resampled with replacement on its own, as rliable does. ``batched``:
    ``statistic`` takes each stratum as a 2-D array, a resample per row, and gives one value per
    row (numpy over a block: what the intervals here use); else it takes one resample (a list of
    1-D strata) and is called once per resample, any statistic at a Python call each. Both see the
    same resamples for the same seed."""
    strata = [np.asarray(s, float) for s in strata]
    draws = []
    for block in resample_blocks([len(s) for s in strata], resamples, seed):
        samples = [s[i] for s, i in zip(strata, block)]
        if batched:
            draws.append(np.asarray(statistic(samples), float))
        else:
            draws.append(np.array([statistic([x[r] for x in samples]) for r in range(len(block[0]))], float))
    return percentile_interval(np.concatenate(draws), level)


def iqm_ci(values: pd.Series, level: float = 0.95, resamples: int = RESAMPLES,
           seed: int = 0) -> tuple[float, float, float]:
    """IQM and its 95 % stratified-bootstrap interval (one stratum: the runs of one cell)."""
    v = values.dropna().to_numpy(float)
    if len(v) < 2:
        return iqm(v), float("nan"), float("nan")
    lo, hi = stratified_bootstrap(lambda s: iqm_rows(s[0]), [v], level, resamples, seed, batched=True)
    return iqm(v), lo, hi


def _pair_scores(x: np.ndarray, y: np.ndarray, lower_is_better: bool) -> np.ndarray:
    """1 where run i of X beats run j of Y, ½ for a tie, 0 else: the terms of the Mann–Whitney U
    that rliable's ``probability_of_improvement`` divides by the pairs."""
    x, y = np.asarray(x, float)[:, None], np.asarray(y, float)[None, :]
    wins = (x < y) if lower_is_better else (x > y)
    return wins + 0.5 * (x == y)


def probability_of_improvement(x: np.ndarray, y: np.ndarray, lower_is_better: bool = True) -> float:
    """P(X better than Y) over every pair of runs, ties counting a half (Agarwal et al. 2021)."""
    return float(_pair_scores(x, y, lower_is_better).mean())


def _counts(positions: np.ndarray) -> np.ndarray:
    """How often each run is in each resample (rows of ``positions``), as floats."""
    rows, n = positions.shape
    flat = (positions + n * np.arange(rows)[:, None]).ravel()
    return np.bincount(flat, minlength=rows * n).reshape(rows, n).astype(float)


def improvement_rows(x: np.ndarray, y: np.ndarray, x_positions: np.ndarray, y_positions: np.ndarray,
                     lower_is_better: bool = True) -> np.ndarray:
    """P(X better than Y) of each resample, row r taking X's runs at ``x_positions[r]`` and Y's at
    ``y_positions[r]``: with each run's count c, P = cₓᵀ S c_y / (nₓ n_y) over the pair scores S,
    the pairwise mean without forming a resample's pairs (exact: the terms are halves)."""
    scores = _pair_scores(x, y, lower_is_better)
    return ((_counts(x_positions) @ scores) * _counts(y_positions)).sum(axis=1) / scores.size


def improvement_ci(x: pd.Series, y: pd.Series, level: float = 0.95, resamples: int = RESAMPLES,
                   seed: int = 0, lower_is_better: bool = True) -> tuple[float, float, float]:
    """P(X better than Y) (by default fewer is better) and its stratified-bootstrap interval (each
    method's runs resampled on their own)."""
    a, b = x.dropna().to_numpy(float), y.dropna().to_numpy(float)
    if not min(len(a), len(b)):
        return float("nan"), float("nan"), float("nan")
    p = probability_of_improvement(a, b, lower_is_better)
    if min(len(a), len(b)) < 2:
        return p, float("nan"), float("nan")
    draws = [improvement_rows(a, b, ia, ib, lower_is_better) for ia, ib in resample_blocks([len(a), len(b)], resamples, seed)]
    lo, hi = percentile_interval(np.concatenate(draws), level)
    return p, lo, hi


def improvement_columns(mine: pd.DataFrame, theirs: pd.DataFrame, measures: Mapping[str, str],
                        lower_is_better: bool) -> dict[str, float]:
    """Per measure (a ``runs.csv`` column → the summary column it fills), P(a run of ``mine``
    better than one of ``theirs``) and its 95 % interval as ``name``, ``name_lo``, ``name_hi``
    (``improvement_ci``): one function for a summary's rows, a report's and its pairwise table,
    so that they agree. NaN where ``theirs`` has no runs, or the runs lack the measure."""
    columns = {}
    for measure, name in measures.items():
        if measure not in mine or measure not in theirs:  # runs saved before the measure existed
            columns.update({name: np.nan, f"{name}_lo": np.nan, f"{name}_hi": np.nan})
            continue
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

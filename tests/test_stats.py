"""IQM, its stratified-bootstrap interval, the probability of improvement and the paired mean change, by hand."""
import numpy as np
import pandas as pd
import pytest

from frd.stats import (
    bracketed,
    improvement_ci,
    iqm,
    iqm_ci,
    nearest_rank_quartiles,
    paired_mean_ci,
    probability_of_improvement,
    stratified_bootstrap,
)


def test_iqm_is_the_mean_of_the_middle_half():
    assert iqm(np.array([100, 1, 2, 3, 4, 5, 6, -50])) == pytest.approx((2 + 3 + 4 + 5) / 4)  # 8 values: cut 2 each end
    assert iqm(np.array([1.0, 2.0, 3.0])) == 2.0  # 3 values: ⌊3/4⌋ = 0 cut
    assert iqm(np.arange(20.0)) == pytest.approx(np.arange(5, 15).mean())


def test_iqm_interval_brackets_the_iqm_and_tightens_with_more_runs():
    rng = np.random.default_rng(0)
    small, large = rng.normal(300, 50, 10), rng.normal(300, 50, 200)
    for values in (small, large):
        mid, lo, hi = iqm_ci(pd.Series(values))
        assert lo <= mid <= hi
    assert np.diff(iqm_ci(pd.Series(large))[1:]) < np.diff(iqm_ci(pd.Series(small))[1:])
    assert np.isnan(iqm_ci(pd.Series([5.0]))[1])


def test_stratified_bootstrap_resamples_each_stratum_on_its_own():
    """Two constant strata of different sizes: every resample keeps their sizes, so the mean of
    the stratum means is the same in every draw."""
    lo, hi = stratified_bootstrap(lambda s: np.mean([x.mean() for x in s]), [np.full(3, 1.0), np.full(7, 5.0)])
    assert lo == hi == 3.0
    lo, hi = stratified_bootstrap(lambda s: (s[0].mean(axis=1) + s[1].mean(axis=1)) / 2,
                                  [np.full(3, 1.0), np.full(7, 5.0)], batched=True)  # a resample per row
    assert lo == hi == 3.0


def test_probability_of_improvement_on_a_constructed_case():
    x, y = np.array([100, 200, 300]), np.array([200, 400])
    # pairs (x<y): 100<200 ✓, 100<400 ✓, 200=200 ½, 200<400 ✓, 300>200 ✗, 300<400 ✓ → 4.5 / 6
    assert probability_of_improvement(x, y) == pytest.approx(4.5 / 6)
    assert probability_of_improvement(y, x) == pytest.approx(1.5 / 6)
    assert probability_of_improvement(x, y, lower_is_better=False) == pytest.approx(1.5 / 6)
    p, lo, hi = improvement_ci(pd.Series([1.0, 2.0, 3.0]), pd.Series([10.0, 11.0]))
    assert p == lo == hi == 1.0


def test_paired_mean_change_and_its_t_interval_by_hand():
    # differences 1, 2, 3: mean 2, sd 1, t(0.975, 2 df) = 4.302652729911275
    mean, lo, hi = paired_mean_ci(pd.Series([5.0, 5.0, 5.0]), pd.Series([6.0, 7.0, 8.0]))
    half = 4.302652729911275 / np.sqrt(3)
    assert (mean, lo, hi) == pytest.approx((2.0, 2.0 - half, 2.0 + half))
    assert paired_mean_ci([1.0, 2.0], [1.0, 2.0]) == (0.0, 0.0, 0.0)  # the same runs: no change, no spread
    mean, lo, hi = paired_mean_ci([3.0], [4.5])
    assert mean == 1.5 and np.isnan(lo) and np.isnan(hi)


def test_nearest_rank_quartiles_are_values_that_occurred():
    assert nearest_rank_quartiles(pd.Series([15.0, 16.0])) == (15, 15, 16)  # a median of two is not 15.5
    assert nearest_rank_quartiles(pd.Series([4.0, 1.0, 2.0, np.nan])) == (1, 2, 4)
    assert all(np.isnan(nearest_rank_quartiles(pd.Series([np.nan]))))


def test_bracketed_writes_a_value_its_interval_or_neither():
    assert bracketed(25.0, 17.5, 32.5) == "25 [17.5–32.5]"
    assert bracketed(0.5, np.nan, np.nan) == "0.5" and bracketed(np.nan, 1, 2) == "–"
    assert bracketed(1.0, 0.25, 1.0, lambda x: format(x, ".2f")) == "1.00 [0.25–1.00]"

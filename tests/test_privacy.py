"""Sample privacy metric on hand values and the γ table."""
from __future__ import annotations

import math

import numpy as np
import pytest

from frd.classification.mixup import MixedSamples, inverse_mixup, mixup
from frd.classification.privacy import inverse_sources, mixup_sources, privacy_table, sample_privacy
from frd.errors import FrdError


def test_sample_privacy_is_log_of_nearest_source_distance():
    x_hat = np.array([[0.0, 0.0], [1.0, 1.0]])
    sources = np.array([[[3.0, 4.0], [6.0, 8.0]], [[1.0, 1.0], [0.0, 0.0]]])
    got = sample_privacy(x_hat, sources)
    assert got[0] == pytest.approx(math.log(5.0))
    assert got[1] == -np.inf


def test_mixup_privacy_is_log_gamma_times_source_distance():
    rng = np.random.default_rng(1)
    x, y = rng.random((10, 3, 3)), np.arange(10) % 5
    m = mixup(x, y, 4, 0.3, 0, n_classes=5)
    src = mixup_sources(m, {0: x})
    np.testing.assert_array_equal(src[:, 0], x[m.index[:, 0]])
    expected = np.log(0.3 * np.linalg.norm((x[m.index[:, 0]] - x[m.index[:, 1]]).reshape(4, -1), axis=1))
    np.testing.assert_allclose(sample_privacy(m.x, src), expected)


def test_mix2up_of_one_raw_pair_on_two_devices_exposes_it():
    """When two devices mix the *same* raw pair symmetrically, inverse-Mixup returns it: privacy −inf.
    This checks that each inverse sample is scored against the raw samples behind it."""
    x = np.array([[1.0, 2.0], [3.0, 5.0]])
    y = np.array([0, 1])
    both = MixedSamples.concat([mixup(x, y, 1, 0.25, s, n_classes=2, device=d) for d, s in ((0, 0), (1, 3))])
    assert both.label[0].tolist() == both.label[1, ::-1].tolist(), "seeds chosen for opposite orientations"
    inv = inverse_mixup(both, None, 0)
    src = inverse_sources(inv, both, {0: x, 1: x})
    assert src.shape == (2, 4, 2)
    assert (sample_privacy(inv.x, src) == -np.inf).all()


def test_privacy_table_over_gamma():
    rng = np.random.default_rng(2)
    devices = [(rng.random((60, 4, 4)), np.arange(60) % 4) for _ in range(2)]
    table = privacy_table(devices, n_classes=4, gammas=(0.1, 0.3, 0.45), n_mix=20, seed=0)
    assert list(table.columns) == ["gamma", "scheme", "mean", "std", "n"]
    assert len(table) == 6 and set(table.scheme) == {"Mixup", "Mix2up"}
    mix = table[table.scheme == "Mixup"].set_index("gamma")
    assert (mix.n == 20).all()
    # Same pairs for every γ: log(γ·d) shifts by log γ only.
    assert mix.loc[0.45, "mean"] - mix.loc[0.1, "mean"] == pytest.approx(math.log(4.5))
    np.testing.assert_allclose(mix["std"], mix["std"].iloc[0])
    two = table[table.scheme == "Mix2up"].set_index("gamma")
    assert two["mean"].is_monotonic_increasing and (two.n > 0).all()


def test_privacy_table_needs_two_devices():
    with pytest.raises(FrdError, match="two devices"):
        privacy_table([(np.zeros((4, 2)), np.array([0, 1, 0, 1]))], n_classes=2)

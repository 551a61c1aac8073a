"""Mixup and inverse-Mixup on hand examples."""
from __future__ import annotations

import numpy as np
import pytest

from frd.classification.mixup import (
    MixedSamples,
    check_gamma,
    eligible_groups,
    inverse_mixup,
    invert_group,
    mirrored_label_pairs,
    mixup,
)
from frd.errors import FrdError


def hand_mixed(x_hat, lo_hi, devices, gamma, n_classes):
    """Mixed samples as the server sees them: sample k weighs label lo_hi[k][0] by γ, [1] by 1−γ."""
    soft = np.zeros((len(x_hat), n_classes))
    for k, (a, b) in enumerate(lo_hi):
        soft[k, a], soft[k, b] = gamma, 1 - gamma
    n = len(x_hat)
    return MixedSamples(x=np.array(x_hat, dtype=float), soft=soft, device=np.array(devices),
                        index=np.zeros((n, 2), dtype=int), label=np.array(lo_hi), gamma=np.full(n, gamma))


@pytest.mark.parametrize("gamma", [0.0, 0.5, -0.1, 0.7])
def test_gamma_outside_open_interval_is_refused(gamma):
    with pytest.raises(FrdError, match="gamma"):
        check_gamma(gamma)


def test_mixup_combines_two_different_label_samples_of_the_device():
    rng = np.random.default_rng(0)
    x, y = rng.random((30, 2, 3)), np.arange(30) % 3
    m = mixup(x, y, 8, 0.2, 11, n_classes=4, device=7)
    i, j = m.index[:, 0], m.index[:, 1]
    np.testing.assert_allclose(m.x, 0.2 * x[i] + 0.8 * x[j])
    assert (y[i] != y[j]).all() and (m.label == np.stack([y[i], y[j]], axis=1)).all()
    assert len(np.unique(m.index)) == 16, "a raw sample enters at most one mix"
    np.testing.assert_allclose(m.soft[np.arange(8), y[i]], 0.2)
    np.testing.assert_allclose(m.soft[np.arange(8), y[j]], 0.8)
    np.testing.assert_allclose(m.soft.sum(axis=1), 1.0)
    assert (m.device == 7).all()
    np.testing.assert_array_equal(mixup(x, y, 8, 0.2, 11, n_classes=4).index, m.index)
    assert not np.array_equal(mixup(x, y, 8, 0.2, 12, n_classes=4).index, m.index)


def test_a_device_without_enough_label_variety_mixes_what_it_can():
    assert len(mixup(np.zeros((5, 2)), np.zeros(5, dtype=int), 1, 0.2, 0, n_classes=2)) == 0
    assert len(mixup(np.zeros((6, 2)), np.array([0, 1, 1, 1, 1, 1]), 2, 0.2, 0, n_classes=2)) == 1
    with pytest.raises(ValueError, match="n_classes"):
        mixup(np.zeros((4, 2)), np.array([0, 1, 2, 3]), 1, 0.2, 0, n_classes=3)


def test_inverse_mixup_recovers_raw_pair_mixed_with_gamma_and_one_minus_gamma():
    """x_a = (1, 2) label 0, x_b = (3, 5) label 1, γ = 0.25.

    Device 0: x̂_c = 0.25·x_a + 0.75·x_b = (2.5, 4.25);
    device 1: x̂_c′ = 0.75·x_a + 0.25·x_b = (1.5, 2.75).
    Closed form: x̃_a = (0.25·x̂_c − 0.75·x̂_c′)/(−0.5) = (1, 2);
                 x̃_b = (0.25·x̂_c′ − 0.75·x̂_c)/(−0.5) = (3, 5).
    """
    m = hand_mixed([[2.5, 4.25], [1.5, 2.75]], [(0, 1), (1, 0)], [0, 1], 0.25, 2)
    x_t, labels = invert_group(m.x, m.soft, m.device)
    np.testing.assert_allclose(x_t, [[1, 2], [3, 5]])
    assert labels.tolist() == [0, 1]
    inv = inverse_mixup(m, None, 0)
    assert sorted(zip(inv.label.tolist(), inv.x.tolist())) == [(0, [1.0, 2.0]), (1, [3.0, 5.0])]
    assert (np.sort(inv.members, axis=1) == [0, 1]).all()


def test_general_inversion_on_a_three_cycle():
    """x0 = (1, 0), x1 = (0, 1), x2 = (1, 1), γ = 0.25, devices 0, 1, 2 mix labels 0→1, 1→2, 2→0:
    0.25·x0 + 0.75·x1 = (0.25, 0.75); 0.25·x1 + 0.75·x2 = (0.75, 1); 0.25·x2 + 0.75·x0 = (1, 0.25)."""
    m = hand_mixed([[0.25, 0.75], [0.75, 1.0], [1.0, 0.25]], [(0, 1), (1, 2), (2, 0)], [0, 1, 2], 0.25, 3)
    x_t, labels = invert_group(m.x, m.soft, m.device)
    np.testing.assert_allclose(x_t, [[1, 0], [0, 1], [1, 1]], atol=1e-12)
    assert labels.tolist() == [0, 1, 2]
    assert eligible_groups(m, 3).tolist() == [[0, 1, 2]]
    assert eligible_groups(m, 2).shape == (0, 2)
    inv = inverse_mixup(m, 2, 0, n_s=3)
    assert len(inv) == 2
    for x, k in zip(inv.x, inv.label):
        np.testing.assert_allclose(x, [[1, 0], [0, 1], [1, 1]][k], atol=1e-12)


def test_pairing_two_samples_of_one_device_is_refused():
    m = hand_mixed([[2.5, 4.25], [1.5, 2.75]], [(0, 1), (1, 0)], [3, 3], 0.25, 2)
    with pytest.raises(ValueError, match="different devices"):
        invert_group(m.x, m.soft, m.device)
    assert eligible_groups(m, 2).shape == (0, 2)
    assert len(inverse_mixup(m, 1, 0)) == 0, "nothing can be built: none is (the caller records it)"


def test_singular_ratios_and_non_symmetric_labels_are_refused():
    with pytest.raises(ValueError, match="singular"):
        invert_group(np.zeros((2, 1)), np.array([[0.5, 0.5], [0.5, 0.5]]), [0, 1])
    with pytest.raises(ValueError, match="exactly 2 labels"):
        invert_group(np.zeros((2, 1)), np.array([[0.2, 0.8, 0], [0.2, 0, 0.8]]), [0, 1])


def test_server_pairs_only_cross_device_symmetric_pairs_and_can_exceed_n_mix():
    rng = np.random.default_rng(3)
    parts = [mixup(rng.random((20, 4)), np.arange(20) % 2, 5, 0.3, d, n_classes=2, device=d)
             for d in range(3)]
    m = MixedSamples.concat(parts)
    lo = m.label[:, 0]
    brute = [(k, q) for k in range(15) for q in range(k + 1, 15)
             if m.device[k] != m.device[q] and lo[k] != lo[q]]
    groups = eligible_groups(m, 2)
    assert sorted(tuple(sorted(g)) for g in groups.tolist()) == sorted(brute)
    n_inv = 2 * len(brute)
    assert n_inv > len(m)
    inv = inverse_mixup(m, n_inv, 0)
    assert len(inv) == n_inv
    assert len({(tuple(g), int(lab)) for g, lab in zip(inv.members.tolist(), inv.label)}) == n_inv
    assert (m.device[inv.members[:, 0]] != m.device[inv.members[:, 1]]).all()
    k = 5
    x_t, labels = invert_group(m.x[inv.members[k]], m.soft[inv.members[k]], m.device[inv.members[k]])
    np.testing.assert_allclose(inv.x[k], x_t[labels == inv.label[k]][0])
    assert len(inverse_mixup(m, n_inv + 1, 0)) == n_inv, "clipped to what can be built"
    with pytest.raises(ValueError, match="at least 1"):
        inverse_mixup(m, 0, 0)


def test_mirrored_pairs_give_every_mix_partners_on_devices_of_the_other_parity():
    """2 devices, hand-built: device 0 mixes the shared pairs as drawn, device 1 mirrored."""
    shared = np.array([[0, 1], [2, 0], [1, 2]])
    labels = np.array([0, 0, 1, 1, 2, 2])
    x = 10.0 * labels[:, None]  # every sample of a label alike, so inverse-Mixup gives them back exactly
    even = mixup(x, labels, 3, 0.25, 0, n_classes=3, device=0, label_pairs=shared)
    odd = mixup(x, labels, 3, 0.25, 1, n_classes=3, device=1, label_pairs=shared[:, ::-1])
    assert even.label.tolist() == [[0, 1], [2, 0], [1, 2]] and odd.label.tolist() == [[1, 0], [0, 2], [2, 1]]
    assert len(set(even.index.ravel().tolist())) == 6, "each raw sample enters one mix"
    m = MixedSamples.concat([even, odd])
    assert len(eligible_groups(m, 2)) == 3, "each mix has its mirror on the other device"
    inv = inverse_mixup(m, None, 0)
    assert sorted(inv.label.tolist()) == [0, 0, 1, 1, 2, 2], "3 groups × 2 hard-labelled samples"
    np.testing.assert_allclose(inv.x.ravel(), 10.0 * inv.label, atol=1e-9)


def test_mirrored_label_pairs_are_different_labels():
    pairs = mirrored_label_pairs(10, 500, np.random.default_rng(0))
    assert pairs.shape == (500, 2) and (pairs[:, 0] != pairs[:, 1]).all() and pairs.max() == 9

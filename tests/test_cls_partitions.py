"""Partitions: exact label counts, the Dirichlet minimum-size rule, label shards, disjointness, clear errors."""
from __future__ import annotations

import numpy as np
import pytest

from frd.classification import partitions
from frd.classification.partitions import PartitionSpec, dirichlet, iid, mix2fld, shards
from frd.errors import FrdError

LABELS = np.repeat(np.arange(10), 700)  # a pool of 7,000: 700 per label


def label_counts(parts):
    return np.stack([np.bincount(LABELS[p], minlength=10) for p in parts])


def assert_disjoint(parts):
    everything = np.concatenate(parts)
    assert len(np.unique(everything)) == len(everything)


def test_mix2fld_paper_split_two_labels_of_two_eight_of_sixty_two():
    parts = mix2fld(LABELS, 10, 500, np.random.default_rng(0))
    counts = label_counts(parts)
    assert (counts.sum(1) == 500).all()
    for row in counts:
        assert sorted(row.tolist()) == [2, 2] + [62] * 8
    minority = {tuple(np.flatnonzero(row == 2)) for row in counts}
    assert len(minority) > 1, "the two minority labels are drawn per device"
    assert_disjoint(parts)


def test_mix2fld_default_size_is_the_paper_500_when_the_pool_allows():
    assert [p.size for p in mix2fld(LABELS, 10, None, np.random.default_rng(1))] == [500] * 10


def test_iid_gives_every_device_the_same_count_per_label():
    counts = label_counts(iid(LABELS, 10, 500, np.random.default_rng(0)))
    assert (counts == 50).all()


def test_iid_remainder_goes_to_distinct_labels():
    counts = label_counts(iid(LABELS, 4, 23, np.random.default_rng(0)))
    assert (counts.sum(1) == 23).all() and set(counts.ravel().tolist()) == {2, 3}
    assert ((counts == 3).sum(1) == 3).all()


def test_same_seed_same_partition_other_seed_other_partition():
    a = mix2fld(LABELS, 10, 500, np.random.default_rng(5))
    b = mix2fld(LABELS, 10, 500, np.random.default_rng(5))
    c = mix2fld(LABELS, 10, 500, np.random.default_rng(6))
    assert all((x == y).all() for x, y in zip(a, b))
    assert any((x != y).any() for x, y in zip(a, c))


def test_dirichlet_redraws_until_every_device_has_the_minimum():
    labels = np.repeat(np.arange(10), 30)  # 300 samples, 10 devices, strong skew
    parts = dirichlet(labels, 10, 30, np.random.default_rng(0), PartitionSpec(alpha=0.1, min_samples=10))
    sizes = [p.size for p in parts]
    assert min(sizes) >= 10 and sum(sizes) == 300
    assert len(set(sizes)) > 1, "α = 0.1 gives unequal devices"
    assert_disjoint(parts)


@pytest.fixture
def sizes_per_draw(monkeypatch):
    """The smallest device of each Dirichlet draw, in order (the draws are counted, not changed)."""
    sizes = []
    original = partitions._dirichlet_draw

    def counting(*args):
        parts = original(*args)
        sizes.append(min(p.size for p in parts))
        return parts

    monkeypatch.setattr(partitions, "_dirichlet_draw", counting)
    return sizes


def test_dirichlet_first_draw_would_have_broken_the_rule(sizes_per_draw):
    """Count the draws: with this seed the rule forces at least one redraw."""
    labels = np.repeat(np.arange(10), 30)
    dirichlet(labels, 10, 30, np.random.default_rng(0), PartitionSpec(alpha=0.1, min_samples=10))
    assert len(sizes_per_draw) > 1 and sizes_per_draw[0] < 10 and sizes_per_draw[-1] >= 10


def test_dirichlet_gives_up_with_a_clear_error(monkeypatch):
    monkeypatch.setattr(partitions, "MAX_DIRICHLET_DRAWS", 1)
    with pytest.raises(FrdError, match="no Dirichlet.*raise --alpha"):
        dirichlet(np.repeat(np.arange(10), 30), 10, 30, np.random.default_rng(0),
                  PartitionSpec(alpha=0.1, min_samples=10))


@pytest.mark.parametrize("alpha", [0.0, -1.0])
def test_dirichlet_alpha_must_be_positive(alpha):
    with pytest.raises(FrdError, match="alpha must be > 0"):
        dirichlet(LABELS, 10, 100, np.random.default_rng(0), PartitionSpec(alpha=alpha))


@pytest.mark.parametrize("split", [iid, mix2fld, dirichlet, shards])
def test_more_devices_than_samples_is_a_clear_error(split):
    with pytest.raises(FrdError, match="lower --devices"):
        split(LABELS, 8000, None, np.random.default_rng(0))


def test_asking_more_of_a_label_than_the_pool_has_names_the_label():
    with pytest.raises(FrdError, match="needs 800 samples of label"):
        iid(LABELS, 10, 800, np.random.default_rng(0))


def test_shards_by_hand_three_devices_one_shard_of_two_each():
    """Pool 1 0 1 0 1 0 sorted by label is 0 0 0 1 1 1; shards of two: (0 0), (0 1), (1 1); each
    device gets one, so one device holds both labels (the shard on the boundary)."""
    labels = np.array([1, 0, 1, 0, 1, 0])
    parts = shards(labels, 3, 2, np.random.default_rng(0), PartitionSpec(shards_per_client=1))
    counts = sorted(np.bincount(labels[p], minlength=2).tolist() for p in parts)
    assert counts == [[0, 2], [1, 1], [2, 0]]
    assert sorted(np.concatenate(parts).tolist()) == list(range(6))


def test_shards_mcmahan_two_pure_shards_per_device():
    """100 devices × 70 samples = the whole pool; 200 shards of 35, 20 per label: every device
    holds two whole shards, so one or two labels, 35 or 70 samples of each."""
    parts = shards(LABELS, 100, 70, np.random.default_rng(0), PartitionSpec(shards_per_client=2))
    counts = label_counts(parts)
    assert (counts.sum(1) == 70).all() and set(counts.ravel().tolist()) <= {0, 35, 70}
    assert ((counts > 0).sum(1) <= 2).all() and ((counts > 0).sum(1) == 2).sum() > 90  # a pair of one label is rare
    assert_disjoint(parts) and sum(p.size for p in parts) == LABELS.size
    again = shards(LABELS, 100, 70, np.random.default_rng(0), PartitionSpec(shards_per_client=2))
    other = shards(LABELS, 100, 70, np.random.default_rng(1), PartitionSpec(shards_per_client=2))
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))
    assert not all(np.array_equal(a, b) for a, b in zip(parts, other))


@pytest.mark.parametrize("devices, samples, per_device, match", [
    (10, 25, 2, "cannot cut 25 samples per device into 2 equal shards"),
    (10, 1, 2, "cannot cut 1 samples per device into 2 equal shards"),
    (10, 800, 2, "cannot give 10 devices 800 samples each"),
    (10, 20, 0, "--shards-per-client must be at least 1, got 0"),
])
def test_shard_counts_that_cannot_be_met_are_clear_errors(devices, samples, per_device, match):
    with pytest.raises(FrdError, match=match):
        shards(LABELS, devices, samples, np.random.default_rng(0), PartitionSpec(shards_per_client=per_device))


def test_shards_default_size_is_a_multiple_of_the_shards():
    parts = shards(LABELS, 10, None, np.random.default_rng(0), PartitionSpec(shards_per_client=3))
    assert {p.size for p in parts} == {498}  # 500 rounded down to 3 shards of 166


def test_dirichlet_minimum_above_the_mean_share_names_min_samples():
    with pytest.raises(FrdError, match="lower --min-samples"):
        dirichlet(LABELS, 100, 8, np.random.default_rng(0), PartitionSpec(min_samples=10))


def test_dirichlet_with_min_samples_0_still_leaves_no_device_empty(sizes_per_draw):
    """A device with no sample could not train: a draw that leaves one empty is redrawn."""
    parts = dirichlet(LABELS, 50, 8, np.random.default_rng(0), PartitionSpec(alpha=0.2, min_samples=0))
    assert sizes_per_draw[0] == 0 and min(p.size for p in parts) >= 1


@pytest.mark.parametrize("samples, least", [(None, 10), (30, 10), (10, 10), (9, 1), (8, 1), (1, 1)])
def test_dirichlet_default_minimum_is_ten_or_one_below_a_share_of_ten(samples, least):
    assert partitions.default_min_samples(samples) == least


def test_dirichlet_default_minimum_runs_eight_samples_per_device(sizes_per_draw):
    """Issue 44's cross-device share: 8 per device, where NIID-Bench's 10 cannot be met; no
    device is left empty."""
    parts = dirichlet(LABELS, 100, 8, np.random.default_rng(0), PartitionSpec(alpha=0.3))
    assert sum(p.size for p in parts) == 800 and min(p.size for p in parts) >= 1 and sizes_per_draw[-1] >= 1


def test_dirichlet_default_minimum_keeps_ten_where_it_can_be_met():
    drawn = [dirichlet(LABELS, 10, 30, np.random.default_rng(0), PartitionSpec(alpha=0.1, min_samples=m))
             for m in (None, 10)]
    assert all(np.array_equal(a, b) for a, b in zip(*drawn))


@pytest.mark.parametrize("samples, keyed", [(None, 10), (12, 10), (8, 1)])
def test_the_default_minimum_is_keyed_as_the_minimum_it_stands_for(samples, keyed):
    """Folders written when the default was a plain 10 still resume; a share of 8 keys its 1."""
    from frd.classification.methods import cls_config
    key = cls_config(partition="dirichlet", samples_per_device=samples).resume_key()
    assert key.common["min_samples"] == keyed
    assert key == cls_config(partition="dirichlet", samples_per_device=samples, min_samples=keyed).resume_key()

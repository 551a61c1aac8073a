"""Seeded splits of a labelled pool into device datasets: IID, Mix2FLD's non-IID, Dirichlet(α),
and McMahan et al. 2017's label shards.

Every function returns one array of pool indices per device; devices never share a sample.
``samples=None`` means the paper's 500 per device, or the most the pool can always serve.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from frd.errors import FrdError

PAPER_SAMPLES = 500
"""Samples per device in the Mix2FLD letter [Oh et al. 2020]."""
DIRICHLET_MIN_SAMPLES = 10
"""Dirichlet: the least samples a device may hold by default [NIID-Bench's min_require_size;
Flower Datasets' DirichletPartitioner min_partition_size]."""
MAX_DIRICHLET_DRAWS = 1000
"""Dirichlet draws before giving up on the minimum-size rule (NIID-Bench loops forever)."""


@dataclass(frozen=True)
class PartitionSpec:
    """The knobs of every partition; each partition reads only its own."""

    alpha: float = 0.5
    """Dirichlet concentration: smaller is more skewed."""
    min_samples: int | None = None
    """Dirichlet: redraw until every device holds at least this many samples; None:
    ``default_min_samples`` of the samples per device."""
    minority_labels: int = 2
    """mix2fld: labels a device barely holds [Oh et al. 2020: 2]."""
    minority_samples: int = 2
    """mix2fld: samples of each minority label [Oh et al. 2020: 2]."""
    shards_per_client: int = 2
    """shards: label-sorted shards each device gets [McMahan et al. 2017: 2]."""


def _too_small(name: str, labels: np.ndarray, devices: int, samples: int | None) -> FrdError:
    rarest = np.bincount(labels).min() if labels.size else 0
    want = f"{samples} samples each" if samples else "a share each"
    return FrdError(f"partition {name!r} cannot give {devices} devices {want} from a pool of {labels.size} "
                    f"samples ({rarest} of the rarest label); lower --devices or --samples-per-device")


def _assign(name: str, labels: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    """Give device d ``counts[d, l]`` distinct pool samples of label l."""
    pools = [rng.permutation(np.flatnonzero(labels == label)) for label in range(counts.shape[1])]
    need = counts.sum(0)
    short = [label for label, pool in enumerate(pools) if need[label] > pool.size]
    if short:
        label = short[0]
        raise FrdError(f"partition {name!r} needs {need[label]} samples of label {label} but the pool has "
                       f"{pools[label].size}; lower --devices or --samples-per-device")
    ends = np.cumsum(counts, axis=0)
    return [np.sort(np.concatenate([pools[k][ends[d, k] - counts[d, k]:ends[d, k]] for k in range(counts.shape[1])]))
            for d in range(counts.shape[0])]


def _spread(total: int, labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``total`` samples over ``labels`` as evenly as possible; the remainder goes to random labels."""
    share = np.full(labels.size, total // labels.size)
    share[rng.choice(labels.size, total % labels.size, replace=False)] += 1
    return share


def iid(labels: np.ndarray, devices: int, samples: int | None, rng: np.random.Generator,
        spec: PartitionSpec = PartitionSpec()) -> list[np.ndarray]:
    """Every device holds the same number of samples of every label."""
    classes = int(labels.max()) + 1
    if samples is None:
        samples = min(PAPER_SAMPLES, classes * (np.bincount(labels, minlength=classes).min() // devices))
    if samples < classes:
        raise _too_small("iid", labels, devices, samples)
    counts = np.stack([_spread(samples, np.arange(classes), rng) for _ in range(devices)])
    return _assign("iid", labels, counts, rng)


def mix2fld(labels: np.ndarray, devices: int, samples: int | None, rng: np.random.Generator,
            spec: PartitionSpec = PartitionSpec()) -> list[np.ndarray]:
    """Mix2FLD non-IID [Oh et al. 2020]: per device, ``minority_labels`` random labels get
    ``minority_samples`` each and the others share the rest (500 → 2 × 2 + 8 × 62)."""
    minority_labels, minority_samples = spec.minority_labels, spec.minority_samples
    classes = int(labels.max()) + 1
    if not 0 < minority_labels < classes:
        raise FrdError(f"minority labels must be between 1 and {classes - 1}, got {minority_labels}")
    majority = classes - minority_labels
    if samples is None:
        per_label = np.bincount(labels, minlength=classes).min() // devices
        samples = min(PAPER_SAMPLES, majority * per_label + minority_labels * minority_samples)
    if samples < minority_labels * minority_samples + majority * minority_samples:
        raise _too_small("mix2fld", labels, devices, samples)
    counts = np.zeros((devices, classes), dtype=int)
    for d in range(devices):
        order = rng.permutation(classes)
        counts[d, order[:minority_labels]] = minority_samples
        counts[d, order[minority_labels:]] = _spread(samples - minority_labels * minority_samples, order[minority_labels:], rng)
    return _assign("mix2fld", labels, counts, rng)


def _dirichlet_draw(labels: np.ndarray, devices: int, alpha: float, rng: np.random.Generator) -> list[np.ndarray]:
    """One NIID-Bench draw: per class, Dir(α) shares over the devices not yet above the mean size."""
    parts: list[list[int]] = [[] for _ in range(devices)]
    for label in range(int(labels.max()) + 1):
        members = rng.permutation(np.flatnonzero(labels == label))
        shares = rng.dirichlet(np.full(devices, alpha))
        shares *= np.array([len(p) < labels.size / devices for p in parts])
        if shares.sum() == 0:  # every open device drew a zero share: nothing is assigned, redraw
            return [np.array([], dtype=int)] * devices
        cuts = (np.cumsum(shares / shares.sum()) * members.size).astype(int)[:-1]
        for part, chunk in zip(parts, np.split(members, cuts)):
            part.extend(chunk.tolist())
    return [np.sort(np.array(p, dtype=int)) for p in parts]


def default_min_samples(samples: int | None) -> int:
    """Dirichlet's minimum per device when none is given: 10 [NIID-Bench] for a mean share
    ``samples`` of 10 or more, else 1, no device empty [our choice: below 10 a minimum of 10
    cannot be met, and at cross-device scale little above 1 can: at 1,000 devices × 8 samples and
    α = 0.3, 2 % of draws leave no device empty and none gives every device 2]. ``samples`` None
    (the paper's share) counts as 10 or more."""
    return DIRICHLET_MIN_SAMPLES if samples is None or samples >= DIRICHLET_MIN_SAMPLES else 1


def dirichlet(labels: np.ndarray, devices: int, samples: int | None, rng: np.random.Generator,
              spec: PartitionSpec = PartitionSpec()) -> list[np.ndarray]:
    """Dirichlet(α) label skew as in NIID-Bench over ``devices × samples`` pool samples, redrawn
    until every device holds at least ``min_samples``."""
    alpha = spec.alpha
    if alpha <= 0:
        raise FrdError(f"Dirichlet alpha must be > 0, got {alpha}; try 0.5 (mild) or 0.1 (strong skew)")
    if samples is None:
        samples = min(PAPER_SAMPLES, labels.size // devices)
    if samples < 1 or devices * samples > labels.size:
        raise _too_small("dirichlet", labels, devices, samples)
    min_samples = default_min_samples(samples) if spec.min_samples is None else spec.min_samples
    least = max(min_samples, 1)  # a device with no sample could not train
    if samples < least:
        raise FrdError(f"partition 'dirichlet' redraws until every device holds --min-samples {min_samples} or more, "
                       f"above the mean --samples-per-device {samples}; lower --min-samples (to 1 at the least)")
    chosen = np.sort(rng.choice(labels.size, devices * samples, replace=False))
    for _ in range(MAX_DIRICHLET_DRAWS):
        parts = _dirichlet_draw(labels[chosen], devices, alpha, rng)
        if min(p.size for p in parts) >= least:
            return [chosen[p] for p in parts]
    raise FrdError(f"no Dirichlet(alpha={alpha}) draw in {MAX_DIRICHLET_DRAWS} gave every device ≥ {least} "
                   "samples; raise --alpha or --samples-per-device, or lower --devices")


def shards(labels: np.ndarray, devices: int, samples: int | None, rng: np.random.Generator,
           spec: PartitionSpec = PartitionSpec()) -> list[np.ndarray]:
    """McMahan et al. 2017's pathological non-IID split: ``devices × samples`` random pool samples
    sorted by label (in random order within a label), cut into ``devices × shards_per_client``
    equal shards, and every device dealt ``shards_per_client`` of them at random (so it holds at
    most that many labels; a shard on a label boundary holds two)."""
    per_device = spec.shards_per_client
    if per_device < 1:
        raise FrdError(f"--shards-per-client must be at least 1, got {per_device}")
    if samples is None:
        samples = min(PAPER_SAMPLES, labels.size // devices) // per_device * per_device
    if samples < 1 or devices * samples > labels.size:
        raise _too_small("shards", labels, devices, samples)
    if samples < per_device or samples % per_device:
        raise FrdError(f"partition 'shards' cannot cut {samples} samples per device into {per_device} equal shards; "
                       f"make --samples-per-device a multiple of --shards-per-client (at least {per_device})")
    chosen = rng.choice(labels.size, devices * samples, replace=False)
    by_label = chosen[np.argsort(labels[chosen], kind="stable")].reshape(devices * per_device, samples // per_device)
    dealt = rng.permutation(devices * per_device).reshape(devices, per_device)
    return [np.sort(by_label[hand].ravel()) for hand in dealt]


Partitioner = Callable[[np.ndarray, int, "int | None", np.random.Generator, PartitionSpec], list[np.ndarray]]
PARTITIONS: dict[str, Partitioner] = {"iid": iid, "mix2fld": mix2fld, "dirichlet": dirichlet, "shards": shards}
"""Partitions by name: ``PARTITIONS[name](labels, devices, samples, rng, spec)``."""

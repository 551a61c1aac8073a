"""Mixup on the devices and inverse-Mixup at the server: the seed samples of MixFLD and Mix2FLD.

A device uploads x̂ = γ·x_i + (1−γ)·x_j of two of its samples with different labels, soft label
γ·y_i + (1−γ)·y_j, so no raw sample leaves it [Seo et al. 2022, §3, eq. 21]. The Mix2FLD server combines
n_s mixed samples of *different* devices whose ratio matrix is invertible so that each result
has a hard label again (inverse-Mixup) [Seo et al. 2022, §3; Oh et al. 2020]; pairs from one device are refused, since
two mixes of one device could give its raw samples back.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations, product

import numpy as np

from frd.errors import FrdError

RATIO_ATOL = 1e-9
"""A soft-label entry at or below this counts as absent; ratio matrices need |det| above it."""


@dataclass(frozen=True)
class MixedSamples:
    """Mixed-up samples and where each came from.

    The server may read ``x``, ``soft`` and ``device`` (what is uploaded). ``index`` (local
    indices i, j), ``label`` (y_i, y_j) and ``gamma`` (weight of x_i) are the device's private
    provenance, kept only to measure privacy.
    """

    x: np.ndarray
    soft: np.ndarray
    device: np.ndarray
    index: np.ndarray
    label: np.ndarray
    gamma: np.ndarray

    def __len__(self) -> int:
        return len(self.x)

    @classmethod
    def concat(cls, parts: list["MixedSamples"]) -> "MixedSamples":
        """All devices' uploads as one set, as the server holds them."""
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in
                     ("x", "soft", "device", "index", "label", "gamma")))


@dataclass(frozen=True)
class InverseSamples:
    """Hard-labelled samples made at the server; ``members[k]`` are the rows of the mixed set
    that sample k combines (one per device)."""

    x: np.ndarray
    label: np.ndarray
    members: np.ndarray

    def __len__(self) -> int:
        return len(self.x)


def check_gamma(gamma: float) -> float:
    """γ in (0, 0.5): γ = 0 uploads a raw sample, γ = 0.5 makes inverse-Mixup singular."""
    if not 0.0 < gamma < 0.5:
        raise FrdError(f"mixing ratio gamma={gamma!r} is outside (0, 0.5); choose e.g. 0.2 "
                       f"(values near 0 leak raw samples, 0.5 cannot be inverted)")
    return float(gamma)


def draw_pairs(labels: np.ndarray, n_mix: int, rng: np.random.Generator) -> np.ndarray:
    """Up to ``n_mix`` disjoint (i, j) index pairs with different labels, in random order and
    orientation (fewer when the device's data cannot give more: the caller records the shortfall).

    Each raw sample enters at most one mix, so no linear combination of one device's uploads
    gives a raw sample back. Samples are visited in random order; a sample waits until one of
    another label arrives. The sources leave this selection open: this is our choice.
    """
    waiting: list[int] = []
    pairs: list[tuple[int, int]] = []
    for k in rng.permutation(len(labels)):
        if waiting and labels[waiting[0]] != labels[k]:
            pairs.append((waiting.pop(0), int(k)))
            if len(pairs) == n_mix:
                break
        else:
            waiting.append(int(k))
    out = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    flip = rng.random(len(out)) < 0.5
    out[flip] = out[flip, ::-1]
    return out


def mirrored_label_pairs(n_classes: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """A shared list of ``count`` label pairs (a, b), a ≠ b, drawn uniformly [our choice].

    Every device reads the same list (drawn from the run's seed, as if the server had sent it):
    even-numbered devices mix (a, b), odd-numbered ones the mirror (b, a), so each mix has
    mirrored partners on every device of the other parity and inverse-Mixup finds many groups.
    """
    first = rng.integers(n_classes, size=count)
    second = (first + rng.integers(1, n_classes, size=count)) % n_classes
    return np.stack([first, second], axis=1)


def pairs_for_labels(labels: np.ndarray, wanted: np.ndarray, n_mix: int, rng: np.random.Generator) -> np.ndarray:
    """Up to ``n_mix`` disjoint (i, j) index pairs whose labels are the first entries of ``wanted``
    (label pairs, in order) that this device can still serve; each raw sample enters one mix."""
    unused = {int(c): list(rng.permutation(np.flatnonzero(labels == c))) for c in np.unique(labels)}
    pairs: list[tuple[int, int]] = []
    for a, b in wanted.tolist():
        if len(pairs) == n_mix:
            break
        if unused.get(a) and unused.get(b):
            pairs.append((int(unused[a].pop()), int(unused[b].pop())))
    return np.array(pairs, dtype=np.int64).reshape(-1, 2)


def mixup(x: np.ndarray, labels: np.ndarray, n_mix: int, gamma: float, rng: np.random.Generator | int,
          *, n_classes: int, device: int = 0, label_pairs: np.ndarray | None = None) -> MixedSamples:
    """One device's mixed-up samples x̂ = γ·x_i + (1−γ)·x_j with y_i ≠ y_j: ``n_mix`` of them, or
    as many as its data allows (``len`` of the result says).

    ``x`` is (n, ...) of any sample shape, ``labels`` (n,) integers. ``rng`` is a generator or a
    seed (derive it per device from the run seed). ``label_pairs``: the (y_i, y_j) to take, in
    order of preference (:func:`mirrored_label_pairs`); None: random different-label pairs.
    """
    gamma = check_gamma(gamma)
    labels = np.asarray(labels, dtype=np.int64)
    if n_mix < 1:
        raise ValueError(f"n_mix must be at least 1, got {n_mix}")
    if labels.min() < 0 or labels.max() >= n_classes:
        raise ValueError(f"labels must lie in 0..{n_classes - 1} (n_classes={n_classes}), "
                       f"got {labels.min()}..{labels.max()}; pass the dataset's n_classes")
    generator = np.random.default_rng(rng)
    ij = (draw_pairs(labels, n_mix, generator) if label_pairs is None
          else pairs_for_labels(labels, label_pairs, n_mix, generator))
    n = len(ij)
    x = np.asarray(x, dtype=np.float64)
    lab = labels[ij]
    soft = np.zeros((n, n_classes))
    rows = np.arange(n)
    soft[rows, lab[:, 0]] = gamma
    soft[rows, lab[:, 1]] = 1.0 - gamma
    return MixedSamples(x=gamma * x[ij[:, 0]] + (1.0 - gamma) * x[ij[:, 1]], soft=soft,
                        device=np.full(n, device, dtype=np.int64), index=ij, label=lab,
                        gamma=np.full(n, gamma))


def ratio_matrix(soft: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The n_s×n_s mixing-ratio matrix M of n_s soft labels and the labels its columns stand for.

    Row k holds the weights of mixed sample k on the labels present in the group, so
    x̂ = M·x (x the label-wise raw contents) and x̃ = M⁻¹·x̂ has hard labels.
    """
    present = np.flatnonzero((soft > RATIO_ATOL).any(axis=0))
    if len(present) != len(soft):
        raise ValueError(f"inverse-Mixup of {len(soft)} mixed samples needs exactly {len(soft)} labels "
                       f"among them, found {len(present)}; group samples whose label pairs close a cycle "
                       f"(for two: a symmetric pair (a, b) and (b, a))")
    return soft[:, present], present


def invert_group(x_hat: np.ndarray, soft: np.ndarray, devices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inverse-Mixup of n_s mixed samples of n_s different devices: (x̃ (n_s, ...), hard labels (n_s,)).

    x̃ = M⁻¹·x̂. For n_s = 2 with ratios (γ, 1−γ) and (1−γ, γ) this is the closed form of the
    seeds, x̃_a = (γ·x̂_c − (1−γ)·x̂_c′)/(2γ−1) and x̃_b = (γ·x̂_c′ − (1−γ)·x̂_c)/(2γ−1).
    """
    devices = np.asarray(devices)
    if len(np.unique(devices)) != len(devices):
        raise ValueError(f"inverse-Mixup combines samples of devices {devices.tolist()}, two of them "
                       f"the same device; that would undo its Mixup and expose raw samples — "
                       f"combine samples of different devices only")
    m, present = ratio_matrix(np.asarray(soft, dtype=np.float64))
    if abs(np.linalg.det(m)) <= RATIO_ATOL:
        raise ValueError("the mixing ratios of this group are singular (γ = 0.5?); inverse-Mixup needs "
                       "γ ≠ 0.5 and an invertible ratio matrix")
    inv = np.linalg.inv(m)
    flat = np.asarray(x_hat, dtype=np.float64).reshape(len(m), -1)
    return (inv @ flat).reshape(np.shape(x_hat)), present


def label_edges(soft: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per mixed sample, (label with weight γ, label with weight 1−γ): read from the soft label only."""
    masked = np.where(soft > RATIO_ATOL, soft, np.inf)
    return masked.argmin(axis=1), soft.argmax(axis=1)


def eligible_groups(mixed: MixedSamples, n_s: int) -> np.ndarray:
    """Every group of n_s mixed samples from n_s different devices whose label pairs form a cycle
    a₁→a₂→…→a_{n_s}→a₁ (for n_s = 2: symmetric pairs (a, b), (b, a)), as rows of indices.

    A cycle of γ < 0.5 mixes always has an invertible ratio matrix. Each cycle is listed once,
    starting from its smallest label.
    """
    if n_s < 2:
        raise ValueError(f"inverse-Mixup combines n_s ≥ 2 mixed samples, got n_s={n_s}")
    lo, hi = label_edges(mixed.soft)
    by_edge: dict[tuple[int, int], list[int]] = {}
    for k, edge in enumerate(zip(lo.tolist(), hi.tolist())):
        by_edge.setdefault(edge, []).append(k)
    labels = sorted({a for a, _ in by_edge} | {b for _, b in by_edge})
    groups = []
    for start in labels:
        for rest in permutations([a for a in labels if a > start], n_s - 1):
            cycle = (start, *rest)
            edges = [(cycle[t], cycle[(t + 1) % n_s]) for t in range(n_s)]
            if all(e in by_edge for e in edges):
                groups += [g for g in product(*(by_edge[e] for e in edges))
                           if len(set(mixed.device[list(g)].tolist())) == n_s]
    return np.array(groups, dtype=np.int64).reshape(-1, n_s)


def inverse_mixup(mixed: MixedSamples, n_inv: int | None, rng: np.random.Generator | int,
                  *, n_s: int = 2) -> InverseSamples:
    """The server's hard-labelled samples from the uploaded mixed samples: ``n_inv`` of them, or
    all it can build when fewer exist (``len`` of the result says; the caller records the
    shortfall, e.g. when uploads were lost on the channel).

    Candidates are (group, target label) for every eligible group (:func:`eligible_groups`);
    each group yields n_s samples, so n_inv may exceed n_mix. ``n_inv`` candidates are drawn
    uniformly without replacement (``None``: all of them, in random order).
    """
    if n_inv is not None and n_inv < 1:
        raise ValueError(f"n_inv must be at least 1 (or None for all), got {n_inv}")
    groups = eligible_groups(mixed, n_s)
    n_cand = len(groups) * n_s
    if n_cand == 0:
        return InverseSamples(np.zeros((0, *mixed.x.shape[1:])), np.zeros(0, np.int64), np.zeros((0, n_s), np.int64))
    pick = np.random.default_rng(rng).permutation(n_cand)[:n_cand if n_inv is None else n_inv]
    inverted = {g: invert_group(mixed.x[groups[g]], mixed.soft[groups[g]], mixed.device[groups[g]])
                for g in np.unique(pick // n_s).tolist()}
    g, t = pick // n_s, pick % n_s
    return InverseSamples(x=np.stack([inverted[a][0][b] for a, b in zip(g.tolist(), t.tolist())]),
                          label=np.array([inverted[a][1][b] for a, b in zip(g.tolist(), t.tolist())]),
                          members=groups[g])

"""Sample privacy of Mixup and Mix2up seed samples [Seo et al. 2022, §3; Oh et al. 2020, after their ref. on similarity].

Sample privacy of a sample the server holds is log(min_k ‖x̂ − x_k‖) over the raw samples x_k
it was made from (natural log, L2 norm over all pixels): the closer it stays to some raw
sample, the lower. For Mixup the sources are x_i and x_j of the device; for Mix2up (an
inverse-mixed sample) they are all 2·n_s raw samples behind its n_s mixed samples, so the
figure is the distance to the *nearest* raw sample it could leak.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from frd.classification.mixup import InverseSamples, MixedSamples, inverse_mixup, mixup
from frd.errors import FrdError
from frd.seeding import derive_seed

PRIVACY_GAMMAS = (0.1, 0.2, 0.3, 0.4, 0.45)
"""Mixing ratios of the default privacy table."""

TABLE_COLUMNS = ["gamma", "scheme", "mean", "std", "n"]


def sample_privacy(x_hat: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """log(min_k ‖x̂ − sources[k]‖) per sample: ``x_hat`` (n, ...), ``sources`` (n, k, ...) → (n,).

    A sample equal to one of its sources scores −inf (nothing hidden).
    """
    x_hat = np.asarray(x_hat, dtype=np.float64)
    diff = np.asarray(sources, dtype=np.float64) - x_hat[:, None]
    dist = np.sqrt((diff.reshape(*diff.shape[:2], -1) ** 2).sum(axis=2)).min(axis=1)
    with np.errstate(divide="ignore"):
        return np.log(dist)


def mixup_sources(mixed: MixedSamples, data: Mapping[int, np.ndarray]) -> np.ndarray:
    """Raw x_i and x_j of each mixed sample: (n, 2, ...), from each device's raw ``data``."""
    return np.stack([data[d][ij] for d, ij in zip(mixed.device.tolist(), mixed.index)])


def inverse_sources(inv: InverseSamples, mixed: MixedSamples, data: Mapping[int, np.ndarray]) -> np.ndarray:
    """All raw samples behind each inverse-mixed sample: (n, 2·n_s, ...)."""
    raw = mixup_sources(mixed, data)
    return raw[inv.members].reshape(len(inv), -1, *raw.shape[2:])


def privacy_table(devices: Sequence[tuple[np.ndarray, np.ndarray]], *, n_classes: int,
                  gammas: Sequence[float] = PRIVACY_GAMMAS, n_mix: int = 50, seed: int = 0) -> pd.DataFrame:
    """Sample privacy over γ: ``Mixup`` (device 0's mixed samples) and ``Mix2up`` (every
    inverse-mixed sample the server can make from devices 0 and 1's mixed samples, n_s = 2).

    ``devices`` holds (x, labels) per device. Each device draws the same pairs for every γ
    (its seed does not depend on γ), so rows differ by γ only. ``std`` is the sample std.
    """
    if len(devices) < 2:
        raise FrdError(f"the privacy table needs two devices (Mix2up combines across devices), "
                       f"got {len(devices)}")
    data = {d: np.asarray(x, dtype=np.float64) for d, (x, _) in enumerate(devices[:2])}
    rows = []
    for gamma in gammas:
        mixed = [mixup(x, y, n_mix, gamma, derive_seed(seed, d), n_classes=n_classes, device=d)
                 for d, (x, y) in enumerate(devices[:2])]
        both = MixedSamples.concat(mixed)
        inv = inverse_mixup(both, None, seed)
        scores = {"Mixup": sample_privacy(mixed[0].x, mixup_sources(mixed[0], data)),
                  "Mix2up": sample_privacy(inv.x, inverse_sources(inv, both, data))}
        rows += [dict(gamma=gamma, scheme=k, mean=v.mean(), std=v.std(ddof=1), n=len(v))
                 for k, v in scores.items()]
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)

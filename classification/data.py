"""Datasets as 8-bit images: a pool the devices draw their local data from, and a held-out test set.

digits (scikit-learn's bundled 8×8 set) needs no files. MNIST is read from its IDX files and
CIFAR-10 from its python batches; both are fetched from the usual mirrors only when asked.
A dataset without an official training split (digits, or MNIST when only the 10,000-image
test files are present) is split reproducibly into pool and test by ``split_seed``.
"""
from __future__ import annotations

import hashlib
import importlib.util
import math
import pickle
import shutil
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from frd.classification.idx import read_idx
from frd.errors import FrdError

REPO_ROOT = Path(__file__).resolve().parents[1]
USER_CACHE = Path.home() / ".cache" / "frd"
"""Where dataset files go when there is no ``../shared/data`` beside the repo (never the repo)."""

MNIST_MIRRORS = ("https://ossci-datasets.s3.amazonaws.com/mnist/", "https://storage.googleapis.com/cvdf-datasets/mnist/")
MNIST_MD5 = {
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
}
CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
CIFAR10_FILES = tuple(f"data_batch_{i}" for i in range(1, 6)) + ("test_batch",)

Split = tuple[np.ndarray, np.ndarray]
"""uint8 images [N, C, H, W] and int64 labels [N]."""


@dataclass(frozen=True)
class Dataset:
    """8-bit images (uint8, [N, C, H, W]) so raw-sample uploads cost 8 bits a pixel."""

    name: str
    x_pool: torch.Tensor
    y_pool: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    classes: int

    @property
    def image_shape(self) -> tuple[int, int, int]:
        channels, height, width = self.x_pool.shape[1:]
        return int(channels), int(height), int(width)

    @staticmethod
    def inputs(x: torch.Tensor) -> torch.Tensor:
        """Model inputs: pixels scaled to [0, 1]."""
        return x.float().div_(255.0)


def default_data_dir(name: str) -> Path:
    """``../shared/data/<name>`` beside the repo when it exists, else a per-user cache (never the repo)."""
    shared = REPO_ROOT.parent / "shared" / "data" / name
    return shared if shared.is_dir() else USER_CACHE / name


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _fetch(urls: list[str], dest: Path, md5: str, what: str) -> None:
    """Download ``dest`` from the first mirror that answers, checking its md5; else say what to do."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    reasons = []
    for url in urls:
        try:
            with urllib.request.urlopen(url, timeout=20) as response, open(tmp, "wb") as out:
                shutil.copyfileobj(response, out)
        except OSError as exc:
            reasons.append(f"{url}: {getattr(exc, 'reason', exc)}")
            continue
        if _md5(tmp) == md5:
            tmp.replace(dest)
            return
        reasons.append(f"{url}: md5 mismatch")
    tmp.unlink(missing_ok=True)
    raise FrdError(f"could not download {dest.name} ({'; '.join(reasons)}); {what}")


def _find(data_dir: Path, stem: str) -> Path | None:
    for name in (stem, stem + ".gz"):
        if (data_dir / name).is_file():
            return data_dir / name
    return None


def _mnist(data_dir: Path, download: bool) -> tuple[Split | None, Split]:
    """The official test set is required; the official training set is used when present."""
    how = (f"put t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz (optionally the train-* pair) "
           f"in {data_dir} — from {MNIST_MIRRORS[0]} — or pass --data-dir DIR")
    if download:
        for name, md5 in MNIST_MD5.items():
            if _find(data_dir, name.removesuffix(".gz")) is None:
                _fetch([m + name for m in MNIST_MIRRORS], data_dir / name, md5, how)

    def pair(prefix: str) -> Split | None:
        images, labels = _find(data_dir, f"{prefix}-images-idx3-ubyte"), _find(data_dir, f"{prefix}-labels-idx1-ubyte")
        if images is None or labels is None:
            return None
        x, y = read_idx(images), read_idx(labels)
        if x.ndim != 3 or len(x) != len(y):
            raise FrdError(f"{images} and {labels} do not match (images {x.shape}, labels {y.shape}); fetch them again")
        return x[:, None].astype(np.uint8), y.astype(np.int64)

    test = pair("t10k")
    if test is None:
        raise FrdError(f"MNIST files not found in {data_dir}: {how}, or add --download")
    return pair("train"), test


def _cifar10(data_dir: Path, download: bool) -> tuple[Split | None, Split]:
    """The five training batches and the test batch, in ``data_dir`` or its cifar-10-batches-py/."""
    how = (f"put the CIFAR-10 python batches ({', '.join(CIFAR10_FILES)}) in {data_dir} — from {CIFAR10_URL} — "
           "or pass --data-dir DIR")
    folder = next((d for d in (data_dir, data_dir / "cifar-10-batches-py") if (d / "test_batch").is_file()), None)
    if folder is None and download:
        archive = data_dir / "cifar-10-python.tar.gz"
        _fetch([CIFAR10_URL], archive, CIFAR10_MD5, how)
        with tarfile.open(archive) as tar:
            tar.extractall(data_dir, filter="data")
        folder = data_dir / "cifar-10-batches-py"
    if folder is None or not all((folder / f).is_file() for f in CIFAR10_FILES):
        raise FrdError(f"CIFAR-10 files not found in {data_dir}: {how}, or add --download")

    def batches(names: tuple[str, ...]) -> Split:
        parts = []
        for name in names:
            with open(folder / name, "rb") as f:
                parts.append(pickle.load(f, encoding="bytes"))
        x = np.concatenate([p[b"data"] for p in parts]).reshape(-1, 3, 32, 32).astype(np.uint8)
        return x, np.concatenate([p[b"labels"] for p in parts]).astype(np.int64)

    return batches(CIFAR10_FILES[:-1]), batches(CIFAR10_FILES[-1:])


def _digits(data_dir: Path, download: bool) -> tuple[Split | None, Split]:
    """scikit-learn's 8×8 digits; its 0–16 grey levels are rescaled to 0–255 like every other dataset.
    Read from the file scikit-learn ships, as its ``load_digits`` reads it, without importing
    scikit-learn (about a second)."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise FrdError("the digits dataset is scikit-learn's: pip install scikit-learn")
    data = np.loadtxt(Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz", delimiter=",")
    x = np.rint(data[:, :-1].reshape(-1, 8, 8) * (255.0 / 16.0)).astype(np.uint8)[:, None]
    return None, (x, data[:, -1].astype(np.int64))


def stratified_split(labels: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(pool, test) indices: scikit-learn's ``train_test_split(test_size=test_fraction,
    random_state=seed, stratify=labels)`` draw for draw (its ``StratifiedShuffleSplit``, 1.9), so
    the splits of results saved before are kept, without importing scikit-learn (tested against it)."""
    rng = np.random.RandomState(seed)
    n_test = math.ceil(test_fraction * len(labels))
    _, codes, counts = np.unique(labels, return_inverse=True, return_counts=True)
    members = np.split(np.argsort(codes, kind="stable"), np.cumsum(counts)[:-1])
    n_pool = _approximate_mode(counts, len(labels) - n_test, rng)
    n_held = _approximate_mode(counts - n_pool, n_test, rng)
    pool: list[int] = []
    test: list[int] = []
    for i, count in enumerate(counts):
        order = members[i].take(rng.permutation(count), mode="clip")
        pool.extend(order[:n_pool[i]])
        test.extend(order[n_pool[i]:n_pool[i] + n_held[i]])
    return rng.permutation(pool), rng.permutation(test)


def _approximate_mode(counts: np.ndarray, draws: int, rng: np.random.RandomState) -> np.ndarray:
    """Per class, its share of ``draws`` rounded down, then one more for the largest remainders,
    ties broken by ``rng`` (scikit-learn's ``_approximate_mode``)."""
    continuous = counts / counts.sum() * draws
    floored = np.floor(continuous)
    need = int(draws - floored.sum())
    remainder = continuous - floored
    for value in np.sort(np.unique(remainder))[::-1] if need > 0 else ():
        (ties,) = np.where(remainder == value)
        add = min(len(ties), need)
        floored[rng.choice(ties, size=add, replace=False)] += 1
        need -= add
        if need == 0:
            break
    return floored.astype(int)


DATASETS: dict[str, Callable[[Path, bool], tuple[Split | None, Split]]] = {
    "digits": _digits, "mnist": _mnist, "cifar10": _cifar10,
}
"""Loaders by name: ``(data_dir, download) → (official training split or None, test split)``."""


def load_dataset(name: str, data_dir: str | Path | None = None, *, download: bool = False,
                 test_fraction: float = 0.2, split_seed: int = 0) -> Dataset:
    """Load ``name``; without an official training split, hold out a stratified ``test_fraction``."""
    if name not in DATASETS:
        raise FrdError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")
    if not 0.0 < test_fraction < 1.0:
        raise FrdError(f"test fraction must be in (0, 1), got {test_fraction}")
    train, test = DATASETS[name](Path(data_dir) if data_dir else default_data_dir(name), download)
    if train is None:
        pool, held = stratified_split(test[1], test_fraction, split_seed)
        train, test = (test[0][pool], test[1][pool]), (test[0][held], test[1][held])
    classes = int(max(train[1].max(), test[1].max())) + 1
    return Dataset(name, torch.from_numpy(np.ascontiguousarray(train[0])), torch.from_numpy(train[1]),
                   torch.from_numpy(np.ascontiguousarray(test[0])), torch.from_numpy(test[1]), classes)

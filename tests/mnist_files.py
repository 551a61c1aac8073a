"""MNIST-format files written by the tests: the IDX format as MNIST ships it (magic number
``0 0 type ndim``, big-endian dimensions, big-endian data; gzip-compressed as downloaded), so
that what reads them is the real loader (``frd.classification.data``), never a stand-in."""
from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np


def idx_bytes(array: np.ndarray, code: int) -> bytes:
    """``array`` as an IDX file: type ``code`` (0x08 unsigned byte, 0x0C int32, …)."""
    header = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


def write_mnist(folder: Path, prefix: str, images: np.ndarray, labels: np.ndarray, gz: bool = True) -> None:
    """``<prefix>-images-idx3-ubyte[.gz]`` and ``<prefix>-labels-idx1-ubyte[.gz]`` in ``folder``."""
    for kind, array, ndim in (("images", images, 3), ("labels", labels, 1)):
        raw = idx_bytes(array.astype(np.uint8), 0x08)
        name = f"{prefix}-{kind}-idx{ndim}-ubyte"
        if gz:
            (folder / f"{name}.gz").write_bytes(gzip.compress(raw))
        else:
            (folder / name).write_bytes(raw)


def tiny_mnist(folder: Path, train: int = 300, test: int = 100, seed: int = 0) -> Path:
    """A small, learnable MNIST in ``folder``: 28×28 uint8 images whose label sets the brightness
    of one of ten horizontal bands, plus noise; the official train and t10k pairs, gzipped."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for prefix, count in (("train", train), ("t10k", test)):
        labels = np.arange(count) % 10
        images = rng.integers(0, 60, size=(count, 28, 28))
        for label in range(10):
            images[labels == label, 2 * label + 4:2 * label + 6, :] += 180
        write_mnist(folder, prefix, images, labels)
    return folder

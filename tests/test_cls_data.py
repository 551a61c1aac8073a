"""IDX reader, dataset loaders and their errors, on tiny files the tests write."""
from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import numpy as np
import pytest
from mnist_files import idx_bytes, write_mnist

from frd.classification import data as data_module
from frd.classification.data import load_dataset
from frd.classification.idx import read_idx
from frd.errors import FrdError


@pytest.mark.parametrize("gz", [False, True])
def test_idx_reader_returns_the_array_written(tmp_path, gz):
    images = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    raw = idx_bytes(images, 0x08)
    path = tmp_path / "x.idx"
    path.write_bytes(gzip.compress(raw) if gz else raw)
    out = read_idx(path)
    assert out.shape == (2, 3, 4) and out.dtype == np.uint8
    assert out[1, 2, 3] == 23 and out[0, 0, 1] == 1


def test_idx_reader_handles_big_endian_wider_types(tmp_path):
    values = np.array([[1, -2], [300, 70000]], dtype=np.int32)
    (tmp_path / "i.idx").write_bytes(idx_bytes(values, 0x0C))
    assert read_idx(tmp_path / "i.idx").tolist() == [[1, -2], [300, 70000]]


@pytest.mark.parametrize("raw, message", [
    (b"\x08\x03\x00\x00", "bad magic"),
    (b"\x00\x00\x08\x01\x00\x00\x00\x05\x01\x02", "header announces"),
    (b"\x00\x00\x08\x03\x00\x00", "truncated"),
])
def test_idx_reader_rejects_damaged_files(tmp_path, raw, message):
    (tmp_path / "bad").write_bytes(raw)
    with pytest.raises(FrdError, match=message):
        read_idx(tmp_path / "bad")


def test_mnist_test_files_alone_are_split_reproducibly_and_stratified(tmp_path):
    labels = np.repeat(np.arange(10), 10)
    images = np.broadcast_to(np.arange(100, dtype=np.uint8)[:, None, None], (100, 28, 28)).copy()
    write_mnist(tmp_path, "t10k", images, labels, gz=False)
    a = load_dataset("mnist", tmp_path, test_fraction=0.2, split_seed=3)
    b = load_dataset("mnist", tmp_path, test_fraction=0.2, split_seed=3)
    assert a.x_pool.shape == (80, 1, 28, 28) and a.x_test.shape == (20, 1, 28, 28) and a.classes == 10
    assert np.bincount(a.y_test.numpy()).tolist() == [2] * 10
    assert (a.x_pool == b.x_pool).all() and (a.y_test == b.y_test).all()
    pool_ids, test_ids = set(a.x_pool[:, 0, 0, 0].tolist()), set(a.x_test[:, 0, 0, 0].tolist())
    assert not pool_ids & test_ids and len(pool_ids | test_ids) == 100, "pool and test split the images"
    assert (a.y_pool.numpy() == a.x_pool[:, 0, 0, 0].numpy() // 10).all(), "labels stay with their images"


def test_mnist_training_files_when_present_are_the_pool(tmp_path):
    write_mnist(tmp_path, "t10k", np.zeros((6, 28, 28)), np.arange(6) % 3)
    write_mnist(tmp_path, "train", np.ones((9, 28, 28)), np.arange(9) % 3)
    d = load_dataset("mnist", tmp_path)
    assert len(d.y_pool) == 9 and len(d.y_test) == 6 and int(d.x_pool.min()) == 1


def test_missing_mnist_files_name_the_files_and_where_to_get_them(tmp_path):
    with pytest.raises(FrdError, match="MNIST files not found") as err:
        load_dataset("mnist", tmp_path / "empty")
    text = str(err.value)
    assert "t10k-images-idx3-ubyte.gz" in text and "https://" in text and "--download" in text
    assert "\n" not in text


def test_download_without_network_fails_with_the_same_advice(tmp_path, monkeypatch):
    monkeypatch.setattr(data_module, "MNIST_MIRRORS", ("http://127.0.0.1:9/",))
    with pytest.raises(FrdError, match="could not download") as err:
        load_dataset("mnist", tmp_path, download=True)
    text = str(err.value)
    assert "could not download" in text and "t10k-images-idx3-ubyte.gz" in text and str(tmp_path) in text
    assert not list(tmp_path.glob("*.tmp")), "no partial file is left behind"


def test_cifar10_python_batches(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    for i, name in enumerate(data_module.CIFAR10_FILES):
        batch = {b"data": np.full((4, 3072), i, dtype=np.uint8), b"labels": [0, 1, 2, 9]}
        (folder / name).write_bytes(pickle.dumps(batch))
    d = load_dataset("cifar10", tmp_path)
    assert d.x_pool.shape == (20, 3, 32, 32) and d.x_test.shape == (4, 3, 32, 32)
    assert int(d.x_test.max()) == 5 and d.classes == 10


def test_missing_cifar10_files_are_named(tmp_path):
    with pytest.raises(FrdError, match="data_batch_1.*test_batch"):
        load_dataset("cifar10", tmp_path)


def test_digits_are_8bit_images_without_files():
    d = load_dataset("digits")
    assert d.image_shape == (1, 8, 8) and int(d.x_pool.max()) == 255 and d.classes == 10
    assert len(d.y_pool) + len(d.y_test) == 1797


@pytest.mark.parametrize("name, kwargs, message", [
    ("emnist", {}, "unknown dataset 'emnist'"),
    ("digits", {"test_fraction": 1.0}, "test fraction"),
])
def test_bad_dataset_arguments(name, kwargs, message):
    with pytest.raises(FrdError, match=message):
        load_dataset(name, **kwargs)


def test_the_data_path_default_points_into_the_tests_own_folders(tmp_path_factory):
    """Guard of the fresh-clone promise: without a fixture, no test finds dataset files anywhere."""
    assert data_module.default_data_dir("mnist").is_relative_to(tmp_path_factory.getbasetemp())
    with pytest.raises(FrdError, match="MNIST files not found"):
        load_dataset("mnist")


def test_the_tiny_mnist_fixture_is_read_by_the_real_loader_from_the_default_path(mnist_dir):
    d = load_dataset("mnist")
    assert data_module.default_data_dir("mnist") == mnist_dir and sorted(p.name for p in mnist_dir.iterdir()) == [
        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", "train-images-idx3-ubyte.gz",
        "train-labels-idx1-ubyte.gz"]
    assert d.x_pool.shape == (300, 1, 28, 28) and d.x_test.shape == (100, 1, 28, 28) and d.classes == 10
    assert np.bincount(d.y_test.numpy()).tolist() == [10] * 10


def test_digits_and_their_split_are_scikit_learns_without_importing_it():
    """The digits read from scikit-learn's file and the stratified hold-out drawn here are those of
    ``load_digits`` and ``train_test_split(stratify=…)``: the splits of saved results stay."""
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    from frd.classification.data import _digits, stratified_split

    _, (x, y) = _digits(Path("."), False)
    bunch = load_digits()
    assert np.array_equal(x, np.rint(bunch.images * (255.0 / 16.0)).astype(np.uint8)[:, None])
    assert np.array_equal(y, bunch.target)
    ties = np.array([0] * 7 + [1] * 7 + [2] * 3 + [3] * 3)  # equal remainders: the tie-break draws
    for labels in (y, ties):
        for seed, fraction in ((0, 0.2), (3, 0.33), (7, 0.5)):
            expected = train_test_split(np.arange(len(labels)), test_size=fraction, random_state=seed, stratify=labels)
            assert all(map(np.array_equal, stratified_split(labels, fraction, seed), expected))

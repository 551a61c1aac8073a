"""Fixtures common to the test files: the digits data, a tiny MNIST the suite writes (no test
reads dataset files from outside its temporary folders), one torch thread, a channel that drops
device 1's uploads, and a spy that keeps the method objects a run builds."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from mnist_files import tiny_mnist

from frd.channel import CHANNELS, IdealChannel, Transfer
from frd.classification import data as data_module
from frd.classification.data import load_dataset
from frd.classification.methods import CLS_METHODS


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    """The tensors are tiny and the machines shared: one thread avoids pool overhead."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def no_dataset_files_outside_the_tests(monkeypatch, tmp_path_factory):
    """The data-path default points into an empty folder for every test, so that no test reads
    a dataset from beside the checkout or from the user's cache: a fresh clone passes as this one does."""
    nowhere = tmp_path_factory.getbasetemp() / "no-datasets"
    monkeypatch.setattr(data_module, "REPO_ROOT", nowhere / "repo")
    monkeypatch.setattr(data_module, "USER_CACHE", nowhere / "cache")


@pytest.fixture(scope="session")
def mnist_cache(tmp_path_factory) -> Path:
    """A per-user dataset cache made for the tests, holding a tiny MNIST in ``mnist/``
    (``mnist_files.tiny_mnist``: the real IDX format, written here)."""
    cache = tmp_path_factory.mktemp("dataset-cache")
    tiny_mnist(cache / "mnist")
    return cache


@pytest.fixture
def mnist_dir(mnist_cache, monkeypatch) -> Path:
    """The tiny MNIST's folder, which is also the data-path default during the test: the cache
    ``default_data_dir`` falls back to when no dataset folder stands beside the checkout."""
    monkeypatch.setattr(data_module, "USER_CACHE", mnist_cache)
    return mnist_cache / "mnist"


@pytest.fixture(scope="session")
def digits():
    return load_dataset("digits")


class DropDeviceOneUplink(IdealChannel):
    """Every upload of participant 1 is lost; everything else arrives."""

    def uplink(self, bits):
        return {p: Transfer(0.0, p != 1) for p in bits}


@pytest.fixture
def drop1(monkeypatch):
    """Registers the channel ``drop1`` (a ``DropDeviceOneUplink``) for one test."""
    monkeypatch.setitem(CHANNELS, "drop1", lambda seed, **options: DropDeviceOneUplink())
    return "drop1"


@pytest.fixture
def made(monkeypatch):
    """``made(name)`` swaps the registered class for a subclass that records every instance in
    the returned list."""
    def spy(name: str) -> list:
        built: list = []
        original = CLS_METHODS[name]

        class Spy(original):  # type: ignore[valid-type, misc]
            def __init__(self, ctx):
                super().__init__(ctx)
                built.append(self)

        monkeypatch.setitem(CLS_METHODS, name, Spy)
        return built
    return spy

"""Fixtures shared across test files: the digits data, one torch thread, a channel that drops
device 1's uploads, and a spy that keeps the method objects a run builds."""
from __future__ import annotations

import pytest
import torch

from frd.channel import CHANNELS, IdealChannel, Transfer
from frd.classification.data import load_dataset
from frd.classification.methods import CLS_METHODS


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    """The tensors are tiny and the machines shared: one thread avoids pool overhead."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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

"""Groups a worker process runs in ``tests/test_workers.py``, in a module of their own so that a
spawned worker imports only this and ``frd.errors`` (not the test module and all it imports)."""
import os

from frd.errors import FrdError


def refuses(runs, shared, items):
    yield 0, items[0]
    if items == ["b"]:
        raise FrdError(f"bad input in group {items}")


def has_a_bug(runs, shared, items):
    raise ValueError("a bug")
    yield  # a generator, as a group is


def dies(runs, shared, items):
    os._exit(3)
    yield

"""The wire codec: every payload every method sends comes back exactly, indices packed to their width."""
import numpy as np
import pytest

import frd.classification.runner
import frd.rl.runner
from frd.classification.methods import cls_config
from frd.classification.runner import run_seed
from frd.errors import FrdError
from frd.payload import FLOAT_BITS, PIXEL_BITS, Payload, index_bits
from frd.rl.config import rl_config
from frd.rl.runner import simulate
from frd.wire import decode, encode

RL_TINY = dict(agents=2, hidden=8, max_episodes=6, period=2, target=1e9)
CLS_TINY = dict(rounds=1, iterations_per_round=2, devices=3)
DD_TINY = dict(rounds=1, devices=3, width=8, ipc=2, distill_iterations=2, server_epochs=1)


def assert_same(a: Payload, b: Payload) -> None:
    assert (a.kind, a.entries, list(a.arrays)) == (b.kind, b.entries, list(b.arrays))
    for name, x in a.arrays.items():
        y = b.arrays[name]
        assert (y.values.dtype, y.values.shape, y.bits_per_element) == (x.values.dtype, x.values.shape, x.bits_per_element)
        np.testing.assert_array_equal(y.values, x.values)  # NaN == NaN here
    assert a.bits == b.bits


def test_round_trip_of_every_dtype_with_indices_packed_to_their_width():
    cells = np.array([0, 5, 17, 1023, 3], dtype=np.int64)
    payload = Payload.of("mixed", 5, cells=(cells, index_bits(1024)), policy=(np.random.rand(5, 2).astype(np.float32), 32),
                         pixels=(np.arange(12, dtype=np.uint8).reshape(3, 4), PIXEL_BITS),
                         nan=(np.array([np.nan, 1.0]), 64), flags=(np.array([True, False]), 1),
                         empty=(np.zeros((0, 3), np.float32), FLOAT_BITS), wide=(np.array([-1, 7]), 3))
    data = encode(payload)
    assert_same(payload, decode(data))
    assert len(encode(Payload.of("c", 5, cells=(cells, 10)))) < len(encode(Payload.of("c", 5, cells=(cells, 64))))


def test_a_packed_index_costs_its_declared_width_on_the_wire():
    data = encode(Payload.of("c", 800, cells=(np.arange(800, dtype=np.int64) % 16, 4)))
    header = int.from_bytes(data[4:8], "little")
    assert len(data) - 8 - header == 800 * 4 // 8


@pytest.mark.parametrize("data, match", [(b"nonsense", "bad magic"), (encode(Payload.of("k", 1, a=(np.ones(3), 64))) + b"x",
                                                                        "trailing bytes")])
def test_what_is_not_a_payload_is_refused(data, match):
    with pytest.raises(FrdError, match=match):
        decode(data)


def test_object_arrays_have_no_wire_form():
    with pytest.raises(FrdError, match="no wire form"):
        encode(Payload.of("k", 1, a=(np.array([{}], dtype=object), 8)))


@pytest.fixture
def through_the_wire(monkeypatch):
    """Every payload of every round goes through encode/decode (checked exact) on its way; the
    kinds seen are returned."""
    kinds: set[str] = set()

    def wire(payload: Payload) -> Payload:
        back = decode(encode(payload))
        assert_same(payload, back)
        kinds.add(payload.kind)
        return back

    class Wired:
        def __init__(self, exchange):
            self.exchange = exchange

        def upload(self, p):
            return wire(self.exchange.upload(p))

        def aggregate(self, uploads, participants):
            return {p: wire(d) for p, d in self.exchange.aggregate(uploads, participants).items()}

        def download(self, p, payload):
            self.exchange.download(p, payload)

        def finish_round(self):
            self.exchange.finish_round()

    for module in (frd.classification.runner, frd.rl.runner):
        original = module.run_round
        monkeypatch.setattr(module, "run_round", lambda exchange, *a, _o=original, **k: _o(Wired(exchange), *a, **k))
    return kinds


def test_every_rl_payload_kind_round_trips(through_the_wire):
    for method, options in [("frl", {}), ("pd", {}), ("frd", {}), ("frd", {"codec": "paper", "weighting": "count"}),
                            ("mixfrd", {})]:
        simulate(rl_config(method, **RL_TINY, **options), [(method, 0)], lambda tables: None)
    assert through_the_wire >= {"weights", "global_weights", "memory", "global_memory", "proxy_memory",
                                "global_proxy_memory", "mixed_proxy_memory"}


def test_every_classification_payload_kind_round_trips(through_the_wire, digits):
    for method in ("fl", "fd", "fld", "mix2fld"):
        run_seed(cls_config(method, **CLS_TINY, n_mix=5, server_iterations=2) if "fld" in method
                 else cls_config(method, **CLS_TINY), 0, digits)
    run_seed(cls_config("feddualmatch", **DD_TINY), 0, digits)
    assert through_the_wire == {"weights", "outputs", "seed_samples", "mixed_samples", "synthetic"}

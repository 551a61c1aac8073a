"""What keeps a run's memory linear in its agents (issue 44 §4): PD's diagnostic cross-entropy is
taken in chunks of rows, bit for bit the one forward's."""
import numpy as np
import pytest
import torch

import frd.agents.a2c as a2c
from frd.agents.a2c import A2CPopulation, cross_entropy_chunk, recipe


def test_chunks_are_multiples_of_16_rows_within_the_budget():
    assert cross_entropy_chunk(701, 8) == (1 << 22) // (701 * 8) // 16 * 16 == 736
    assert cross_entropy_chunk(14000, 64) == 16 and cross_entropy_chunk(0, 64) == 1 << 22


@pytest.mark.parametrize("hidden, activation", [(64, "tanh"), (8, "relu"), (5, "tanh")])
def test_cross_entropy_in_chunks_is_the_one_forwards_bit_for_bit(hidden, activation, monkeypatch):
    rng = np.random.default_rng(0)
    pop = A2CPopulation(list(range(70)), 4, 2, recipe("nstep", hidden=hidden, activation=activation))
    pop.actor.data += torch.as_tensor(rng.normal(0, 0.3, pop.actor.data.shape), dtype=torch.float32)
    states = rng.normal(size=(1001, 4)).astype(np.float32)
    probs = rng.dirichlet([1, 1], 1001).astype(np.float32)
    rows = rng.permutation(70)[:53].tolist()
    monkeypatch.setattr(a2c, "CROSS_ENTROPY_ELEMENTS", 1 << 40)
    whole = pop.cross_entropy(rows, states, probs)
    for chunk in (16, 32):
        monkeypatch.setattr(a2c, "CROSS_ENTROPY_ELEMENTS", 1001 * hidden * chunk)
        assert cross_entropy_chunk(1001, hidden) == chunk
        np.testing.assert_array_equal(pop.cross_entropy(rows, states, probs), whole)

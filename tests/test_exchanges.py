"""FRL, PD and FRD exchanges against hand computation (the payload accounting of frd/README.md)."""
import gymnasium as gym
import numpy as np
import pytest

from frd.agents.a2c import A2CPopulation, recipe
from frd.envs.grid import StateGrid
from frd.errors import FrdError
from frd.exchange import run_round
from frd.ledger import Ledger
from frd.payload import Payload, index_bits
from frd.rl.methods import RoundContext, RunSetup
from frd.rl.methods.frd import FederatedReinforcementDistillation as FRD
from frd.rl.methods.frd import global_proxy_memory, local_proxy_memory
from frd.rl.methods.frl import FederatedRL as FRL
from frd.rl.methods.pd import PolicyDistillation as PD

GRID = StateGrid(np.zeros(2), np.ones(2), intervals=2)  # 4 cells: (0,0)=0 (0,1)=1 (1,0)=2 (1,1)=3


def _strategy(cls, pop, memories=None, box=(0.0, 1.0), **options):
    """A strategy over ``pop``'s lanes (agent a = row a) on a d-dimensional Box(box) env."""
    setup = RunSetup("Test-v0", gym.spaces.Box(*box, (pop.actor.shapes[0][0][0],)), 2, pop.lanes, 0)
    strategy = cls(cls.Options(**options), setup)
    strategy.begin_round(RoundContext(pop, {a: a for a in range(pop.lanes)}, memories or {},
                                      np.random.default_rng(0)))
    return strategy


def _round(strategy, agents):
    ledger = Ledger()
    run_round(strategy, agents, run_id="r", round_=1, ledger=ledger)
    return ledger.frame()


@pytest.mark.parametrize("h", [16, 64, 128])
def test_frl_bits_for_a_4_h_h_2_actor(h):
    pop = A2CPopulation([1, 2], 4, 2, recipe("nstep", hidden=h))
    ledger = _round(_strategy(FRL, pop), [0, 1])
    assert set(ledger["bits"]) == {(h * h + 8 * h + 2) * 32}
    assert list(ledger["direction"]) == ["up", "up", "down", "down"]


def test_frl_average_of_two_actors_is_elementwise_mean():
    pop = A2CPopulation([1, 2], 4, 2, recipe("nstep", hidden=8))
    a, b = pop.actor_state(0), pop.actor_state(1)
    critic_before = pop.critic_state(0)
    _round(_strategy(FRL, pop), [0, 1])
    for k in a:
        np.testing.assert_allclose(pop.actor_state(0)[k], (a[k] + b[k]) / 2, rtol=1e-6)
        np.testing.assert_allclose(pop.actor_state(1)[k], (a[k] + b[k]) / 2, rtol=1e-6)
    for k, v in critic_before.items():
        np.testing.assert_array_equal(pop.critic_state(0)[k], v)  # critic untouched by default


def test_frl_with_critic_also_averages_and_pays_for_the_critic():
    pop = A2CPopulation([1, 2], 4, 2, recipe("nstep", hidden=8))
    c0, c1 = pop.critic_state(0), pop.critic_state(1)
    ledger = _round(_strategy(FRL, pop, critic=True), [0, 1])
    actor_params, critic_params = 8 * 8 + 8 * 8 + 2, 8 * 8 + 8 * 7 + 1  # (h²+8h+2), (h²+7h+1)
    assert ledger["bits"].iloc[0] == (actor_params + critic_params) * 32
    k = "layer2.weight"
    np.testing.assert_allclose(pop.critic_state(1)[k], (c0[k] + c1[k]) / 2, rtol=1e-6)


def test_frl_refuses_different_architectures():
    ex = _strategy(FRL, A2CPopulation([1], 4, 2, recipe("nstep", hidden=8)))
    small = Payload.of("weights", 2, w=(np.zeros(2), 32))
    big = Payload.of("weights", 3, w=(np.zeros(3), 32))
    with pytest.raises(FrdError, match="same actor architecture"):
        ex.aggregate({0: small, 1: big}, [0, 1])


def _memories():
    s0 = np.array([[0.1, 0.1], [0.2, 0.2], [0.9, 0.1]], np.float32)   # cells 0, 0, 2
    p0 = np.array([[1.0, 0.0], [0.5, 0.5], [0.2, 0.8]], np.float32)
    s1 = np.array([[0.3, 0.4], [0.7, 0.9]], np.float32)               # cells 0, 3
    p1 = np.array([[0.0, 1.0], [0.6, 0.4]], np.float32)
    return {0: (s0, p0), 1: (s1, p1)}


def test_pd_uplink_bits_and_global_memory_is_the_concatenation():
    pop = A2CPopulation([1, 2], 2, 2, recipe("nstep", hidden=8))
    mem = _memories()
    ex = _strategy(PD, pop, mem)
    up = {a: ex.upload(a) for a in (0, 1)}
    assert up[0].bits == 3 * (2 + 2) * 32 and up[1].bits == 2 * (2 + 2) * 32  # entries·(d+|A|)·32
    down = ex.aggregate(up, [0, 1])
    np.testing.assert_array_equal(down[0]["states"], np.concatenate([mem[0][0], mem[1][0]]))
    np.testing.assert_array_equal(down[1]["probs"], np.concatenate([mem[0][1], mem[1][1]]))
    assert down[0].bits == 5 * 4 * 32


def test_frd_local_and_global_proxy_memory_by_hand():
    mem = _memories()
    cells0, pol0, n0 = local_proxy_memory(GRID, *mem[0])
    assert cells0.tolist() == [0, 2] and n0.tolist() == [2, 1]
    np.testing.assert_allclose(pol0, [[0.75, 0.25], [0.2, 0.8]])
    local1 = local_proxy_memory(GRID, *mem[1])
    cells, policy = global_proxy_memory([(cells0, pol0, n0), local1], "mean")
    assert cells.tolist() == [0, 2, 3]
    # cell 0 visited by both: mean of 0.75/0.25 and 0/1; cells 2 and 3 by one agent each
    np.testing.assert_allclose(policy, [[0.375, 0.625], [0.2, 0.8], [0.6, 0.4]])
    _, weighted = global_proxy_memory([(cells0, pol0, n0), local1], "count")
    np.testing.assert_allclose(weighted[0], [(2 * 0.75 + 0) / 3, (2 * 0.25 + 1) / 3], rtol=1e-6)


@pytest.mark.parametrize("codec", ["paper", "compact"])
def test_frd_round_bits_and_distillation_targets(codec):
    pop = A2CPopulation([1, 2], 2, 2, recipe("nstep", hidden=8))
    ex = _strategy(FRD, pop, _memories(), grid=2, proxy_layout=codec)
    ledger = _round(ex, [0, 1])
    per_entry = (2 + 2) * 32 if codec == "paper" else index_bits(GRID.n_cells) + 2 * 32
    up = ledger[ledger.direction == "up"]
    assert up["entries"].tolist() == [2, 2] and up["bits"].tolist() == [2 * per_entry, 2 * per_entry]
    down = ledger[ledger.direction == "down"]
    assert down["entries"].tolist() == [3, 3] and down["bits"].tolist() == [3 * per_entry] * 2
    states, _ = ex.target(ex.received[0])
    np.testing.assert_allclose(states, [[0.25, 0.25], [0.75, 0.25], [0.75, 0.75]])  # cell midpoints


def test_compact_bits_for_cartpole_grid():
    pop = A2CPopulation([1], 4, 2, recipe("nstep", hidden=8))
    states = np.random.default_rng(0).uniform(-1, 1, (50, 4)).astype(np.float32)
    probs = np.full((50, 2), 0.5, np.float32)
    up = _strategy(FRD, pop, {0: (states, probs)}, box=(-1.0, 1.0), proxy_layout="compact").upload(0)
    assert up.bits == up.entries * (int(np.ceil(np.log2(30 ** 4))) + 2 * 32)  # ⌈log2 S^d⌉ = 20

"""PD/FRD distillation controls, each against a hand-checkable effect."""
import gymnasium as gym
import numpy as np
import pytest

from frd.agents.a2c import A2CPopulation, recipe
from frd.exchange import run_round
from frd.ledger import Ledger
from frd.rl.config import rl_config
from frd.rl.methods import RoundContext, RunSetup
from frd.rl.methods.distilling import sharpen
from frd.rl.methods.pd import PolicyDistillation as PD
from frd.rl.runner import simulate


def _pd(pop, scores=None, **options):
    setup = RunSetup("Test-v0", gym.spaces.Box(-1.0, 1.0, (2,)), 2, pop.lanes, 0)
    strategy = PD(PD.Options(**options), setup)
    rng = np.random.default_rng(1)
    memories = {a: (rng.normal(size=(10 + 5 * a, 2)).astype(np.float32),
                    np.full((10 + 5 * a, 2), [0.3, 0.7], np.float32)) for a in range(pop.lanes)}
    strategy.begin_round(RoundContext(pop, {a: a for a in range(pop.lanes)}, memories, np.random.default_rng(0),
                                      scores or {a: float(a) for a in range(pop.lanes)}))
    return strategy, memories


def _pop(lanes=3):
    return A2CPopulation(list(range(1, lanes + 1)), 2, 2, recipe("nstep", hidden=8))


def test_distill_steps_runs_exactly_k_minibatches():
    pop = _pop(2)
    states, probs = np.zeros((200, 2), np.float32), np.full((200, 2), 0.5, np.float32)
    rng = np.random.default_rng(0)
    assert pop.distill([0], states, probs, rng, epochs=1, batch=64, lr=1e-3) == 4  # ⌈200/64⌉
    assert pop.distill([0], states, probs, rng, epochs=3, batch=64, lr=1e-3) == 12
    assert pop.distill([1], states, probs, rng, epochs=1, batch=64, lr=1e-3, steps=7) == 7  # beyond one pass
    assert pop.distill_opt.steps.tolist() == [16, 7], "one Adam step per minibatch, only on the rows asked"


def test_others_excludes_the_receivers_own_memory():
    strategy, memories = _pd(_pop(), distill_target="others")
    down = strategy.aggregate({a: strategy.upload(a) for a in range(3)}, [0, 1, 2])
    for receiver in range(3):
        expected = np.concatenate([memories[a][0] for a in range(3) if a != receiver])
        np.testing.assert_array_equal(down[receiver]["states"], expected)
    assert "score" not in strategy.upload(0).arrays, "no score goes up unless the target ranks agents"


def test_best_and_better_rank_by_the_uploaded_recent_mean():
    scores = {0: 100.0, 1: 300.0, 2: 200.0}
    best, memories = _pd(_pop(), scores, distill_target="best")
    up = {a: best.upload(a) for a in range(3)}
    assert up[0].bits == (10 * 4 + 1) * 32, "states, probs and one float32 score"
    down = best.aggregate(up, [0, 1, 2])
    assert set(down) == {0, 2} and np.array_equal(down[0]["states"], memories[1][0]), "agent 1 is best"
    better, memories = _pd(_pop(), scores, distill_target="better")
    down = better.aggregate({a: better.upload(a) for a in range(3)}, [0, 1, 2])
    assert set(down) == {0, 2}
    np.testing.assert_array_equal(down[0]["states"], np.concatenate([memories[1][0], memories[2][0]]))
    np.testing.assert_array_equal(down[2]["states"], memories[1][0])


def test_current_relabels_with_the_uploaders_current_actor():
    pop = _pop()
    strategy, memories = _pd(pop, distill_policy="current")
    up = strategy.upload(2)
    np.testing.assert_allclose(up["probs"], pop.policy(2, memories[2][0]), rtol=1e-6)
    assert not np.allclose(up["probs"], memories[2][1])


def test_temperature_sharpens_below_one_and_flattens_above():
    p = np.array([[0.6, 0.4]], np.float32)
    np.testing.assert_allclose(sharpen(p, 0.5), [[0.36 / 0.52, 0.16 / 0.52]], rtol=1e-6)
    np.testing.assert_allclose(sharpen(p, 2.0), [[0.6 ** 0.5, 0.4 ** 0.5]] / np.float32(0.6 ** 0.5 + 0.4 ** 0.5),
                               rtol=1e-6)
    assert sharpen(p, 1.0) is p


def test_the_leader_can_sit_out_and_every_receiver_is_logged():
    pop = _pop()
    strategy, _ = _pd(pop, {0: 5.0, 1: 50.0, 2: 10.0}, leader_distills=False, distill_steps=3)
    run_round(strategy, [0, 1, 2], run_id="r", round_=1, ledger=Ledger())
    assert [row["agent"] for row in strategy.log] == [0, 2], "agent 1 leads and does not distil"
    assert all(row["steps"] == 3 and row["entries"] == 10 + 15 + 20 for row in strategy.log)
    assert all(row["loss_after"] < row["loss_before"] for row in strategy.log)


def test_rounds_table_of_a_run():
    tables = []
    simulate(rl_config("pd", agents=2, max_episodes=6, period=3, hidden=8, target=1e9, distill_steps=2),
             [("pd", 0)], tables.append)
    rounds = tables[0]["rounds"]
    assert list(rounds.columns) == ["run_id", "method", "seed", "round", "agent", "entries", "steps",
                                    "loss_before", "loss_after"]
    assert rounds["round"].tolist() == [1, 1] and (rounds["steps"] == 2).all()


@pytest.mark.parametrize("options, message", [
    (dict(distill_steps=0), "--distill-steps must be at least 1"),
    (dict(distill_temperature=0.0), "--distill-temperature must be > 0"),
])
def test_bad_controls_are_refused(options, message):
    from frd.errors import FrdError
    with pytest.raises(FrdError, match=message):
        rl_config("pd", **options)


def test_mixfrd_uploads_half_the_entries_as_mixes_charged_as_sent():
    from frd.rl.methods.mixfrd import MixFRD, mix_proxy_entries

    rng = np.random.default_rng(0)
    states = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 0.0], [0.0, 2.0], [5.0, 5.0]], np.float32)
    policy = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [0.2, 0.8], [0.9, 0.1]], np.float32)
    mixed_s, mixed_p = mix_proxy_entries(states, policy, 0.4, rng)
    assert len(mixed_s) == 3, "two mixed pairs and the odd one out"
    np.testing.assert_allclose(mixed_p.sum(1), 1.0, rtol=1e-6)
    pop = _pop(2)
    setup = RunSetup("Test-v0", gym.spaces.Box(-1.0, 1.0, (2,)), 2, 2, 0)
    strategy = MixFRD(MixFRD.Options(grid=4), setup)
    memory = (rng.uniform(-1, 1, (300, 2)).astype(np.float32), np.full((300, 2), 0.5, np.float32))
    strategy.begin_round(RoundContext(pop, {0: 0, 1: 1}, {0: memory, 1: memory}, np.random.default_rng(0), {}))
    up = strategy.upload(0)
    assert up.entries == 8 and up.bits == up.entries * (2 + 2) * 32, "16 cells → 8 mixes of state and policy"
    down = strategy.aggregate({0: up, 1: strategy.upload(1)}, [0, 1])
    assert down[0].kind == "global_proxy_memory" and down[0].entries <= 16


def test_mixfrd_needs_the_paper_codec_and_mean_weighting():
    from frd.errors import FrdError
    with pytest.raises(FrdError, match="needs --proxy-layout paper"):
        rl_config("mixfrd", proxy_layout="compact").validate()
    with pytest.raises(FrdError, match="use --frd-weighting mean"):
        rl_config("mixfrd", weighting="count").validate()
    tables = []
    simulate(rl_config("mixfrd", agents=2, max_episodes=6, period=3, hidden=8, target=1e9), [("mixfrd", 0)],
             tables.append)
    assert tables[0]["runs"]["rounds"].iloc[0] == 1

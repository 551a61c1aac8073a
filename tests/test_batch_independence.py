"""A run's results must not depend on its batch-mates (issue 13 §1).

The old engine's critic head (a width-1 ``bmm``) rounded differently for a stack of one lane
than for two or more, so a seed run alone (or left alone after compaction) drifted away from
the same seed run in a batch. The numba kernel works lane by lane with the same code for every
lane; these tests hold it to that bit for bit, including across ``keep()`` compaction.
"""
import numpy as np
import pandas as pd
import pytest
import torch

from frd.agents.a2c import A2CPopulation, recipe
from frd.rl.config import RLConfig, rl_config
from frd.rl.runner import simulate

METHODS = ("independent", "frd", "pd", "frl")
# Tiny ReLU networks keep episodes short (~23 steps), so 500 episodes take ~12k runner steps.
# Targets are (method, seed) runs that take many env steps to reach the cap, so most
# batch-mates finish first and the batch is compacted while the targets still run.
CASES = {
    1: dict(cap=500, targets=[("independent", 7), ("frd", 0), ("pd", 7), ("frl", 7)]),
    2: dict(cap=250, targets=[("independent", 2), ("frd", 3), ("pd", 7), ("frl", 10)]),
}


def _run(config, runs):
    tables = {}
    simulate(config, runs, lambda t: tables.__setitem__(t["runs"].run_id.iloc[0], t["episodes"]))
    return tables


@pytest.mark.parametrize("agents", [1, 2])
def test_a_run_is_bit_identical_alone_and_among_3_16_64_runs_with_compaction(agents, monkeypatch):
    case = CASES[agents]
    config = RLConfig(agents=agents, hidden=8, activation="relu", max_episodes=case["cap"],
                      target=float("inf"), period=25)
    targets = case["targets"]
    compactions = []  # rows kept at each keep()
    real_keep = A2CPopulation.keep

    def spy_keep(self, rows):
        compactions.append(len(rows))
        return real_keep(self, rows)

    monkeypatch.setattr(A2CPopulation, "keep", spy_keep)
    alone = {}
    for method, seed in targets:
        alone.update(_run(config, [(method, seed)]))
    assert not compactions
    mates = [(m, s) for s in range(20, 100) for m in METHODS if (m, s) not in targets]
    batches = [[targets[0]] + mates[:2]]                                        # 3 runs
    batches.append(targets + mates[:12])                                        # 16 runs
    batches.append(targets + [("independent", s) for s in range(100, 160)])     # 64 runs
    for runs in batches:
        compactions.clear()
        batched = _run(config, runs)
        assert compactions, "the batch was never compacted"
        for method, seed in runs:
            if (method, seed) not in targets:
                continue
            rid = f"{method}-seed{seed}"
            assert len(alone[rid]) >= 500
            pd.testing.assert_frame_equal(alone[rid], batched[rid], check_exact=True)


def _steps(rng, steps, lanes):
    """Random transitions [steps, lanes, …] with terminations and truncations mid-rollout."""
    term = rng.random((steps, lanes)) < 0.1
    return dict(obs=rng.normal(size=(steps, lanes, 4)).astype(np.float32),
                rewards=rng.random((steps, lanes)).astype(np.float32),
                next_obs=rng.normal(size=(steps, lanes, 4)).astype(np.float32),
                terminated=term, truncated=~term & (rng.random((steps, lanes)) < 0.05),
                valid=(rng.random((steps, lanes)) < 0.9).astype(np.float32))


def _step(pop, data, k):
    actions, _ = pop.act(data["obs"][k])
    pop.observe(data["obs"][k], actions, data["rewards"][k], data["next_obs"][k], data["terminated"][k],
                data["truncated"][k], data["valid"][k])


def test_one_lane_updates_identically_in_a_batch_of_1_and_of_64_across_compaction():
    """1,000 updates of lane seed 7: alone, and at row 37 of 64 lanes, then at row 2 of 5 after
    keep(); width 24 so that vector loops have scalar tails too."""
    cfg = recipe("nstep", hidden=24)
    seeds = list(range(100, 164))
    seeds[37] = 7
    one, many = A2CPopulation([7], 4, 2, cfg), A2CPopulation(seeds, 4, 2, cfg)
    steps = 1000 * cfg.n_steps
    mine, others = _steps(np.random.default_rng(0), steps, 1), _steps(np.random.default_rng(1), steps, 64)
    row = 37
    for k in range(steps):
        if k == steps // 2:
            many.keep([3, 60, 37, 0, 11])
            others = {name: v[:, :5] for name, v in others.items()}
            row = 2
        for name in others:
            others[name][k, row] = mine[name][k, 0]
        _step(one, mine, k)
        _step(many, others, k)
    assert one.actor_opt.steps[0] == many.actor_opt.steps[row] > 800
    for net in ("actor", "critic"):
        assert np.array_equal(getattr(one, net).data[0].numpy(), getattr(many, net).data[row].numpy())
    for opt in ("actor_opt", "critic_opt"):
        for buf in ("exp_avg", "exp_avg_sq"):
            assert np.array_equal(getattr(getattr(one, opt), buf)[0].numpy(), getattr(getattr(many, opt), buf)[row].numpy())


def test_a_heterogeneous_run_is_bit_identical_alone_and_in_a_batch_with_compaction(monkeypatch):
    """Two widths and two recipes (n = 8 and n = 1): lanes sit in two stacked groups that meet
    every 8 steps. The batch's last two runs to finish were live when it was compacted; each
    then runs alone."""
    config = rl_config(("pd", "frd", "independent"), agents=2, agent_spec="h=8;h=16,recipe=rlcode,lr=2e-3",
                       activation="relu", max_episodes=50, target=float("inf"), period=10)
    compactions = []
    real_keep = A2CPopulation.keep
    monkeypatch.setattr(A2CPopulation, "keep", lambda self, rows: (compactions.append(len(rows)), real_keep(self, rows)))
    batched = _run(config, [(m, s) for s in range(2) for m in ("pd", "frd", "independent")])
    assert compactions and compactions[0] >= 2  # each group keeps one lane per live run: both targets live
    for rid in list(batched)[-2:]:
        method, seed = rid.split("-seed")
        alone = _run(config, [(method, int(seed))])[rid]
        assert len(alone) == 100
        pd.testing.assert_frame_equal(alone, batched[rid], check_exact=True)


def test_distilling_two_lanes_of_64_equals_distilling_them_alone_and_leaves_the_rest():
    """Distillation works on copies of its rows: the same result as in a stack of those rows
    alone, bit for bit (Adam state too), and every other lane untouched."""
    cfg = recipe("nstep", hidden=24)
    seeds = list(range(100, 164))
    seeds[5], seeds[40] = 7, 8
    alone, many = A2CPopulation([8, 7], 4, 2, cfg), A2CPopulation(seeds, 4, 2, cfg)
    rng = np.random.default_rng(0)
    states = rng.normal(size=(300, 4)).astype(np.float32)
    target = rng.dirichlet([1, 1], size=300).astype(np.float32)
    before = many.actor.data.clone()
    for _ in range(3):
        n = alone.distill([0, 1], states, target, np.random.default_rng(1), epochs=1, batch=64, lr=1e-3)
        assert many.distill([40, 5], states, target, np.random.default_rng(1), epochs=1, batch=64, lr=1e-3) == n == 5
    assert torch.equal(alone.actor.data, many.actor.data[[40, 5]])
    for buf in ("exp_avg", "exp_avg_sq", "steps"):
        assert torch.equal(getattr(alone.distill_opt, buf), getattr(many.distill_opt, buf)[[40, 5]])
    rest = [i for i in range(64) if i not in (5, 40)]
    assert torch.equal(many.actor.data[rest], before[rest]) and not many.distill_opt.steps[rest].any()
    assert not torch.equal(many.actor.data[[40, 5]], before[[40, 5]])

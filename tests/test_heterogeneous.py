"""Heterogeneous populations (issue 12 §3): per-agent width, rate and recipe from --agent-spec,
--init shared|separate, lanes of several widths in one batch, PD/FRD across widths, FRL refused."""
import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from frd.agents.a2c import RECIPES, A2CPopulation, recipe
from frd.agents.grouped import GroupedPopulation
from frd.agents.spec import AgentSpec, parse_agent_spec
from frd.cli import main
from frd.errors import FrdError
from frd.rl.config import RLConfig, rl_config
from frd.rl.experiment import run_experiment
from frd.rl.runner import RLBatch
from frd.seeding import Stream, derive_seed


def test_spec_entries_parse_to_typed_values_and_cycle_over_the_agents():
    specs = parse_agent_spec(" h=32; h=64 ;h=128,lr=3e-4;recipe=rlcode")
    assert specs == (AgentSpec(hidden=32), AgentSpec(hidden=64), AgentSpec(hidden=128, lr=3e-4), AgentSpec(recipe="rlcode"))
    configs = RLConfig(agents=6, hidden=16, agent_spec=specs).agent_configs()
    assert [c.hidden for c in configs] == [32, 64, 128, 16, 32, 64]  # agent 3: the common --hidden
    assert (configs[2].actor_lr, configs[2].critic_lr) == (3e-4, 3e-4)
    assert (configs[0].actor_lr, configs[0].critic_lr) == (7e-4, 7e-4)  # nstep's own rates
    assert configs[3] == replace(RECIPES["rlcode"], hidden=16)
    assert parse_agent_spec("") == () and RLConfig(agents=3).agent_configs() == [RECIPES["nstep"]] * 3


@pytest.mark.parametrize("text, message", [
    ("h=0", "h must be at least 1, got 0"), ("h=3.5", "h takes an integer, got '3.5'"),
    ("lr=-1", "lr must be a finite number > 0"), ("lr=nan", "lr must be a finite number > 0"),
    ("lr=fast", "lr takes a number, got 'fast'"), ("width=32", "unknown key 'width'; the keys are h, lr, recipe"),
    ("h=32;", "expected KEY=VALUE pairs"), ("h", "expected KEY=VALUE pairs"), ("h=32,h=64", "h is given twice"),
    ("recipe=ppo", "unknown recipe 'ppo'"),
])
def test_malformed_specs_are_refused_naming_the_flag(text, message):
    with pytest.raises(FrdError, match="^--agent-spec: " + message.replace("(", r"\(")):
        parse_agent_spec(text)


def test_grouped_rows_distill_on_the_minibatches_of_one_call_and_survive_keep():
    """Rows 0 and 2 (h = 8) and row 1 (h = 16) distil in one call as each group would alone,
    on the same draws; keep() then maps rows anew and drops a group left without any."""
    small, large = recipe("nstep", hidden=8), recipe("nstep", hidden=16)
    grouped = GroupedPopulation([1, 2, 3], 4, 2, [small, large, small], [7, 8, 9])
    alone = A2CPopulation([1, 3], 4, 2, small, [7, 9]), A2CPopulation([2], 4, 2, large, [8])
    data = np.random.default_rng(0)
    states, probs = data.normal(size=(50, 4)).astype(np.float32), data.dirichlet([1, 1], 50).astype(np.float32)
    how = dict(epochs=2, batch=16, lr=1e-2)
    rng = np.random.default_rng(5)
    assert grouped.distill([2, 1, 0], states, probs, rng, **how) == 8
    after = rng.random()
    for pop, rows in zip(alone, ([0, 1], [0])):
        reference = np.random.default_rng(5)
        pop.distill(rows, states, probs, reference, **how)
        assert reference.random() == after  # the grouped call left the stream where one call does
    for row, (pop, local) in enumerate([(alone[0], 0), (alone[1], 0), (alone[0], 1)]):
        assert all(np.array_equal(v, pop.actor_state(local)[k]) for k, v in grouped.actor_state(row).items())
    ce = grouped.cross_entropy([1, 2], states, probs)
    assert np.array_equal(ce, [alone[1].cross_entropy([0], states, probs)[0], alone[0].cross_entropy([1], states, probs)[0]])
    grouped.keep([2, 0])
    assert len(grouped.groups) == 1 and grouped.lanes == 2
    assert np.array_equal(grouped.actor_state(0)["layer0.weight"], alone[0].actor_state(1)["layer0.weight"])


def test_lanes_of_two_widths_and_two_recipes_step_in_one_batch():
    config = rl_config("pd", agents=2, agent_spec="h=8;h=16,recipe=rlcode", max_episodes=100)
    batch = RLBatch(config, [("pd", 0), ("pd", 1)])
    small, large = batch.pop.groups
    assert [net.shapes[0][0] for net in (small.actor, large.actor)] == [(4, 8), (4, 16)]
    assert small.lanes == large.lanes == 2
    batch.reset()
    for _ in range(16):
        batch.step()
    assert (batch.env_steps == 16).all()
    assert small.actor_opt.steps.tolist() == [2, 2] and large.actor_opt.steps.tolist() == [16, 16]  # n = 8, n = 1
    assert batch.pop.between_updates


def test_pd_frd_and_mixfrd_distill_across_widths_and_the_folder_resumes(tmp_path):
    config = rl_config(("pd", "frd", "mixfrd"), agents=3, seeds=1, agent_spec="h=8;h=16;h=32", max_episodes=6,
                       period=2, target=float("inf"))
    run_experiment(config, tmp_path, progress=False)
    runs = {r.method: r for r in pd.read_csv(tmp_path / "runs.csv").itertuples()}
    assert all(runs[m].rounds == 2 for m in ("pd", "frd", "mixfrd"))
    rounds = pd.read_csv(tmp_path / "rounds.csv")
    for method, log in rounds.groupby("method"):
        assert sorted(log["agent"].unique()) == [0, 1, 2], method  # every width distilled
        assert (log["steps"] > 0).all() and (log["loss_after"] < log["loss_before"]).any()
    saved = json.loads((tmp_path / "config.json").read_text())
    assert [s["hidden"] for s in saved["resume_key"]["common"]["agent_spec"]] == [8, 16, 32]
    mtime = (tmp_path / "parts" / "runs" / "pd-seed0.csv").stat().st_mtime_ns
    run_experiment(config, tmp_path, progress=False)  # same command: nothing to redo
    assert (tmp_path / "parts" / "runs" / "pd-seed0.csv").stat().st_mtime_ns == mtime


def test_frl_refuses_mixed_widths_before_anything_is_written(tmp_path, capsys):
    with pytest.raises(FrdError, match=r"^frl averages weights, so its agents need one architecture \(--agent-spec\): "
                       r"agent 0 \(frd\) has actor 4-8-8-2 tanh, but agent 1 \(frd\) has actor 4-16-16-2 tanh; use pd or frd"):
        rl_config(("pd", "frl"), agents=2, agent_spec="h=8;h=16").validate()
    rl_config("frl", agents=2, agent_spec="lr=1e-3;recipe=rlcode").validate()  # one width: fine
    out = tmp_path / "out"
    assert main(["compare", "--methods", "frl,frd", "--agent-spec", "h=8;h=16", "--out", str(out)]) == 2
    assert "frl averages weights" in capsys.readouterr().err and not out.exists()


def _weights(init):
    batch = RLBatch(rl_config("pd", agents=4, agent_spec="h=8;h=16", init=init), [("pd", 0)])
    return [(g.actor.data.numpy(), g.critic.data.numpy()) for g in batch.pop.groups]  # agents (0, 2), (1, 3)


def test_shared_init_gives_agents_of_one_width_the_same_weights_and_separate_does_not():
    for actor, critic in _weights("shared"):
        assert np.array_equal(actor[0], actor[1]) and np.array_equal(critic[0], critic[1])
    for actor, critic in _weights("separate"):
        assert not np.array_equal(actor[0], actor[1]) and not np.array_equal(critic[0], critic[1])


def test_defaults_leave_the_resume_key_as_before_and_set_options_enter_it():
    assert not {"agent_spec", "init"} & set(RLConfig().resume_key().common)
    key = rl_config("pd", agent_spec="h=8", init="separate").resume_key().common
    assert key["init"] == "separate" and key["agent_spec"] == ({"hidden": 8, "lr": None, "recipe": None},)
    with pytest.raises(FrdError, match="--init takes shared or separate, got 'fresh'"):
        RLConfig(init="fresh").validate()


def test_a_homogeneous_batch_is_one_group_computing_what_the_bare_population_did():
    """Defaults unchanged: one group with the lane and init seeds the runner used before, stepping
    and learning bit for bit like a bare ``A2CPopulation``."""
    config = RLConfig(agents=2, hidden=8)
    batch = RLBatch(config, [("pd", 0), ("pd", 1)])
    (group,) = batch.pop.groups
    lane_seeds = [derive_seed(s, a) for s in (0, 1) for a in range(2)]
    bare = A2CPopulation(lane_seeds, 4, 2, recipe("nstep", hidden=8), [derive_seed(s, Stream.RL_INIT) for s in (0, 0, 1, 1)])
    rng = np.random.default_rng(0)
    for _ in range(24):
        obs = rng.normal(size=(4, 4)).astype(np.float32)
        (actions, probs), (again, probs_again) = bare.act(obs), batch.pop.act(obs)
        assert np.array_equal(actions, again) and np.array_equal(probs, probs_again)
        step = (obs, actions, rng.random(4).astype(np.float32), rng.normal(size=(4, 4)).astype(np.float32),
                rng.random(4) < 0.1, np.zeros(4, bool), np.ones(4, np.float32))
        bare.observe(*step)
        batch.pop.observe(*step)
    assert bare.actor_opt.steps.tolist() == [3] * 4
    for net in ("actor", "critic"):
        assert np.array_equal(getattr(bare, net).data.numpy(), getattr(group, net).data.numpy())

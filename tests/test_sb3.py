"""Stable-Baselines3 learners as participants (issue 43): the spec, the zoo's defaults, the
distillation step against Adam by hand, the bits an SB3 agent's upload is charged, determinism,
non-interference under ``independent``, FRL's averaging and refusal, and bad input."""
import sys
import tempfile

import numpy as np
import pandas as pd
import pytest
import torch

from frd.agents.sb3 import Q_TEMPERATURE, Linear, SB3Learner, sb3_config
from frd.agents.spec import AgentSpec, parse_agent_spec
from frd.cli import main
from frd.errors import FrdError
from frd.rl.config import rl_config
from frd.rl.runner import RLBatch, iter_simulate

TINY = dict(agents=2, seeds=1, max_episodes=12, period=4)
"""A few episodes: the SB3 agent plays one or two collections."""


def _tables(methods, **values):
    config = rl_config(methods, **{**TINY, **values})
    config.validate()
    return {str(t["runs"]["run_id"].iloc[0]): t for t in iter_simulate(config, [(m, 0) for m in config.methods])}


def test_spec_keys_algo_sb3_and_qtemp_parse_beside_todays():
    specs = parse_agent_spec("algo=ppo,sb3.n_epochs=10,sb3.learning_rate=lin_0.001;h=64;algo=dqn,qtemp=0.1,sb3.x=true")
    assert specs == (AgentSpec(algo="ppo", sb3=(("n_epochs", 10), ("learning_rate", "lin_0.001"))), AgentSpec(hidden=64),
                     AgentSpec(algo="dqn", q_temperature=0.1, sb3=(("x", True),)))
    assert [s.algorithm for s in specs] == ["ppo", "frd", "dqn"] and AgentSpec(algo="frd").algorithm == "frd"


def test_the_zoo_defaults_are_read_with_one_env_per_agent_and_overrides_win():
    ppo = sb3_config("ppo", "CartPole-v1")
    kwargs = dict(ppo.kwargs)
    assert kwargs["n_steps"] == 32 * 8 and kwargs["batch_size"] == 256 and kwargs["n_epochs"] == 20  # zoo: 8 envs × 32
    assert kwargs["learning_rate"] == "lin_0.001" and ppo.horizon == 1e5 and ppo.net_arch == (64, 64)
    assert Linear(0.001)(0.5) == 0.0005
    dqn = sb3_config("dqn", "CartPole-v1", lr=1e-3, overrides=[("train_freq", 64), ("net_arch", "32x32")])
    assert dict(dqn.kwargs)["train_freq"] == 64 and dict(dqn.kwargs)["learning_rate"] == 1e-3
    assert dqn.net_arch == (32, 32) and dqn.q_temperature == Q_TEMPERATURE and dqn.horizon == 5e4
    assert sb3_config("a2c-sb3", "Acrobot-v1", hidden=16).net_arch == (16, 16)
    assert dict(sb3_config("a2c-sb3", "Acrobot-v1").kwargs)["n_steps"] == 5 * 16
    assert sb3_config("ppo", "CartPole-v1", hidden=64).architecture(4, 2) == "actor 4-64-64-2 tanh"


def _by_hand(learner, states, probs, lr, steps):
    """The distillation's loss and Adam steps written out: the actor (tanh MLP in our layout),
    the cross-entropy to the teacher, Adam (β = 0.9, 0.999, ε = 1e-8) from zero moments."""
    state = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in learner.state("actor").items()}
    x, p = torch.tensor(states, dtype=torch.float64), torch.tensor(probs, dtype=torch.float64)
    m = {k: torch.zeros_like(v) for k, v in state.items()}
    v = {k: torch.zeros_like(t) for k, t in state.items()}
    losses = []
    for t in range(1, steps + 1):
        h = torch.tanh(x @ state["layer0.weight"] + state["layer0.bias"])
        h = torch.tanh(h @ state["layer1.weight"] + state["layer1.bias"])
        loss = -(p * torch.log_softmax(h @ state["layer2.weight"] + state["layer2.bias"], -1)).sum(-1).mean()
        losses.append(float(loss.detach()))
        grads = torch.autograd.grad(loss, list(state.values()))
        with torch.no_grad():
            for (k, w), g in zip(state.items(), grads):
                m[k] = 0.9 * m[k] + 0.1 * g
                v[k] = 0.999 * v[k] + 0.001 * g * g
                w -= lr * (m[k] / (1 - 0.9 ** t)) / ((v[k] / (1 - 0.999 ** t)).sqrt() + 1e-8)
    return losses, {k: w.detach().numpy() for k, w in state.items()}


def test_distilling_into_a_ppo_policy_equals_the_loss_and_adam_steps_by_hand():
    torch.set_num_threads(1)
    learner = SB3Learner(sb3_config("ppo", "CartPole-v1", hidden=8), "CartPole-v1", seed=1, init_seed=2)
    states = np.array([[0.1, -0.2, 0.03, 0.4], [-0.5, 0.2, -0.1, 0.0], [0.0, 0.3, 0.2, -0.6]], np.float32)
    probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]], np.float32)
    losses, expected = _by_hand(learner, states, probs, lr=0.01, steps=2)
    critic, initial = learner.state("critic"), learner.state("actor")
    assert learner.cross_entropy(states, probs) == pytest.approx(losses[0], rel=1e-6)
    done = learner.distill(states, probs, np.random.default_rng(0), epochs=1, batch=3, lr=0.01, steps=2)
    assert done == 2
    for k, w in learner.state("actor").items():
        np.testing.assert_allclose(w, expected[k], rtol=1e-5, atol=1e-6)
        assert not np.array_equal(w, initial[k])
    assert all(np.array_equal(w, learner.state("critic")[k]) for k, w in critic.items())  # only the actor learns
    assert learner.cross_entropy(states, probs) < losses[0]


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_collections_leave_nothing_in_the_temp_dir(algo, tmp_path, monkeypatch):
    """SB3's default logger makes an ``SB3-<time>`` folder per ``learn`` call: a million in a study."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    learner = SB3Learner(sb3_config(algo, "CartPole-v1", hidden=8), "CartPole-v1", seed=1, init_seed=2)
    for _ in range(3):
        assert learner.collect().states
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("SB3-")] == []


def test_a_dqn_agents_policy_is_the_softmax_of_its_q_values_at_its_temperature():
    learner = SB3Learner(sb3_config("dqn", "CartPole-v1", hidden=8, q_temperature=0.5), "CartPole-v1", seed=1, init_seed=2)
    states = np.array([[0.1, -0.2, 0.03, 0.4], [-0.5, 0.2, -0.1, 0.0]], np.float32)
    with torch.no_grad():
        q = learner.model.q_net(torch.as_tensor(states)).numpy().astype(np.float64)
    expected = np.exp(q / 0.5) / np.exp(q / 0.5).sum(1, keepdims=True)
    np.testing.assert_allclose(learner.probabilities(states), expected, rtol=1e-5)
    actor, _ = learner.networks()  # saved: logits Q/τ
    with torch.no_grad():
        np.testing.assert_allclose(actor(torch.as_tensor(states)).numpy(), q / 0.5, rtol=1e-5, atol=1e-5)
    assert learner.state("critic") == {}  # DQN has no critic to average


def test_a_dqn_agent_with_qstudent_uploads_at_qtemp_and_distils_into_softmax_q_at_qstudent():
    torch.set_num_threads(1)
    spec, = parse_agent_spec("algo=dqn,h=8,qtemp=0.5,qstudent=2")
    learner = SB3Learner(spec.sb3_config("CartPole-v1"), "CartPole-v1", seed=1, init_seed=2)
    states = np.array([[0.1, -0.2, 0.03, 0.4], [-0.5, 0.2, -0.1, 0.0]], np.float32)
    target = np.array([[0.9, 0.1], [0.3, 0.7]])
    with torch.no_grad():
        q = learner.model.q_net(torch.as_tensor(states)).numpy().astype(np.float64)
    upload = np.exp(q / 0.5) / np.exp(q / 0.5).sum(1, keepdims=True)
    np.testing.assert_allclose(learner.probabilities(states), upload, rtol=1e-5)
    student = q / 2 - np.log(np.exp(q / 2).sum(1, keepdims=True))
    assert learner.cross_entropy(states, target) == pytest.approx(-(target * student).sum(1).mean(), rel=1e-5)
    weights = [p.detach().clone() for p in learner.policy_parameters()]
    learner.distill(states, target.astype(np.float32), np.random.default_rng(0), epochs=1, batch=2, lr=0.01, steps=1)
    # one Adam step from zero moments moves every weight with a gradient by lr·sign(gradient)
    params = [p.detach().clone().requires_grad_() for p in weights]
    h = torch.relu(torch.as_tensor(states) @ params[0].T + params[1])
    h = torch.relu(h @ params[2].T + params[3])
    logp = torch.log_softmax((h @ params[4].T + params[5]) / 2, -1)
    grads = torch.autograd.grad(-(torch.as_tensor(target, dtype=torch.float32) * logp).sum(-1).mean(), params)
    for before, after, g in zip(weights, learner.policy_parameters(), grads):
        np.testing.assert_allclose((after.detach() - before).numpy(), (-0.01 * g / (g.abs() + 1e-8)).numpy(), atol=1e-6)


@pytest.mark.parametrize("method, per_entry", [("pd", (4 + 2) * 32), ("frd", (4 + 2) * 32)])
def test_an_sb3_agents_upload_is_charged_entries_times_bits_per_entry(method, per_entry):
    tables = _tables(method, agent_spec="algo=ppo,sb3.n_steps=32,sb3.batch_size=32;h=64")[f"{method}-seed0"]
    ledger = tables["ledger"]
    up = ledger[(ledger["direction"] == "up") & (ledger["participant"] == 0)]
    assert len(up) and (up["entries"] > 0).all()
    assert (up["bits"] == up["entries"] * per_entry).all()
    rounds = tables["rounds"]
    assert set(rounds["agent"]) == {0, 1} and (rounds["steps"] > 0).all()  # the PPO agent distils too
    assert tables["runs"]["algorithm"].iloc[0] == "ppo+frd"
    assert set(tables["episodes"].groupby("agent")["algorithm"].first()) == {"ppo", "frd"}


def _without_timing(tables):
    return {k: (v.drop(columns=["compute_s", "comm_s", "latency_s"], errors="ignore") if isinstance(v, pd.DataFrame) else v)
            for k, v in tables.items() if k != "models"}


def test_runs_with_sb3_agents_are_deterministic():
    spec = "algo=dqn,sb3.train_freq=32,sb3.learning_starts=50,sb3.gradient_steps=4;h=64"
    first, second = (_tables("independent,pd", agent_spec=spec) for _ in range(2))
    for rid in first:
        for name, table in _without_timing(first[rid]).items():
            pd.testing.assert_frame_equal(table, _without_timing(second[rid])[name])
    assert len(first["pd-seed0"]["rounds"])


def test_an_sb3_peer_does_not_change_what_an_frd_agent_does_under_independent():
    mixed = _tables("independent", agent_spec="h=64;algo=ppo", until="all", target=float("inf"))["independent-seed0"]
    alone = _tables("independent", agents=1, until="all", target=float("inf"))["independent-seed0"]
    ours = mixed["episodes"][mixed["episodes"]["agent"] == 0].reset_index(drop=True)
    assert len(ours) == TINY["max_episodes"] and (mixed["episodes"]["agent"] == 1).sum() == TINY["max_episodes"]
    pd.testing.assert_frame_equal(ours[["episode", "score", "env_steps"]],
                                  alone["episodes"][["episode", "score", "env_steps"]])


def test_frl_averages_an_sb3_ppo_actor_with_ours_layer_by_layer():
    config = rl_config("frl", **{**TINY, "agent_spec": "algo=ppo,sb3.n_steps=16,sb3.batch_size=16;h=64"})
    config.validate()
    batch = RLBatch(config, [("frl", 0)])
    batch.reset()
    population = batch.population
    ppo = batch.sb3[0]
    states = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    state = population.actor_state(0)  # our layout: the same probabilities as SB3's own forward
    h = np.tanh(np.tanh(states @ state["layer0.weight"] + state["layer0.bias"]) @ state["layer1.weight"] + state["layer1.bias"])
    logits = h @ state["layer2.weight"] + state["layer2.bias"]
    np.testing.assert_allclose(ppo.probabilities(states), np.exp(logits) / np.exp(logits).sum(1, keepdims=True), rtol=1e-5)
    while batch.runs[0].rounds == 0:
        before = {a: population.actor_state(a) for a in (0, 1)}
        batch.step()
        if batch.pop.between_updates:
            batch._exchange_rounds()
    after = [batch.population.actor_state(a) for a in (0, 1)]
    for k in after[0]:
        np.testing.assert_array_equal(after[0][k], after[1][k])
        np.testing.assert_allclose(after[0][k], (before[0][k] + before[1][k]) / 2, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("spec, message", [
    ("algo=sac", "--agent-spec: unknown algo 'sac'; choose one of frd, ppo, a2c-sb3, dqn"),
    ("algo=ppo,sb3.n_step=8", "--agent-spec: PPO has no hyperparameter 'n_step'; the sb3.<name> keys are "),
    ("algo=dqn,sb3.seed=3", "--agent-spec: DQN has no hyperparameter 'seed'"),
    ("h=64,sb3.n_steps=8", "--agent-spec: sb3.<name>, qtemp and qstudent are for Stable-Baselines3 learners"),
    ("h=64,qstudent=1", "--agent-spec: sb3.<name>, qtemp and qstudent are for Stable-Baselines3 learners"),
    ("algo=ppo,recipe=rlcode", "--agent-spec: recipe is one of our A2C's"),
    ("algo=dqn,qtemp=0", "--agent-spec: qtemp must be a finite number > 0"),
    ("algo=dqn,qstudent=nan", "--agent-spec: qstudent must be a finite number > 0"),
])
def test_bad_sb3_specs_are_one_line_exit_2_and_nothing_written(tmp_path, capsys, spec, message):
    with pytest.raises(FrdError, match="^" + message.replace("(", r"\(").replace(".", r"\.")):
        rl_config("pd", agent_spec=spec).validate()
    out = tmp_path / "out"
    assert main(["compare", "--methods", "pd", "--agent-spec", spec, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and not out.exists()


def test_frl_across_a_dqn_and_our_a2c_is_refused_naming_the_agent(tmp_path, capsys):
    message = ("frl averages weights, so its agents need one architecture (--agent-spec): agent 0 (dqn) has q-network "
               "4-256-256-2 relu, but agent 1 (frd) has actor 4-64-64-2 tanh; use pd or frd")
    with pytest.raises(FrdError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        rl_config("frl", agents=2, agent_spec="algo=dqn;h=64").validate()
    rl_config("frl", agents=2, agent_spec="algo=ppo,h=64;h=64").validate()  # PPO's 64-64 tanh actor is ours
    out = tmp_path / "out"
    assert main(["compare", "--methods", "frl", "--agent-spec", "algo=dqn;h=64", "--out", str(out)]) == 2
    assert message in capsys.readouterr().err and not out.exists()


def test_a_continuous_action_space_and_a_missing_sb3_are_refused(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    assert main(["compare", "--methods", "pd", "--env", "Pendulum-v1", "--agent-spec", "algo=ppo", "--out", str(out)]) == 2
    assert "Pendulum-v1 has Box actions; the agents need a Discrete action space" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "stable_baselines3", None)  # as if the extra were not installed
    with pytest.raises(FrdError, match=r"^algo=ppo/a2c-sb3/dqn needs Stable-Baselines3: pip install"):
        rl_config("pd", agent_spec="algo=ppo").validate()
    assert main(["compare", "--methods", "pd", "--agent-spec", "algo=ppo", "--out", str(out)]) == 2
    assert "needs Stable-Baselines3" in capsys.readouterr().err and not out.exists()


def test_until_all_retires_an_sb3_agent_at_its_own_completion():
    tables = _tables("pd", agent_spec="algo=ppo,sb3.n_steps=64,sb3.batch_size=64;h=64", max_episodes=60, period=5,
                     until="all", target=30.0, window=5)["pd-seed0"]
    runs, episodes = tables["runs"].iloc[0], tables["episodes"]
    ppo = episodes[episodes["agent"] == 0]
    assert runs["agents_completed"] >= 1 and ppo["score"].tail(5).mean() >= 30.0  # its last episode completed it
    assert ppo["score"].rolling(5).mean().iloc[:-1].dropna().lt(30.0).all()  # and none before
    assert runs["all_agents_episodes"] == max(episodes.groupby("agent")["episode"].max())


def test_sb3_agents_are_refused_as_flower_nodes():
    from frd.rl.remote import check_remote
    with pytest.raises(FrdError, match=r"^Stable-Baselines3 agents \(--agent-spec algo=…\) cannot be Flower nodes yet"):
        check_remote(rl_config("pd", agent_spec="algo=ppo;h=64"))


@pytest.mark.processes
def test_a_mixed_run_on_ray_gives_the_local_tables_and_models(tmp_path, monkeypatch):
    """One PPO + our A2C run per method on a Ray started here (the Ray tests' own cost: it starts
    Ray) equals the local one, tables and saved agents bit for bit."""
    pytest.importorskip("ray")
    for target in ("frd.rl.experiment.plot_mission", "frd.rl.experiment.plot_payload"):
        monkeypatch.setattr(target, lambda *args, **kwargs: None)
    flags = ["compare", "--methods", "independent,pd", "--agents", "2", "--agent-spec",
             "algo=ppo,sb3.n_steps=32,sb3.batch_size=32;h=8", "--max-episodes", "6", "--period", "2", "--target", "1e9",
             "--seeds", "1", "--no-progress"]
    assert main([*flags, "--out", str(tmp_path / "local")]) == 0
    assert main([*flags, "--backend", "ray", "--cpus", "1", "--out", str(tmp_path / "ray")]) == 0
    for name in ("episodes", "ledger", "runs", "rounds"):
        local, ray = (pd.read_csv(tmp_path / where / f"{name}.csv").drop(columns=["compute_s"], errors="ignore")
                      for where in ("local", "ray"))
        pd.testing.assert_frame_equal(local, ray, obj=name)
    assert set(pd.read_csv(tmp_path / "ray" / "episodes.csv")["algorithm"]) == {"ppo", "frd"}
    models = {p.name: p.read_bytes() for p in (tmp_path / "local" / "models").glob("*.pt")}
    assert models and models == {p.name: p.read_bytes() for p in (tmp_path / "ray" / "models").glob("*.pt")}

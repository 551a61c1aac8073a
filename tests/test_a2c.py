"""The stacked population must behave exactly like separate per-lane agents."""
import numpy as np
import pytest
import torch
from torch import nn

from frd.agents.a2c import A2CPopulation, recipe
from frd.agents.stacked import LaneAdam, StackedMLP, clip_per_lane
from frd.rl.config import rl_config


def _modules(stacked, lane: int, activation: str = "tanh") -> nn.Sequential:
    """Separate nn.Module copy of one lane of a StackedMLP."""
    layers = []
    for i, (w, b) in enumerate(zip(stacked.weights, stacked.biases)):
        lin = nn.Linear(w.shape[1], w.shape[2])
        with torch.no_grad():
            lin.weight.copy_(w[lane].T)
            lin.bias.copy_(b[lane, 0])
        hidden = nn.Tanh() if activation == "tanh" else nn.ReLU()
        layers += [lin, hidden] if i < len(stacked.weights) - 1 else [lin]
    return nn.Sequential(*layers)


def _fill_rollout(pop: A2CPopulation, T: int, seed: int = 0, valid_share: float = 0.8) -> None:
    rng = np.random.default_rng(seed)
    L = pop.lanes
    for _ in range(T):
        term = rng.random(L) < 0.2
        trunc = (~term) & (rng.random(L) < 0.2)
        valid = (rng.random(L) < valid_share).astype(np.float32)
        pop.rollout.add(rng.normal(size=(L, 4)).astype(np.float32), rng.integers(0, 2, L),
                        rng.random(L).astype(np.float32), rng.normal(size=(L, 4)).astype(np.float32),
                        term, trunc, valid)


def _reference_loss(actor: nn.Module, critic: nn.Module, r, lane: int, gamma: float, vc: float) -> torch.Tensor:
    """Plain per-lane n-step A2C loss, written step by step."""
    T = r.t
    total, count = 0.0, 0.0
    for t in range(T):
        if not r.valid[lane, t]:
            continue
        ret, k = 0.0, t
        discount = 1.0
        while True:  # accumulate rewards until a done or the rollout end, then bootstrap
            ret = ret + discount * float(r.rewards[lane, k])
            if r.terminated[lane, k]:
                break
            if r.done[lane, k] or k == T - 1:
                with torch.no_grad():
                    ret = ret + discount * gamma * float(critic(torch.from_numpy(r.next_obs[lane, k])))
                break
            discount *= gamma
            k += 1
        v = critic(torch.from_numpy(r.obs[lane, t])).squeeze()
        logp = torch.log_softmax(actor(torch.from_numpy(r.obs[lane, t])), -1)[int(r.actions[lane, t])]
        total = total - logp * (ret - v.detach()) + vc * (ret - v) ** 2
        count += 1
    return total / max(count, 1)


def test_stacked_gradients_equal_separate_modules():
    cfg = recipe("nstep", hidden=8)
    pop = A2CPopulation([11, 12, 13], 4, 2, cfg)
    _fill_rollout(pop, T=6)
    loss, _ = pop.loss()
    loss.sum().backward()
    for lane in range(3):
        actor, critic = _modules(pop.actor, lane), _modules(pop.critic, lane)
        _reference_loss(actor, critic, pop.rollout, lane, cfg.gamma, cfg.value_coef).backward()
        for stacked, module in ((pop.actor, actor), (pop.critic, critic)):
            linears = [m for m in module if isinstance(m, nn.Linear)]
            for w, b, lin in zip(stacked.weights, stacked.biases, linears):
                torch.testing.assert_close(w.grad[lane], lin.weight.grad.T, rtol=1e-4, atol=1e-6)
                torch.testing.assert_close(b.grad[lane, 0], lin.bias.grad, rtol=1e-4, atol=1e-6)


def test_lane_adam_matches_torch_adam_per_lane_and_leaves_masked_lanes_alone():
    """Each lane follows its own torch.optim.Adam over the steps it took (own step count)."""
    net = StackedMLP([torch.Generator().manual_seed(s) for s in (1, 2, 3)], (3, 4, 2), "tanh", 1.0)
    refs = [net.data[lane].clone().requires_grad_() for lane in range(3)]
    opt, ref_opts = LaneAdam(net, lr=0.01), [torch.optim.Adam([r], lr=0.01, eps=1e-8) for r in refs]
    masks = [[True, False, True], [True, False, True], [True, True, False], [True, True, True], [True, True, True]]
    for mask in masks:
        grads = torch.randn(3, net.data.shape[1])
        net.grad.copy_(grads)
        opt.step(torch.tensor(mask))
        for lane in np.flatnonzero(mask):
            refs[lane].grad = grads[lane].clone()
            ref_opts[lane].step()
        for lane in range(3):
            torch.testing.assert_close(net.data[lane], refs[lane].detach(), rtol=1e-5, atol=1e-7)
    assert opt.steps.tolist() == [5, 3, 4]
    assert torch.count_nonzero(net.grad) == 0


def test_autograd_accumulates_into_the_flat_gradient_buffer():
    net = StackedMLP([torch.Generator().manual_seed(s) for s in (1, 2)], (3, 4, 2), "tanh", 1.0)
    net(torch.randn(2, 5, 3)).sum().backward()
    assert net.weights[0].grad.data_ptr() == net.grad.data_ptr()  # no per-layer copies
    assert torch.count_nonzero(net.grad) > 0


def test_gradient_clip_is_per_lane_over_both_networks():
    nets = [StackedMLP([torch.Generator().manual_seed(s) for s in (1, 2)], (1, 1), "tanh", 1.0) for _ in range(2)]
    nets[0].grad.copy_(torch.tensor([[3.0, 0.0], [0.03, 0.0]]))
    nets[1].grad.copy_(torch.tensor([[0.0, 4.0], [0.0, 0.04]]))
    clip_per_lane(nets, max_norm=0.5)
    norms = torch.cat([n.grad for n in nets], 1).norm(dim=1)
    torch.testing.assert_close(norms, torch.tensor([0.5, 0.05]))  # only the big lane is scaled


def test_distill_lowers_cross_entropy_to_target():
    pop = A2CPopulation([1, 2, 3], 4, 2, recipe("nstep", hidden=16))
    rng = np.random.default_rng(0)
    states = rng.normal(size=(256, 4)).astype(np.float32)
    target = np.where(states[:, :1] > 0, [[0.9, 0.1]], [[0.1, 0.9]]).astype(np.float32)
    before = pop.cross_entropy([0, 2], states, target)
    untouched = pop.cross_entropy([1], states, target)
    for _ in range(20):
        pop.distill([0, 2], states, target, rng, epochs=1, batch=64, lr=3e-3)
    after = pop.cross_entropy([0, 2], states, target)
    assert np.all(after < before - 0.1)
    np.testing.assert_allclose(pop.cross_entropy([1], states, target), untouched)  # lane 1 not distilled


def test_act_returns_valid_actions_and_probabilities():
    pop = A2CPopulation([5, 6], 4, 3, recipe("nstep", hidden=8))
    actions, probs = pop.act(np.zeros((2, 4), np.float32))
    assert actions.shape == (2,) and set(actions) <= {0, 1, 2}
    np.testing.assert_allclose(probs.sum(1), 1.0, rtol=1e-6)


@pytest.mark.parametrize("name", ["nstep", "rlcode"])
def test_recipes_take_a_learning_step(name):
    pop = A2CPopulation([1, 2], 4, 2, recipe(name, hidden=8))
    before = pop.actor.weights[0].detach().clone()
    _fill_rollout(pop, T=pop.config.n_steps, valid_share=1.0)
    pop.learn()
    assert pop.rollout.t == 0 and not torch.equal(before, pop.actor.weights[0].detach())


def test_every_layer_gradient_stays_a_view_of_the_flat_buffer():
    """Including the width-1 critic output, whose bias view makes autograd warn."""
    net = StackedMLP([torch.Generator().manual_seed(s) for s in (1, 2)], (3, 4, 1), "tanh", 1.0)
    x = torch.randn(2, 5, 3)
    net(x).sum().backward()
    for p in net.weights + net.biases:
        assert p.grad._base is net.grad
    first = net.grad.clone()
    net(x).sum().backward()  # a second backward adds to the same buffer
    torch.testing.assert_close(net.grad, 2 * first)


def test_distillation_leaves_the_rl_optimizer_state_alone():
    pop = A2CPopulation([1, 2], 4, 2, recipe("nstep", hidden=8))
    _fill_rollout(pop, T=8, valid_share=1.0)
    pop.learn()
    opt = pop.actor_opt
    before = [t.clone() for t in (opt.exp_avg, opt.exp_avg_sq, opt.steps)]
    rng = np.random.default_rng(0)
    pop.distill([0, 1], rng.normal(size=(64, 4)).astype(np.float32), np.full((64, 2), 0.5, np.float32), rng,
                epochs=1, batch=64, lr=1e-4)
    for now, then in zip((opt.exp_avg, opt.exp_avg_sq, opt.steps), before):
        assert torch.equal(now, then)



@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_numpy_acting_forward_equals_the_torch_forward(activation):
    net = StackedMLP([torch.Generator().manual_seed(s) for s in (1, 2, 3)], (4, 8, 8, 2), activation, 1.0)
    x = torch.randn(3, 5, 4)
    with torch.no_grad():
        expected = net(x).numpy()
    np.testing.assert_allclose(net.numpy_forward(x.numpy()), expected, rtol=1e-5, atol=1e-6)


def test_acting_probabilities_follow_weight_updates():
    """The numpy forward reads the live weights: a loaded state, or the kept rows after ``keep``."""
    pop = A2CPopulation([1, 2], 4, 2, recipe("nstep", hidden=8))
    obs = np.ones((2, 4), np.float32)
    before = pop.act(obs)[1]
    state = pop.actor_state(0)
    state["layer2.bias"] = np.array([[5.0, -5.0]], np.float32)
    pop.load_actor_state(0, state)
    after = pop.act(obs)[1]
    assert after[0, 0] > 0.99 and np.allclose(after[1], before[1])
    pop.keep([0])
    assert pop.act(obs[:1])[1][0, 0] > 0.99


# --- the numba kernel (agents/kernel.py) against per-lane nn.Modules and torch.optim.Adam ---

def _flat_grads(module: nn.Sequential) -> torch.Tensor:
    """A module's gradients in the kernel's layout: per layer weight [in, out] row-major, bias."""
    parts = []
    for lin in (m for m in module if isinstance(m, nn.Linear)):
        parts += [lin.weight.grad.T.reshape(-1), lin.bias.grad]
    return torch.cat(parts)


def _flat_params(module: nn.Sequential) -> torch.Tensor:
    parts = []
    for lin in (m for m in module if isinstance(m, nn.Linear)):
        parts += [lin.weight.detach().T.reshape(-1), lin.bias.detach()]
    return torch.cat(parts)


def _acted_rollout(pop: A2CPopulation, rng: np.random.Generator, valid_share: float = 0.8, obs_dim: int = 4) -> None:
    """A full rollout acted by the population (so the update reuses acting's activations), with
    terminations and truncations mid-rollout and lanes sitting out steps; not yet learned."""
    L, cfg = pop.lanes, pop.config
    for _ in range(cfg.n_steps):
        obs = rng.normal(size=(L, obs_dim)).astype(np.float32)
        actions, _ = pop.act(obs)
        term = rng.random(L) < 0.2
        trunc = (~term) & (rng.random(L) < 0.2)
        rewards = rng.random(L).astype(np.float32)
        if cfg.failure_reward is not None:
            rewards = np.where(term, np.float32(cfg.failure_reward), rewards)
        pop.rollout.add(obs, actions, rewards, rng.normal(size=(L, obs_dim)).astype(np.float32), term, trunc,
                        (rng.random(L) < valid_share).astype(np.float32))


def _reference_step(pop, modules, optimizers, lane) -> None:
    cfg, (actor, critic) = pop.config, modules
    if pop.rollout.valid[lane, :pop.rollout.t].sum() == 0:
        return  # a lane without steps is not touched (no Adam step either)
    for m in modules:
        m.zero_grad()
    _reference_loss(actor, critic, pop.rollout, lane, cfg.gamma, cfg.value_coef).backward()
    if cfg.max_grad_norm is not None:
        torch.nn.utils.clip_grad_norm_([*actor.parameters(), *critic.parameters()], cfg.max_grad_norm)
    for opt in optimizers:
        opt.step()


@pytest.mark.parametrize("activation, obs_dim, actions", [("tanh", 4, 2), ("relu", 6, 3), ("tanh", 8, 4)])
def test_kernel_gradients_equal_separate_modules_with_joint_clip(activation, obs_dim, actions):
    """Each layer's matrix products (BLAS) and derivatives, for both activations and the shapes of
    CartPole, Acrobot and LunarLander."""
    cfg = recipe("nstep", hidden=16, max_grad_norm=0.05, activation=activation)  # small: some lanes clipped
    pop = A2CPopulation([11, 12, 13, 14], obs_dim, actions, cfg)
    _acted_rollout(pop, np.random.default_rng(3), obs_dim=obs_dim)
    grads_a, grads_c = pop.kernel_gradients()
    clipped = 0
    for lane in range(4):
        actor, critic = _modules(pop.actor, lane, activation), _modules(pop.critic, lane, activation)
        _reference_loss(actor, critic, pop.rollout, lane, cfg.gamma, cfg.value_coef).backward()
        norm = torch.nn.utils.clip_grad_norm_([*actor.parameters(), *critic.parameters()], cfg.max_grad_norm)
        clipped += bool(norm > cfg.max_grad_norm)
        torch.testing.assert_close(torch.from_numpy(grads_a[lane]), _flat_grads(actor), rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(torch.from_numpy(grads_c[lane]), _flat_grads(critic), rtol=1e-4, atol=1e-6)
    assert clipped >= 1


@pytest.mark.parametrize("name", ["nstep", "rlcode"])
def test_kernel_updates_follow_per_lane_modules_and_torch_adam(name):
    """Several updates (terminations, truncations, idle steps mid-rollout; rlcode: n = 1, no clip,
    −100 at a failure, separate actor and critic rates): every lane tracks its own nn.Modules
    trained by torch.optim.Adam to float32 rounding."""
    cfg = recipe(name, hidden=16)
    pop = A2CPopulation([21, 22, 23], 4, 2, cfg)
    modules = [(_modules(pop.actor, lane), _modules(pop.critic, lane)) for lane in range(3)]
    optimizers = [(torch.optim.Adam(a.parameters(), lr=cfg.actor_lr), torch.optim.Adam(c.parameters(), lr=cfg.critic_lr))
                  for a, c in modules]
    rng = np.random.default_rng(5)
    for _update in range(12 if name == "rlcode" else 4):
        _acted_rollout(pop, rng, valid_share=0.7)
        for lane in range(3):
            _reference_step(pop, modules[lane], optimizers[lane], lane)
        pop.learn()
        for lane, (actor, critic) in enumerate(modules):
            # Adam turns a gradient near its eps (1e-8) into a step near lr, so rounding in such a
            # gradient shows up as a few 1e-6 in the parameter: tolerance lr / 100.
            tol = dict(rtol=1e-5, atol=cfg.actor_lr / 100)
            torch.testing.assert_close(pop.actor.data[lane], _flat_params(actor), **tol)
            torch.testing.assert_close(pop.critic.data[lane], _flat_params(critic), **dict(tol, atol=cfg.critic_lr / 100))
    assert pop.actor_opt.steps.min() > 0


@pytest.mark.parametrize("activation,hidden,outputs", [("tanh", 24, 2), ("relu", 24, 2), ("tanh", 64, 2),
                                                      ("relu", 136, 3)])
def test_kernel_forward_equals_the_torch_forward(activation, hidden, outputs):
    """Layer widths in blocks of 8 (24), one block of 64, and 64 + 64 + 8 with 2 + 1 outputs (``kernel._columns``)."""
    from frd.agents import kernel

    net = StackedMLP([torch.Generator().manual_seed(s) for s in (1, 2, 3)], (4, hidden, hidden, outputs), activation, 1.0)
    x = torch.randn(3, 5, 4)
    with torch.no_grad():
        expected = net(x).numpy()
    got = kernel.forward(net.data.numpy(), x.numpy(), 4, hidden, outputs, activation == "relu")
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=2e-6)


def test_a_layer_in_registers_sums_bias_then_each_input_row_in_order():
    """``kernel._columns`` against the same sums by hand: float64, and the first block as float32 FMAs."""
    from frd.agents import kernel

    rng = np.random.default_rng(0)
    n_in, n_out = 5, 75  # blocks of 64, 8, 2 and 1
    p = rng.normal(size=n_in * n_out + n_out).astype(np.float32)
    x = rng.normal(size=n_in).astype(np.float32)
    out = np.empty(n_out, np.float32)
    kernel._layer(p, 0, n_in * n_out, n_in, n_out, x, out, False, False)
    expected = p[n_in * n_out:].astype(np.float64)
    for i in range(n_in):
        expected = expected + np.float64(x[i]) * p[i * n_out:(i + 1) * n_out]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    # the first 64 outputs: bias + x0·W0 + x1·W1 + … as one FMA per row, exactly
    acc = p[n_in * n_out:n_in * n_out + 64].astype(np.float32)
    for i in range(n_in):
        acc = (np.float64(x[i]) * p[i * n_out:i * n_out + 64].astype(np.float64) + acc).astype(np.float32)
    np.testing.assert_array_equal(out[:64], acc)


def test_borrowed_views_are_the_views_they_replace_and_write_through():
    """``kernel._row`` / ``_rows``: the elements, shapes and layouts of ``a[lane, t]``,
    ``a[lane, :T]`` and ``p[w:b].reshape(n, m)``, writing into ``a``; a strided array is refused."""
    from numba import njit
    from numba.core.errors import TypingError

    from frd.agents import kernel

    @njit
    def views(a, lane, t):
        S, h = a.shape[1], a.shape[2]
        row, rows = kernel._row(a, (lane * S + t) * h, h), kernel._rows(a, lane * S * h, 3, h)
        weights = kernel._rows(row, 1, 2, 2)
        rows[2, 1] = -1.0  # = a[lane, 2, 1]
        return row.copy(), rows.copy(), weights.T.copy()

    a = np.arange(2 * 5 * 6, dtype=np.float32).reshape(2, 5, 6)
    row, rows, weights_t = views(a, 1, 2)
    expected = np.arange(2 * 5 * 6, dtype=np.float32).reshape(2, 5, 6)
    expected[1, 2, 1] = -1.0
    np.testing.assert_array_equal(a, expected)
    np.testing.assert_array_equal(row, expected[1, 2])
    np.testing.assert_array_equal(rows, expected[1, :3])
    np.testing.assert_array_equal(weights_t, expected[1, 2, 1:5].reshape(2, 2).T)
    with pytest.raises(TypingError, match="a borrowed view needs a C-contiguous array"):
        views(np.asfortranarray(a), 0, 0)


def test_kernel_tanh_error_is_within_float32_rounding():
    from frd.agents import kernel

    x = np.linspace(-12, 12, 200_001, dtype=np.float32)
    np.testing.assert_allclose(kernel.tanh_array(x), np.tanh(x.astype(np.float64)), rtol=0, atol=4e-7)


def test_update_reuses_acting_activations_bit_for_bit():
    """The update takes the actor's activations from acting; recomputing them gives the same bits."""
    cfg = recipe("nstep", hidden=24)
    a, b = A2CPopulation([1, 2, 3], 4, 2, cfg), A2CPopulation([1, 2, 3], 4, 2, cfg)
    _acted_rollout(a, np.random.default_rng(9))
    _acted_rollout(b, np.random.default_rng(9))
    b._invalidate()  # forces the recomputation
    a.learn()
    b.learn()
    assert np.array_equal(a.actor.data.numpy(), b.actor.data.numpy())
    assert np.array_equal(a.critic.data.numpy(), b.critic.data.numpy())


def test_a_lane_that_stops_mid_rollout_learns_the_same_without_acting_while_stopped():
    """A lane that reaches a barrier at step 3 of 8 (its episode ends there) takes no forward for
    the remaining steps: action 0, zero probabilities, its cache slots marked stale. Its update
    equals, bit for bit, that of a lane that acted (and had its draws discarded) all along."""
    cfg = recipe("nstep", hidden=16)
    skipping, acting = A2CPopulation([3, 4], 4, 2, cfg), A2CPopulation([3, 4], 4, 2, cfg)
    rng = np.random.default_rng(0)
    for t in range(cfg.n_steps):
        obs = rng.normal(size=(2, 4)).astype(np.float32)
        active = np.array([t <= 3, True])
        ended = np.array([t == 3, False])
        actions, probs = skipping.act(obs, active)
        acted, _ = acting.act(obs)
        if t > 3:
            assert actions[0] == 0 and not probs[0].any() and not skipping.cache.ok[0, t]
            acted[0] = 0  # a stopped lane's action only moves the env's discarded next state
        for pop, a in ((skipping, actions), (acting, acted)):
            pop.observe(obs, a, active.astype(np.float32), obs + 1, ended, np.zeros(2, bool),
                        active.astype(np.float32))
    assert skipping.actor_opt.steps[0] == 1
    for net in ("actor", "critic"):
        assert torch.equal(getattr(skipping, net).data, getattr(acting, net).data)


@pytest.mark.parametrize("env_id, trained_on", [("CartPole-v1", -100.0), ("Acrobot-v1", 0.0), ("MountainCar-v0", 0.0)])
def test_the_rlcode_failure_reward_replaces_a_termination_only_where_it_is_a_failure(env_id, trained_on):
    """CartPole terminates when the pole falls; Acrobot and MountainCar at their goal, whose
    reward (0, against −1 a step) must reach the learner, not −100."""
    config = rl_config("independent", env_id=env_id, recipe="rlcode")
    pop = A2CPopulation([0], 6, 3, config.agent_configs()[0])
    stored = []
    pop.rollout.add = lambda obs, actions, rewards, *rest: stored.append(rewards.copy())
    pop.learn = lambda: None
    obs = np.zeros((1, 6), np.float32)
    pop.observe(obs, np.zeros(1, np.int64), np.zeros(1, np.float32), obs, np.array([True]), np.array([False]),
                np.array([True]))
    assert stored[0].tolist() == [trained_on]
    # runs saved before the env decided (−100 everywhere) are not resumed as if they were these
    marked = "failure_reward" in config.resume_key().common
    assert marked == (env_id != "CartPole-v1")
    assert "failure_reward" not in rl_config("independent", env_id=env_id).resume_key().common

"""A2C for a whole population of lanes at once (the recipe and why: agents/README.md).

Default recipe ``nstep``: n-step A2C, n = 8, Adam 7e-4, γ = 0.99, value weight 0.5, no entropy
bonus, per-lane gradient clip 0.5, tanh, bootstrapped at truncation but not at termination.
Recipe ``rlcode``: the one-step TD recipe the 490 rule comes from (actor 1e-3, critic 5e-3,
−100 reward at a failure), offered for comparison. A failure is a termination only where the env
says so (``FAILING_TERMINATIONS``): Acrobot's termination is its goal.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterator, Sequence

import numpy as np
import torch

from frd.agents import kernel
from frd.agents.stacked import LaneAdam, StackedMLP
from frd.errors import FrdError
from frd.seeding import Stream


@dataclass(frozen=True)
class A2CConfig:
    """One agent's learner (a recipe, ``RECIPES``, with its width and rates)."""

    hidden: int = 64
    """Width h of both hidden layers (actor and critic)."""
    activation: str = "tanh"
    """Hidden activation: tanh or relu (ReLU completed 0–3 % of lanes in the trials before this engine)."""
    n_steps: int = 8
    """Env steps per lane between updates (n of n-step A2C)."""
    actor_lr: float = 7e-4
    """Adam learning rate of the actor."""
    critic_lr: float = 7e-4
    """Adam learning rate of the critic."""
    gamma: float = 0.99
    """Discount."""
    value_coef: float = 0.5
    """Weight of the critic's squared error."""
    max_grad_norm: float | None = 0.5
    """Per-lane clip over actor and critic gradients; None: off."""
    failure_reward: float | None = None
    """Training reward at a failure (a termination); None: the env's own (see ``for_env``)."""


FAILING_TERMINATIONS = frozenset({"CartPole-v1"})
"""Envs whose every termination is a failure (the pole fell), the only ones where a recipe's
``failure_reward`` replaces the reward [our reading: the rlcode recipe is CartPole's]. Elsewhere the
env's own reward stays: Acrobot-v1 and MountainCar-v0 terminate at their goal, LunarLander-v3 at a
crash or at rest, which its own ±100 tells apart."""


RECIPES = {
    "nstep": A2CConfig(),
    "rlcode": A2CConfig(n_steps=1, actor_lr=1e-3, critic_lr=5e-3, max_grad_norm=None, failure_reward=-100.0),
}


def for_env(config: A2CConfig, env_id: str) -> A2CConfig:
    """``config`` as it trains on ``env_id``: no failure reward where a termination is not a failure."""
    return config if env_id in FAILING_TERMINATIONS else replace(config, failure_reward=None)


def recipe(name: str, **overrides) -> A2CConfig:
    if name not in RECIPES:
        raise FrdError(f"unknown A2C recipe {name!r}; choose one of {', '.join(RECIPES)}")
    if overrides.get("hidden", 1) < 1:
        raise FrdError(f"--hidden must be at least 1, got {overrides['hidden']}")
    return replace(RECIPES[name], **overrides)


def distill_limit(n: int, *, epochs: int, batch: int, steps: int | None) -> int:
    """Minibatches a distillation over ``n`` states takes: ``steps``, or ``epochs`` passes."""
    return (steps if steps is not None else epochs * -(-n // batch)) if n else 0


def distill_passes(n: int, *, epochs: int, batch: int, steps: int | None) -> int:
    """Shuffles of the ``n`` states it draws (one ``rng.permutation(n)`` per pass, the last cut short)."""
    limit = distill_limit(n, epochs=epochs, batch=batch, steps=steps)
    return -(-limit // -(-n // batch)) if n else 0


def distill_minibatches(n: int, rng: np.random.Generator, *, epochs: int, batch: int,
                        steps: int | None) -> Iterator[torch.Tensor]:
    """A distillation's minibatches over ``n`` states, in order: ``distill_passes`` shuffles drawn
    from ``rng`` as they are reached, ``distill_limit`` batches in all (every learner's the same)."""
    done, limit = 0, distill_limit(n, epochs=epochs, batch=batch, steps=steps)
    for _ in range(distill_passes(n, epochs=epochs, batch=batch, steps=steps)):
        order = torch.from_numpy(rng.permutation(n))
        for start in range(0, n, batch):
            if done == limit:
                break
            yield order[start:start + batch]
            done += 1


CROSS_ENTROPY_ELEMENTS = 1 << 22
"""Hidden activations (rows × states × width) one forward of ``A2CPopulation.cross_entropy`` holds at
most beyond its least chunk [our choice: 16 MiB of floats per layer]."""


def cross_entropy_chunk(states: int, width: int) -> int:
    """Rows per forward of ``cross_entropy`` on ``states`` states through layers ``width`` wide: a
    multiple of 16, at least 16, so that each chunk's gathered weights start 64-byte aligned as the
    whole batch's did (MKL's products depend on their operands' alignment; the results are those of
    one forward, tested)."""
    return max(16, CROSS_ENTROPY_ELEMENTS // max(states * width, 1) // 16 * 16)


class Rollout:
    """The last ``n`` steps of every lane, lane-major numpy arrays ``[L, n, …]`` (cheap to fill
    step by step, one tensor per field at update time); ``valid`` marks the steps a lane took."""

    FIELDS = ("obs", "next_obs", "actions", "rewards", "terminated", "done", "valid")

    def __init__(self, n: int, lanes: int, obs_dim: int) -> None:
        self.obs = np.zeros((lanes, n, obs_dim), np.float32)
        self.next_obs = np.zeros((lanes, n, obs_dim), np.float32)
        self.actions = np.zeros((lanes, n), np.int64)
        self.rewards = np.zeros((lanes, n), np.float32)
        self.terminated = np.zeros((lanes, n), bool)
        self.done = np.zeros((lanes, n), bool)
        self.valid = np.zeros((lanes, n), np.float32)
        self.t = 0

    def add(self, obs, actions, rewards, next_obs, terminated, truncated, valid) -> None:
        t = self.t
        self.obs[:, t], self.next_obs[:, t] = obs, next_obs
        self.actions[:, t], self.rewards[:, t], self.valid[:, t] = actions, rewards, valid
        self.terminated[:, t], self.done[:, t] = terminated, terminated | truncated
        self.t += 1

    @property
    def full(self) -> bool:
        return self.t == self.obs.shape[1]

    @property
    def arrays(self) -> kernel.Transitions:
        """The kernels' view of the stored steps (the arrays themselves, updated in place)."""
        return kernel.Transitions(self.obs, self.next_obs, self.actions, self.rewards, self.terminated, self.done,
                                  self.valid)

    def keep(self, rows: torch.Tensor) -> None:
        for name in self.FIELDS:
            setattr(self, name, getattr(self, name)[rows.numpy()])


class A2CPopulation:
    """Actor and critic per lane; acting, learning and distilling for all lanes in one call."""

    def __init__(self, lane_seeds: Sequence[int], obs_dim: int, n_actions: int, config: A2CConfig,
                 init_seeds: Sequence[int] | None = None) -> None:
        """``lane_seeds`` drive each lane's action sampling; ``init_seeds`` (default: the same)
        its initial weights, so lanes given one init seed start from identical networks."""
        self.config = config
        gens = [torch.Generator().manual_seed(int(s)) for s in (init_seeds or lane_seeds)]
        h = config.hidden
        self.actor = StackedMLP(gens, (obs_dim, h, h, n_actions), config.activation, output_gain=0.01)
        self.critic = StackedMLP(gens, (obs_dim, h, h, 1), config.activation, output_gain=1.0)
        self.actor_opt = LaneAdam(self.actor, config.actor_lr)
        self.critic_opt = LaneAdam(self.critic, config.critic_lr)
        # Distillation gets its own Adam: its cross-entropy gradients would otherwise inflate the
        # RL optimizer's second moments and shrink every RL step for ~1/(1-β2) updates. Its
        # learning rate is the distilling method's, set per call.
        self.distill_opt = LaneAdam(self.actor, lr=0.0)
        self.rollout = Rollout(config.n_steps, len(lane_seeds), obs_dim)
        # What acting computed per rollout slot (hidden activations, logits, the state), reused
        # by the update while the weights it was computed with are unchanged.
        L, n = len(lane_seeds), config.n_steps
        self.cache = kernel.ActCache(h1=np.zeros((L, n, h), np.float32), h2=np.zeros((L, n, h), np.float32),
                                     logits=np.zeros((L, n, n_actions), np.float32),
                                     obs=np.zeros((L, n, obs_dim), np.float32), ok=np.zeros((L, n), bool))
        self.dims = kernel.Dims(obs_dim, h, n_actions, config.activation == "relu")
        self.hyper = kernel.Hyper(
            gamma=config.gamma, value_coef=config.value_coef,
            max_norm=-1.0 if config.max_grad_norm is None else config.max_grad_norm,
            lr_a=self.actor_opt.lr, lr_c=self.critic_opt.lr, beta1=self.actor_opt.betas[0],
            beta2=self.actor_opt.betas[1], eps=self.actor_opt.eps,
            failure_reward=math.nan if config.failure_reward is None else config.failure_reward)
        self._bind_arrays()
        self._rngs = [np.random.default_rng(int(s) ^ Stream.RL_ACTIONS) for s in lane_seeds]
        self._uniforms = np.empty((0, len(lane_seeds)))
        self._next_uniform: int | np.ndarray = 0  # the lanes' place in the block, or each lane's

    def _bind_arrays(self) -> None:
        """numpy views of the buffers the kernels update in place (``Tensor.numpy()`` costs ~4 µs
        a call); redone when ``keep`` replaces the buffers."""
        ao, co = self.actor_opt, self.critic_opt
        self.nets = kernel.Nets(self.actor.data.numpy(), self.critic.data.numpy())
        self.adam = kernel.Adam(ao.exp_avg.numpy(), ao.exp_avg_sq.numpy(), co.exp_avg.numpy(), co.exp_avg_sq.numpy(),
                                ao.steps.numpy(), co.steps.numpy())

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("nets", "adam")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._bind_arrays()  # numpy views of the unpickled tensors

    @property
    def lanes(self) -> int:
        return self.actor.weights[0].shape[0]

    def draw_uniforms(self, steps: int) -> np.ndarray:
        """``steps`` rows of one uniform per lane, each lane's from its own generator in order,
        drawn in blocks for speed (step-major, so that each step's draws are one contiguous row).
        Lanes may stand at different places in their streams (``undraw_uniforms`` per lane)."""
        at = self._next_uniform
        if (at if isinstance(at, int) else int(at.max(initial=0))) + steps > self._uniforms.shape[0]:
            places = np.broadcast_to(at, len(self._rngs))
            size = self._uniforms.shape[0] - int(places.min(initial=0)) + max(1024, steps)
            kept = [self._uniforms[place:, i] for i, place in enumerate(places)]
            self._uniforms = np.ascontiguousarray(np.stack([
                np.concatenate([left, rng.random(size - len(left))]) for left, rng in zip(kept, self._rngs)]).T
                if self._rngs else np.empty((size, 0)))
            at = 0
        self._next_uniform = at + steps
        if isinstance(at, int):
            return self._uniforms[at:at + steps]
        return self._uniforms[at + np.arange(steps)[:, None], np.arange(len(at))]

    def undraw_uniforms(self, steps: int | np.ndarray) -> None:
        """Hand back the last ``steps`` rows drawn (or, an array, that many of each lane's),
        unused: the next draw gives them again."""
        at = self._next_uniform - (int(steps) if np.ndim(steps) == 0 else steps)
        if np.any(np.asarray(steps) < 0) or np.any(at < 0):
            raise ValueError(f"cannot hand back {steps} uniforms of {self._next_uniform} drawn from this block")
        if not isinstance(at, int) and (at == at[:1]).all():
            at = int(at[0]) if len(at) else 0  # the lanes stand together again: one place (cheaper to draw)
        self._next_uniform = at

    def act(self, obs: np.ndarray, active: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Sample an action per lane; also return the action probabilities used to act. Lanes
        not ``active`` (default: all are) take no step: action 0, probabilities 0, no forward."""
        obs = np.ascontiguousarray(obs, dtype=np.float32)
        active = np.ones(len(obs), bool) if active is None else np.ascontiguousarray(active, dtype=bool)
        actions, probs = np.empty(len(obs), np.int64), np.empty((len(obs), self.dims.o), np.float32)
        kernel.act(self.nets.actor, obs, self.draw_uniforms(1)[0], self.rollout.t, self.dims, self.cache, actions, probs,
                   active)
        return actions, probs

    def observe(self, obs, actions, rewards, next_obs, terminated, truncated, valid) -> None:
        """Store one step; learn when the rollout is full."""
        if self.config.failure_reward is not None:
            rewards = np.where(terminated, np.float32(self.config.failure_reward), rewards)
        self.rollout.add(obs, actions, rewards, next_obs, terminated, truncated, valid)
        if self.rollout.full:
            self.learn()

    def learn(self) -> None:
        """One A2C update from the stored steps of every lane (a no-op for lanes with none).

        Runs in ``frd.agents.kernel.learn`` lane by lane; ``loss`` is the same update written with
        torch autograd (the tests hold one to the other).
        """
        if self.rollout.t == 0:
            return
        self._kernel_learn(np.zeros((0, 0), np.float32), np.zeros((0, 0), np.float32))
        self.rollout.t = 0

    def kernel_gradients(self) -> tuple[np.ndarray, np.ndarray]:
        """The kernel's clipped per-lane gradients [L, P] of actor and critic for the stored
        steps, without updating anything (for tests)."""
        grads = np.zeros_like(self.actor.data.numpy()), np.zeros_like(self.critic.data.numpy())
        self._kernel_learn(*grads)
        return grads

    def _kernel_learn(self, grads_a: np.ndarray, grads_c: np.ndarray) -> None:
        kernel.learn(self.rollout.t, self.dims, self.nets, self.adam, self.rollout.arrays, self.cache, self.hyper,
                     grads_a, grads_c)

    def _invalidate(self) -> None:
        """Weights changed outside an update: acting's cached activations are stale."""
        self.cache.ok[:] = False

    def loss(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-lane A2C loss over the stored steps, and which lanes took any step.

        n-step returns bootstrap from V(next state) at the end of the rollout and at a
        truncation, and not past a termination; each lane averages over its own valid steps.
        """
        r, T = self.rollout, self.rollout.t
        valid = torch.from_numpy(r.valid[:, :T])                     # [L, T]
        # The state after the rollout rides along in the critic's forward on the rollout's states.
        states = torch.from_numpy(np.concatenate([r.obs[:, :T], r.next_obs[:, T - 1:T]], axis=1))  # [L, T+1, d]
        logp = torch.log_softmax(self.actor(states[:, :T]), -1)      # [L, T, A]
        values_and_last = self.critic(states).squeeze(-1)            # [L, T+1]
        values = values_and_last[:, :T]
        returns = torch.from_numpy(self._returns(values_and_last[:, T].detach().numpy()))
        count = valid.sum(1).clamp(min=1)
        advantage = (returns - values).detach()
        chosen = logp.gather(-1, torch.from_numpy(r.actions[:, :T]).unsqueeze(-1)).squeeze(-1)
        loss = (-(chosen * advantage * valid).sum(1) + self.config.value_coef * ((returns - values).pow(2) * valid).sum(1))
        return loss / count, valid.sum(1) > 0

    def _returns(self, last_value: np.ndarray) -> np.ndarray:
        """n-step returns [L, T]; ``last_value`` is V of the state after the rollout's last step.

        Other steps bootstrap only at a truncation (the episode goes on beyond its time limit);
        those few next states get their own critic evaluation.
        """
        r, T, gamma = self.rollout, self.rollout.t, self.config.gamma
        next_value = np.zeros((self.lanes, T), np.float32)
        use_next = r.done[:, :T] & ~r.terminated[:, :T]
        use_next[:, T - 1] = True
        next_value[:, T - 1] = last_value
        lanes, steps = np.nonzero(use_next[:, :T - 1])
        if len(lanes):
            with torch.no_grad():
                next_value[lanes, steps] = self.critic(torch.from_numpy(r.next_obs[lanes, steps][:, None]),
                                                       torch.from_numpy(lanes)).flatten().numpy()
        returns = np.empty((self.lanes, T), np.float32)
        ret = last_value
        for t in reversed(range(T)):
            boot = np.where(use_next[:, t], next_value[:, t], ret)
            ret = r.rewards[:, t] + gamma * ~r.terminated[:, t] * boot
            returns[:, t] = ret
        return returns

    def distill(self, rows: Sequence[int], states: np.ndarray, target_probs: np.ndarray,
                rng: np.random.Generator, *, epochs: int, batch: int, lr: float, steps: int | None = None) -> int:
        """Fit the actors of ``rows`` to a memory: minimise −Σ_a π_target(a|s) log π_θ(a|s).

        Shuffled minibatches of ``batch`` with the distillation optimizer at learning rate ``lr``:
        ``epochs`` passes over the memory, or exactly ``steps`` minibatches (as many passes as that
        takes, the last one cut short) when given. Returns the number of minibatches.
        """
        rows_t = torch.as_tensor(list(rows), dtype=torch.long)
        actor = self.actor.take(rows_t)  # a step then costs the same whatever the batch's size
        opt = self.distill_opt.take(rows_t, actor)
        opt.lr, every = lr, torch.ones(len(rows_t), dtype=torch.bool)
        # The forward gathers every lane of ``actor``: MKL's products depend on their operands'
        # alignment, and gathered copies are aligned as the batch's rows always were here.
        gather = torch.arange(len(rows_t))
        x_all, p_all = torch.as_tensor(states, dtype=torch.float32), torch.as_tensor(target_probs, dtype=torch.float32)
        done = 0
        for idx in distill_minibatches(len(x_all), rng, epochs=epochs, batch=batch, steps=steps):
            x = x_all[idx].expand(len(rows_t), -1, -1)
            logp = torch.log_softmax(actor(x, gather), -1)
            loss = -(p_all[idx] * logp).sum(-1).mean(-1)
            loss.sum().backward()
            opt.step(every)
            done += 1
        self.actor.put(rows_t, actor)
        self.distill_opt.put(rows_t, opt)
        self._invalidate()
        return done

    @torch.no_grad()
    def policy(self, row: int, states: np.ndarray) -> np.ndarray:
        """The actor of ``row``'s action probabilities at ``states`` (to relabel a memory)."""
        x = torch.as_tensor(states, dtype=torch.float32)[None]
        return torch.softmax(self.actor(x, torch.tensor([row])), -1)[0].numpy()

    @torch.no_grad()
    def cross_entropy(self, rows: Sequence[int], states: np.ndarray, target_probs: np.ndarray) -> np.ndarray:
        """Per-row mean cross-entropy of the actors to a memory (for tests and diagnostics), in
        chunks of rows (``cross_entropy_chunk``): PD's memory grows with the agents, and one forward
        of every receiver on it held agents² × steps activations (1 GB at 128 agents)."""
        rows_t = torch.as_tensor(list(rows), dtype=torch.long)
        x, p = torch.as_tensor(states, dtype=torch.float32), torch.as_tensor(target_probs, dtype=torch.float32)
        step = cross_entropy_chunk(len(states), self.config.hidden)
        out = []
        for start in range(0, len(rows_t), step):
            chunk = rows_t[start:start + step]
            logp = torch.log_softmax(self.actor(x.expand(len(chunk), -1, -1), chunk), -1)
            out.append(-(p * logp).sum(-1).mean(-1))
        return torch.cat(out).numpy() if out else np.zeros(0, np.float32)

    def actor_state(self, row: int) -> dict[str, np.ndarray]:
        return {k: v.numpy() for k, v in self.actor.lane_state(row).items()}

    def load_actor_state(self, row: int, state: dict[str, np.ndarray]) -> None:
        self.actor.load_lane_state(row, state)
        self._invalidate()

    def critic_state(self, row: int) -> dict[str, np.ndarray]:
        return {k: v.numpy() for k, v in self.critic.lane_state(row).items()}

    def load_critic_state(self, row: int, state: dict[str, np.ndarray]) -> None:
        self.critic.load_lane_state(row, state)
        self._invalidate()

    def networks(self, row: int) -> tuple[torch.nn.Sequential, torch.nn.Sequential]:
        """``row``'s actor and critic as standalone torch modules (``StackedMLP.lane_module``)."""
        return self.actor.lane_module(row), self.critic.lane_module(row)

    def keep(self, rows: Sequence[int]) -> None:
        """Keep only ``rows`` (in that order); call between updates."""
        self.learn()
        rows_t = torch.as_tensor(list(rows), dtype=torch.long)
        for part in (self.actor, self.critic, self.actor_opt, self.critic_opt, self.distill_opt, self.rollout):
            part.keep(rows_t)
        self.cache = kernel.ActCache(*(part[list(rows)] for part in self.cache))
        self.cache.ok[:] = False
        self._bind_arrays()
        self._rngs = [self._rngs[i] for i in rows]
        self._uniforms = np.ascontiguousarray(self._uniforms[:, list(rows)])
        if not isinstance(self._next_uniform, int):
            self._next_uniform = self._next_uniform[list(rows)]

"""Stable-Baselines3 learners as participants beside frd's A2C lanes (issue 43).

An SB3 agent (PPO, A2C, DQN) plays its own gymnasium env, stepped by SB3's own ``learn``, one
*collection* at a time: ``learn(1, reset_num_timesteps=False)`` collects one rollout (on-policy:
``n_steps``; DQN: ``train_freq``) and then trains on it (on-policy: ``train()``; DQN: its
``gradient_steps``), so it always stops at a safe point: after a rollout's update, or after a
collection's gradient steps. A callback records each step's state and each episode's end
(``Collection``); the runner (``frd.rl.runner``) plays those out on its run's clock.

What an exchange needs of it (``MixedPopulation``) is the same row interface as our population:
the policy's action probabilities at states (actor-critic: ``policy.get_distribution(obs)``; DQN:
softmax(Q/τ) [Rusu et al. 2016]), distillation into that policy with its own Adam, and the actor's
weights in our layout for FRL. SB3 draws from the process-wide random generators (python, numpy,
torch), so each agent keeps its own copy of their states and swaps it in while it runs: agents do
not draw from one another's streams, nor from frd's.
"""
from __future__ import annotations

import inspect
import random
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from frd.agents.a2c import distill_minibatches
from frd.agents.grouped import GroupedPopulation
from frd.agents.stacked import sequential
from frd.errors import FrdError

FRD = "frd"
"""``algo=`` of our own n-step A2C (the default learner)."""
ALGORITHMS = {"ppo": "PPO", "a2c-sb3": "A2C", "dqn": "DQN"}
"""``algo=`` → Stable-Baselines3 class (any SB3 algorithm for a Discrete action space)."""
ON_POLICY = frozenset({"ppo", "a2c-sb3"})

Q_TEMPERATURE = 0.01
"""τ of a DQN agent's policy softmax(Q/τ): Rusu et al. 2016 (§4) distil DQN teachers through a
softmax of their Q-values at τ = 0.01, their best temperature for the KL loss [our reading: the
same τ makes both the policy a DQN agent uploads and the one it distils into, as issue 43 §2 asks:
"distilled through the same softmax"]. ``SB3Config.q_student_temperature`` gives the other reading
of Rusu et al.'s KL loss, teacher at τ and student at τ = 1 (their student is a policy network,
ours a DQN that keeps learning by TD)."""

ZOO: dict[tuple[str, str], dict[str, Any]] = {
    ("ppo", "CartPole-v1"): dict(n_envs=8, n_timesteps=1e5, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98,
                                 n_epochs=20, ent_coef=0.0, learning_rate="lin_0.001", clip_range="lin_0.2"),
    ("ppo", "Acrobot-v1"): dict(n_envs=16, n_timesteps=1e6, n_steps=256, gae_lambda=0.94, gamma=0.99, n_epochs=4,
                                ent_coef=0.0),
    ("a2c-sb3", "CartPole-v1"): dict(n_envs=8, n_timesteps=5e5, ent_coef=0.0),
    ("a2c-sb3", "Acrobot-v1"): dict(n_envs=16, n_timesteps=5e5, ent_coef=0.0),
    ("dqn", "CartPole-v1"): dict(n_timesteps=5e4, learning_rate=2.3e-3, batch_size=64, buffer_size=100000,
                                 learning_starts=1000, gamma=0.99, target_update_interval=10, train_freq=256,
                                 gradient_steps=128, exploration_fraction=0.16, exploration_final_eps=0.04,
                                 net_arch=(256, 256)),
    ("dqn", "Acrobot-v1"): dict(n_timesteps=1e5, learning_rate=6.3e-4, batch_size=128, buffer_size=50000,
                                learning_starts=0, gamma=0.99, target_update_interval=250, train_freq=4,
                                gradient_steps=-1, exploration_fraction=0.12, exploration_final_eps=0.1,
                                net_arch=(256, 256)),
}
"""rl-baselines3-zoo's tuned hyperparameters (``hyperparams/{ppo,a2c,dqn}.yml``). Read with one env
per agent, like ours [our choice]: an on-policy rollout keeps the zoo's transitions per update
(``n_steps`` × ``n_envs``); ``n_timesteps`` is the horizon of the ``lin_`` schedules and of DQN's
exploration (past it they hold their last value); the zoo's ``normalize`` (VecNormalize, Acrobot's
PPO and A2C) is left out, since the states an agent shares must be the env's own. Another env:
SB3's own defaults over a 1e6-step horizon."""
DEFAULT_HORIZON = 1e6
SET_BY_FRD = frozenset({"policy", "env", "seed", "device", "verbose", "tensorboard_log", "_init_setup_model",
                        "policy_kwargs", "stats_window_size", "monitor_wrapper"})
"""Constructor arguments frd sets itself (``sb3.<name>`` may not)."""
EXTRA = frozenset({"n_timesteps", "net_arch"})
"""``sb3.<name>`` keys that are not constructor arguments: the schedules' horizon, the hidden layers."""


def sb3_module() -> Any:
    """``stable_baselines3``, or one line saying how to install it."""
    try:
        import stable_baselines3
    except ImportError:
        raise FrdError("algo=ppo/a2c-sb3/dqn needs Stable-Baselines3: pip install 'stable-baselines3>=2.3'") from None
    return stable_baselines3


def algorithm_class(algo: str) -> Any:
    if algo not in ALGORITHMS:
        raise FrdError(f"--agent-spec: unknown algo {algo!r}; choose one of {', '.join([FRD, *ALGORITHMS])}")
    return getattr(sb3_module(), ALGORITHMS[algo])


@dataclass(frozen=True)
class Linear:
    """rl-zoo's ``lin_<x>`` schedule: x × progress remaining (picklable, unlike a closure)."""

    initial: float

    def __call__(self, progress_remaining: float) -> float:
        return progress_remaining * self.initial


def _value(value: Any) -> Any:
    return Linear(float(value[4:])) if isinstance(value, str) and value.startswith("lin_") else value


@dataclass(frozen=True)
class SB3Config:
    """One SB3 agent's learner, resolved: algorithm, constructor arguments, hidden layers (their
    activation is SB3's default: tanh for actor-critic, ReLU for DQN), schedule horizon, τ."""

    algo: str
    kwargs: tuple[tuple[str, Any], ...]
    net_arch: tuple[int, ...]
    horizon: float
    q_temperature: float = Q_TEMPERATURE
    q_student_temperature: float | None = None
    """τ of the softmax(Q/τ) a DQN agent distils a teacher into (None: ``q_temperature``, the
    policy it uploads; 1: Rusu et al. 2016's KL loss read with the student at τ = 1)."""

    @property
    def student_temperature(self) -> float:
        return self.q_temperature if self.q_student_temperature is None else self.q_student_temperature

    @property
    def activation(self) -> str:
        return "tanh" if self.algo in ON_POLICY else "relu"

    def architecture(self, obs_dim: int, n_actions: int) -> str:
        """What FRL compares: the averaged network's kind, sizes and activation."""
        kind = "actor" if self.algo in ON_POLICY else "q-network"
        return f"{kind} {'-'.join(map(str, (obs_dim, *self.net_arch, n_actions)))} {self.activation}"


def sb3_config(algo: str, env_id: str, hidden: int | None = None, lr: float | None = None,
               overrides: Sequence[tuple[str, Any]] = (), q_temperature: float | None = None,
               q_student_temperature: float | None = None) -> SB3Config:
    """The zoo's hyperparameters for ``algo`` on ``env_id`` (``ZOO``), then ``h`` (hidden layers
    [h, h]), ``lr`` and the ``sb3.<name>`` overrides; an unknown name is refused."""
    cls = algorithm_class(algo)
    params = inspect.signature(cls.__init__).parameters
    zoo = dict(ZOO.get((algo, env_id), {}))
    n_envs, horizon = zoo.pop("n_envs", 1), zoo.pop("n_timesteps", DEFAULT_HORIZON)
    net_arch = tuple(zoo.pop("net_arch", (64, 64)))
    if algo in ON_POLICY:
        zoo["n_steps"] = zoo.get("n_steps", params["n_steps"].default) * n_envs
    if hidden is not None:
        net_arch = (hidden, hidden)
    if lr is not None:
        zoo["learning_rate"] = lr
    for name, value in overrides:
        if name == "n_timesteps":
            horizon = float(value)
        elif name == "net_arch":
            net_arch = tuple(int(w) for w in str(value).split("x"))
        elif name not in params or name in SET_BY_FRD or name == "self":
            known = sorted(set(params) - SET_BY_FRD - {"self"} | EXTRA)
            raise FrdError(f"--agent-spec: {ALGORITHMS[algo]} has no hyperparameter {name!r}; "
                           f"the sb3.<name> keys are {', '.join(known)}")
        else:
            zoo[name] = value
    return SB3Config(algo, tuple(sorted(zoo.items())), net_arch, horizon,
                     Q_TEMPERATURE if q_temperature is None else q_temperature, q_student_temperature)


@dataclass
class Collection:
    """What one ``learn`` call played: the state acted on at each step, the policy's action
    probabilities there (computed at the rollout's end, before the update: the policy it acted
    with), and each episode's end as (step of the collection, 1-based; unshaped return)."""

    states: list[np.ndarray] = field(default_factory=list)
    probs: np.ndarray | None = None
    ends: list[tuple[int, float]] = field(default_factory=list)

    @property
    def steps(self) -> int:
        return len(self.states)


class SB3Learner:
    """One SB3 agent: its model on its own env, played one collection at a time."""

    def __init__(self, config: SB3Config, env_id: str, seed: int, init_seed: int, threads: int = 1) -> None:
        """``init_seed`` draws the initial networks (agents of one run may share it, as ours do),
        ``seed`` the env's resets and the agent's every later draw."""
        sb3 = sb3_module()
        import gymnasium as gym
        from stable_baselines3.common.callbacks import BaseCallback
        from stable_baselines3.common.logger import Logger
        from stable_baselines3.common.vec_env import DummyVecEnv

        self.config = config
        kwargs = {k: _value(v) for k, v in config.kwargs}
        activation = nn.Tanh if config.algo in ON_POLICY else nn.ReLU
        net_arch = list(config.net_arch)
        policy_kwargs = dict(net_arch=dict(pi=net_arch, vf=net_arch) if config.algo in ON_POLICY else net_arch,
                             activation_fn=activation)
        outer = _global_rng()
        try:
            env = DummyVecEnv([partial(gym.make, env_id)])
            self.model = getattr(sb3, ALGORITHMS[config.algo])(
                "MlpPolicy", env, seed=init_seed, device="cpu", verbose=0, policy_kwargs=policy_kwargs, **kwargs)
            self.model.set_random_seed(seed)
            self._rng = _global_rng()
        finally:
            _set_global_rng(outer)
        # A logger of our own, writing nowhere: without one, every ``learn`` call makes an empty
        # ``SB3-<time>`` folder in the temp dir (SB3's ``configure_logger``), one per collection.
        self.model.set_logger(Logger(folder=None, output_formats=[]))
        # The schedules' progress over the fixed horizon, not over each one-collection ``learn`` call.
        self.model._update_current_progress_remaining = self._progress
        self.distill_opt: torch.optim.Adam | None = None
        self.score = 0.0  # the unshaped return of the episode going on
        self._callback_class = BaseCallback

    def _progress(self, num_timesteps: int, total_timesteps: int) -> None:
        self.model._current_progress_remaining = max(0.0, 1.0 - num_timesteps / self.config.horizon)

    @contextmanager
    def own_rng(self) -> Iterator[None]:
        """The process-wide generators at this agent's own states while inside."""
        outer = _global_rng()
        _set_global_rng(self._rng)
        try:
            yield
        finally:
            self._rng = _global_rng()
            _set_global_rng(outer)

    def collect(self) -> Collection:
        """Play one collection and learn from it (``learn(1)``: the loop stops once it has)."""
        played = Collection()
        learner = self

        class Recorder(self._callback_class):  # type: ignore[name-defined]
            def _on_step(self) -> bool:
                played.states.append(np.array(self.model._last_obs[0], np.float32))  # the state acted on
                learner.score += float(self.locals["rewards"][0])  # an episode may span collections
                if self.locals["dones"][0]:
                    played.ends.append((len(played.states), learner.score))
                    learner.score = 0.0
                return True

            def _on_rollout_end(self) -> None:  # before the update: the policy it acted with
                played.probs = learner.probabilities(np.array(played.states, np.float32))

        with self.own_rng():
            self.model.learn(1, callback=Recorder(), reset_num_timesteps=False, log_interval=None)
        return played

    # --- the policy as an exchange sees it -------------------------------------------------------

    def log_policy(self, states: torch.Tensor, *, student: bool = False) -> torch.Tensor:
        """log π(·|s) (differentiable): the actor's distribution, or log softmax(Q/τ) for DQN (the
        student's τ when ``student``: the policy a teacher is distilled into)."""
        policy = self.model.policy
        if self.config.algo in ON_POLICY:
            return torch.log_softmax(policy.get_distribution(states).distribution.logits, -1)
        tau = self.config.student_temperature if student else self.config.q_temperature
        return torch.log_softmax(policy.q_net(states) / tau, -1)

    @torch.no_grad()
    def probabilities(self, states: np.ndarray) -> np.ndarray:
        if not len(states):
            return np.zeros((0, int(self.model.action_space.n)), np.float32)
        return torch.exp(self.log_policy(torch.as_tensor(states, dtype=torch.float32))).numpy().astype(np.float32)

    @torch.no_grad()
    def cross_entropy(self, states: np.ndarray, target_probs: np.ndarray) -> float:
        logp = self.log_policy(torch.as_tensor(states, dtype=torch.float32), student=True)
        return float(-(torch.as_tensor(target_probs, dtype=torch.float32) * logp).sum(-1).mean())

    def policy_parameters(self) -> list[nn.Parameter]:
        """The parameters the policy's probabilities depend on (the actor, or DQN's Q-network)."""
        policy = self.model.policy
        if self.config.algo in ON_POLICY:
            return [*policy.pi_features_extractor.parameters(), *policy.mlp_extractor.policy_net.parameters(),
                    *policy.action_net.parameters()]
        return list(policy.q_net.parameters())

    def distill(self, states: np.ndarray, target_probs: np.ndarray, rng: np.random.Generator, *,
                epochs: int, batch: int, lr: float, steps: int | None = None) -> int:
        """``A2CPopulation.distill`` for this agent: the same minibatches, the same loss, its own
        Adam (torch's defaults, like ``LaneAdam``; its moments kept across rounds), not SB3's."""
        params = self.policy_parameters()
        if self.distill_opt is None:
            self.distill_opt = torch.optim.Adam(params, lr=lr)
        for group in self.distill_opt.param_groups:
            group["lr"] = lr
        x_all, p_all = torch.as_tensor(states, dtype=torch.float32), torch.as_tensor(target_probs, dtype=torch.float32)
        done = 0
        for idx in distill_minibatches(len(x_all), rng, epochs=epochs, batch=batch, steps=steps):
            self.distill_opt.zero_grad(set_to_none=True)
            loss = -(p_all[idx] * self.log_policy(x_all[idx], student=True)).sum(-1).mean()
            loss.backward()
            self.distill_opt.step()
            done += 1
        self.distill_opt.zero_grad(set_to_none=True)
        return done

    # --- weights in our layout (FRL) and as saved modules ---------------------------------------

    def _linears(self, role: str) -> list[nn.Linear]:
        policy = self.model.policy
        if self.config.algo not in ON_POLICY:
            return [m for m in policy.q_net.q_net if isinstance(m, nn.Linear)]
        body, head = ((policy.mlp_extractor.policy_net, policy.action_net) if role == "actor"
                      else (policy.mlp_extractor.value_net, policy.value_net))
        return [*(m for m in body if isinstance(m, nn.Linear)), head]

    def state(self, role: str) -> dict[str, np.ndarray]:
        """``role``'s layers as ``StackedMLP.lane_state`` names them: weight [in, out], bias [1, out]
        (DQN has no critic: its Q-network is its actor)."""
        if role == "critic" and self.config.algo not in ON_POLICY:
            return {}
        return {f"layer{i}.{kind}": (layer.weight.T if kind == "weight" else layer.bias[None]).detach().numpy().copy()
                for i, layer in enumerate(self._linears(role)) for kind in ("weight", "bias")}

    def load_state(self, role: str, state: Mapping[str, np.ndarray]) -> None:
        with torch.no_grad():
            for i, layer in enumerate(self._linears(role)):
                layer.weight.copy_(torch.as_tensor(state[f"layer{i}.weight"]).T)
                layer.bias.copy_(torch.as_tensor(state[f"layer{i}.bias"])[0])

    def networks(self) -> tuple[nn.Sequential, nn.Sequential]:
        """(actor, critic) as ``sequential`` modules; a DQN agent's actor gives Q/τ (its policy's
        logits) and its critic the Q-values."""
        out = []
        for role in ("actor", "critic"):
            linears = self._linears(role)
            module = sequential([linears[0].in_features, *(m.out_features for m in linears)], self.config.activation)
            with torch.no_grad():
                for target, source in zip((m for m in module if isinstance(m, nn.Linear)), linears):
                    target.weight.copy_(source.weight)
                    target.bias.copy_(source.bias)
                if role == "actor" and self.config.algo not in ON_POLICY:
                    last = [m for m in module if isinstance(m, nn.Linear)][-1]
                    last.weight.div_(self.config.q_temperature)
                    last.bias.div_(self.config.q_temperature)
            out.append(module)
        return out[0], out[1]


def _global_rng() -> tuple[Any, Any, torch.Tensor]:
    return random.getstate(), np.random.get_state(), torch.get_rng_state()


def _set_global_rng(states: tuple[Any, Any, torch.Tensor]) -> None:
    random.setstate(states[0])
    np.random.set_state(states[1])
    torch.set_rng_state(states[2])


class MixedPopulation:
    """``GroupedPopulation``'s row interface where some rows are SB3 agents (``sb3``: row → agent);
    what an exchange does to a row goes to whichever learner holds it."""

    def __init__(self, population: GroupedPopulation, sb3: Mapping[int, SB3Learner]) -> None:
        self.population, self.sb3 = population, dict(sb3)

    def distill(self, rows: Sequence[int], states: np.ndarray, target_probs: np.ndarray,
                rng: np.random.Generator, *, epochs: int, batch: int, lr: float, steps: int | None = None) -> int:
        """Every learner on the same minibatches (``rng`` replayed from its state for each)."""
        start, done = rng.bit_generator.state, 0
        ours = [r for r in rows if r not in self.sb3]
        if ours:
            done = self.population.distill(ours, states, target_probs, rng, epochs=epochs, batch=batch, lr=lr,
                                           steps=steps)
        for row in (r for r in rows if r in self.sb3):
            rng.bit_generator.state = start
            done = self.sb3[row].distill(states, target_probs, rng, epochs=epochs, batch=batch, lr=lr, steps=steps)
        return done

    def cross_entropy(self, rows: Sequence[int], states: np.ndarray, target_probs: np.ndarray) -> np.ndarray:
        out = np.empty(len(rows), np.float32)
        ours = [i for i, r in enumerate(rows) if r not in self.sb3]
        if ours:
            out[ours] = self.population.cross_entropy([rows[i] for i in ours], states, target_probs)
        for i, r in enumerate(rows):
            if r in self.sb3:
                out[i] = self.sb3[r].cross_entropy(states, target_probs)
        return out

    def policy(self, row: int, states: np.ndarray) -> np.ndarray:
        return self.sb3[row].probabilities(states) if row in self.sb3 else self.population.policy(row, states)

    def actor_state(self, row: int) -> dict[str, np.ndarray]:
        return self.sb3[row].state("actor") if row in self.sb3 else self.population.actor_state(row)

    def load_actor_state(self, row: int, state: dict[str, np.ndarray]) -> None:
        if row in self.sb3:
            self.sb3[row].load_state("actor", state)
        else:
            self.population.load_actor_state(row, state)

    def critic_state(self, row: int) -> dict[str, np.ndarray]:
        return self.sb3[row].state("critic") if row in self.sb3 else self.population.critic_state(row)

    def load_critic_state(self, row: int, state: dict[str, np.ndarray]) -> None:
        if row in self.sb3:
            self.sb3[row].load_state("critic", state)
        else:
            self.population.load_critic_state(row, state)

    def networks(self, row: int) -> tuple[nn.Sequential, nn.Sequential]:
        return self.sb3[row].networks() if row in self.sb3 else self.population.networks(row)

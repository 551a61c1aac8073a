"""Every (run, agent) pair as one lane of a single gymnasium vector env.

Two guarantees the exchange methods rely on:

* Same-step autoreset: ``step`` returns the true next state of each lane (``final_obs``) and,
  for lanes whose episode just ended, the first state of their next episode as ``obs``. No
  transition ever spans two episodes.
* Lanes are independent: each draws its resets from its own seeded generator and only the
  lanes named ``active`` advance, so a lane's trajectory depends on its own seed and actions,
  not on which other runs share the batch or how long its run waits at an exchange barrier.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

import gymnasium as gym
import numpy as np

from frd.errors import FrdError

CARTPOLE = "CartPole-v1"


@dataclass
class LaneStep:
    obs: np.ndarray        # [L, d] state to act on next (a fresh episode's first state after a done)
    final_obs: np.ndarray  # [L, d] the state this step actually reached
    reward: np.ndarray     # [L]
    terminated: np.ndarray  # [L] bool
    truncated: np.ndarray  # [L] bool


def check_env_id(env_id: str) -> gym.Env:
    """Make one instance of ``env_id`` or say clearly why it cannot serve as a lane."""
    try:
        env = gym.make(env_id)
    except gym.error.Error as exc:
        raise FrdError(f"unknown gymnasium env {env_id!r} ({exc}); try CartPole-v1") from None
    if not isinstance(env.action_space, gym.spaces.Discrete):
        raise FrdError(f"{env_id} has {type(env.action_space).__name__} actions; the agents need a Discrete action space")
    space = env.observation_space
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
        raise FrdError(f"{env_id} observations are {space}; the agents need a flat Box observation space")
    return env


class Lanes(Protocol):
    """What the runner needs of either vectorization path."""

    obs_dim: int
    n_actions: int
    observation_space: gym.spaces.Box

    def reset(self) -> np.ndarray: ...

    def step(self, actions: np.ndarray, active: np.ndarray) -> LaneStep: ...


class CartPoleLanes:
    """gymnasium's CartPole vector entry point (one numpy step for all lanes), lane-seeded.

    The vector env draws resets from one shared generator; here each lane redraws its reset
    state from its own, and inactive lanes are held still by restoring their state.
    """

    def __init__(self, lane_seeds: Sequence[int]) -> None:
        self.env = gym.make_vec(CARTPOLE, num_envs=len(lane_seeds), vectorization_mode="vector_entry_point")
        core: Any = self.env.unwrapped  # gymnasium's CartPoleVectorEnv: state, steps, low, high
        self.core = core
        self.rngs = [np.random.default_rng(s) for s in lane_seeds]
        self.observation_space: gym.spaces.Box = core.single_observation_space
        self.obs_dim = int(self.observation_space.shape[0])
        self.n_actions = int(core.single_action_space.n)

    def _fresh_states(self, lanes: np.ndarray) -> np.ndarray:
        return np.stack([self.rngs[i].uniform(self.core.low, self.core.high, 4) for i in lanes], axis=1)

    def reset(self) -> np.ndarray:
        self.env.reset()
        self.core.state = self._fresh_states(np.arange(len(self.rngs)))
        return self.core.state.T.astype(np.float32)

    def step(self, actions: np.ndarray, active: np.ndarray) -> LaneStep:
        core = self.core
        frozen = ~active
        if frozen.any():
            held = core.state[:, frozen].copy(), core.steps[frozen].copy()
        _, reward, terminated, truncated, _ = self.env.step(actions.astype(np.int64))
        final_obs = core.state.T.astype(np.float32)
        done = (terminated | truncated) & active
        if frozen.any():
            core.state[:, frozen], core.steps[frozen] = held
            reward, terminated, truncated = reward * active, terminated & active, truncated & active
        if done.any():
            lanes = np.flatnonzero(done)
            core.state[:, lanes] = self._fresh_states(lanes)
            core.steps[lanes] = 0
        core.prev_done[:] = False  # resets are ours: the env must never autoreset a lane
        return LaneStep(core.state.T.astype(np.float32), final_obs, reward.astype(np.float32), terminated, truncated)


class GenericLanes:
    """Any Box-observation, Discrete-action gymnasium env: one instance per lane, own seed."""

    def __init__(self, env_id: str, lane_seeds: Sequence[int]) -> None:
        self.envs = [check_env_id(env_id) for _ in lane_seeds]
        self.seeds = list(lane_seeds)
        first: Any = self.envs[0]  # checked by check_env_id: Box observations, Discrete actions
        self.observation_space: gym.spaces.Box = first.observation_space
        self.obs_dim = int(self.observation_space.shape[0])
        self.n_actions = int(first.action_space.n)
        self.obs = np.zeros((len(self.envs), self.obs_dim), np.float32)

    def reset(self) -> np.ndarray:
        for i, (env, seed) in enumerate(zip(self.envs, self.seeds)):
            self.obs[i] = env.reset(seed=seed)[0]
        return self.obs.copy()

    def step(self, actions: np.ndarray, active: np.ndarray) -> LaneStep:
        n = len(self.envs)
        final = self.obs.copy()
        reward = np.zeros(n, np.float32)
        terminated, truncated = np.zeros(n, bool), np.zeros(n, bool)
        for i in np.flatnonzero(active):
            final[i], reward[i], terminated[i], truncated[i], _ = self.envs[i].step(int(actions[i]))
            self.obs[i] = self.envs[i].reset()[0] if terminated[i] or truncated[i] else final[i]
        return LaneStep(self.obs.copy(), final, reward, terminated, truncated)


def make_lanes(env_id: str, lane_seeds: Sequence[int]) -> Lanes:
    """CartPole uses gymnasium's vectorized entry point; other envs run one instance per lane."""
    check_env_id(env_id).close()
    return CartPoleLanes(lane_seeds) if env_id == CARTPOLE else GenericLanes(env_id, lane_seeds)

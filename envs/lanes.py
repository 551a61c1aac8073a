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

from typing import Any, NamedTuple, Sequence

import gymnasium as gym
import numpy as np

from frd.envs.acrobot import ACROBOT, AcrobotLanes
from frd.envs.step import Lanes, LaneStep
from frd.errors import FrdError
from frd.jit import compiled

CARTPOLE = "CartPole-v1"
RESET_BLOCK = 256  # episode starts a CartPole lane draws from its generator at once
ACROBOT_AT_ONCE = 8
"""Acrobot lanes from which stepping all at once beats an instance per lane: its ~200 numpy
calls per step cost more than 4 instances' steps, less than 8 (``python -m benchmarks.env_step``)."""


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


@compiled(error_model="numpy")
def _cartpole_step(state, steps, actions, active, gravity, masspole, total_mass, length, polemass_length,
                   force_mag, tau, x_threshold, theta_threshold, max_steps, resets, next_reset, obs, final_obs,
                   reward, terminated, truncated):
    """gymnasium's ``CartPoleVectorEnv.step`` (Euler), lane by lane, same operations in the same
    order (bit-identical, tested); lanes not ``active`` keep their state and step count. A lane
    whose episode ends starts its next one from its next pre-drawn state ``resets[i, next_reset[i]]``
    (a Python loop over those lanes cost more than the step). Returns how many lanes have used up
    their pre-drawn states."""
    exhausted = 0
    for i in range(state.shape[1]):
        x, x_dot, theta, theta_dot = state[0, i], state[1, i], state[2, i], state[3, i]
        force = np.sign(actions[i] - 0.5) * force_mag
        costheta = np.cos(theta)
        sintheta = np.sin(theta)
        temp = (force + polemass_length * np.square(theta_dot) * sintheta) / total_mass
        thetaacc = (gravity * sintheta - costheta * temp) / (
            length * (4.0 / 3.0 - masspole * np.square(costheta) / total_mass))
        xacc = temp - polemass_length * thetaacc * costheta / total_mass
        x = x + tau * x_dot
        x_dot = x_dot + tau * xacc
        theta = theta + tau * theta_dot
        theta_dot = theta_dot + tau * thetaacc
        final_obs[i, 0], final_obs[i, 1], final_obs[i, 2], final_obs[i, 3] = x, x_dot, theta, theta_dot
        if active[i]:
            state[0, i], state[1, i], state[2, i], state[3, i] = x, x_dot, theta, theta_dot
            steps[i] += 1
            terminated[i] = x < -x_threshold or x > x_threshold or theta < -theta_threshold or theta > theta_threshold
            truncated[i] = steps[i] >= max_steps
            reward[i] = 1.0
        else:
            terminated[i] = truncated[i] = False
            reward[i] = 0.0
        if terminated[i] or truncated[i]:
            for k in range(4):
                state[k, i] = resets[i, next_reset[i], k]
            steps[i] = 0
            next_reset[i] += 1
        exhausted += next_reset[i] == resets.shape[1]
        for k in range(4):
            obs[i, k] = state[k, i]
    return exhausted


class CartPoleState(NamedTuple):
    """What ``_cartpole_step`` reads and writes of every lane, for a caller that steps lanes itself
    (``frd.rl.fused``): the state [4, L], the steps into the episode, the physics constants (float64,
    ``_cartpole_step``'s order), the step limit, the pre-drawn first states and which is next."""

    state: np.ndarray
    steps: np.ndarray
    constants: np.ndarray
    max_steps: int
    resets: np.ndarray
    next_reset: np.ndarray


class CartPoleLanes:
    """CartPole with gymnasium's vector physics (``CartPoleVectorEnv``), lane-seeded.

    The vector env draws resets from one shared generator; here each lane redraws its reset
    state from its own, and inactive lanes are held still. The step itself is gymnasium's
    vectorized CartPole step done lane by lane in numba (``_cartpole_step``; the vector env's
    numpy step plus holding lanes still cost more than the A2C update at 64 lanes); a test
    holds it bit for bit to ``CartPoleVectorEnv.step``.
    """

    def __init__(self, lane_seeds: Sequence[int]) -> None:
        self.env = gym.make_vec(CARTPOLE, num_envs=len(lane_seeds), vectorization_mode="vector_entry_point")
        core: Any = self.env.unwrapped  # gymnasium's CartPoleVectorEnv: state, steps, low, high, constants
        self.core = core
        if core.kinematics_integrator != "euler" or core._sutton_barto_reward:
            raise RuntimeError("CartPoleLanes reproduces gymnasium's default CartPole (Euler, reward 1 per step)")
        self.rngs = [np.random.default_rng(s) for s in lane_seeds]
        self.observation_space: gym.spaces.Box = core.single_observation_space
        self.obs_dim = int(self.observation_space.shape[0])
        self.n_actions = int(core.single_action_space.n)
        self.constants = (core.gravity, core.masspole, core.total_mass, core.length, core.polemass_length,
                          core.force_mag, core.tau, core.x_threshold, core.theta_threshold_radians,
                          core.max_episode_steps)
        self.resets = np.empty((len(lane_seeds), RESET_BLOCK, 4))           # each lane's next first states
        self.next_reset = np.full(len(lane_seeds), RESET_BLOCK, np.int64)  # … and which is next

    def _fresh_states(self, lanes: np.ndarray) -> np.ndarray:
        """The next episode's first state of each of ``lanes`` ([4, len(lanes)]), each from its
        lane's own generator, in the order the lane draws them."""
        if (self.next_reset[lanes] == RESET_BLOCK).any():
            self._draw_resets()
        states = self.resets[lanes, self.next_reset[lanes]].T
        self.next_reset[lanes] += 1
        return states

    def _draw_resets(self, keep: int = 0) -> None:
        """Refill the lanes with at most ``keep`` pre-drawn first states left: their unused ones
        move to the front and the block is topped up from the lane's generator (the same numbers,
        in the same order, as one draw per reset)."""
        for i in np.flatnonzero(self.next_reset >= RESET_BLOCK - keep):
            used = self.next_reset[i]
            self.resets[i] = np.concatenate([self.resets[i, used:],
                                             self.rngs[i].uniform(self.core.low, self.core.high, (used, 4))])
            self.next_reset[i] = 0

    def reserve_resets(self, steps: int) -> None:
        """A first state ready for each of the next ``steps`` steps of every lane (at most one
        episode ends per step; ``steps`` ≤ ``RESET_BLOCK``), for a caller that steps the lanes
        through ``_cartpole_step`` without refilling between steps (``frd.rl.fused``)."""
        self._draw_resets(keep=steps - 1)

    def kernel_state(self) -> CartPoleState:
        """The lanes' arrays themselves (stepping them steps the lanes)."""
        return CartPoleState(self.core.state, self.core.steps, np.array(self.constants[:-1], np.float64),
                             self.constants[-1], self.resets, self.next_reset)

    def reset(self) -> np.ndarray:
        self.env.reset()
        self.core.state = np.ascontiguousarray(self._fresh_states(np.arange(len(self.rngs))))
        return self.core.state.T.astype(np.float32)

    def step(self, actions: np.ndarray, active: np.ndarray) -> LaneStep:
        core, L = self.core, len(self.rngs)
        obs, final_obs = np.empty((L, 4), np.float32), np.empty((L, 4), np.float32)
        reward, terminated, truncated = np.empty(L, np.float32), np.empty(L, bool), np.empty(L, bool)
        if _cartpole_step(core.state, core.steps, np.ascontiguousarray(actions, dtype=np.int64),
                          np.ascontiguousarray(active, dtype=bool), *self.constants, self.resets,
                          self.next_reset, obs, final_obs, reward, terminated, truncated):
            self._draw_resets()  # so that every lane has a first state ready for the next step
        return LaneStep(obs, final_obs, reward, terminated, truncated)


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
    """CartPole uses gymnasium's vectorized entry point, Acrobot from ``ACROBOT_AT_ONCE`` lanes on
    its arithmetic over all lanes at once (the same trajectories either way); other envs, and
    fewer Acrobot lanes, run one instance per lane."""
    check_env_id(env_id).close()
    if env_id == CARTPOLE:
        return CartPoleLanes(lane_seeds)
    if env_id == ACROBOT and len(lane_seeds) >= ACROBOT_AT_ONCE:
        return AcrobotLanes(lane_seeds)
    return GenericLanes(env_id, lane_seeds)

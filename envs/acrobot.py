"""Acrobot-v1 for every lane at once: gymnasium's own arithmetic on arrays of lanes.

gymnasium has no vector Acrobot, and one instance per lane spends ~55 µs of Python per step in
its Runge-Kutta integration. Here each operation of ``AcrobotEnv.step`` (``_dsdt``, ``rk4``,
``wrap``, ``bound``, ``_terminal``, ``_get_ob``) runs once over all active lanes, in the same
order and dtypes (a reset state is float32, integration float64), so every lane's trajectory is
bit for bit that of its own gymnasium instance (a test holds it to ``GenericLanes``). Resets come
from each lane's own generator, seeded as ``env.reset(seed=...)`` seeds it.
"""
from __future__ import annotations

from typing import Any, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding
from numpy import cos, pi, sin

from frd.envs.step import LaneStep
from frd.jit import compiled

ACROBOT = "Acrobot-v1"
RESET_LOW, RESET_HIGH = -0.1, 0.1  # AcrobotEnv.reset's default bounds


@compiled()
def _pow(x: np.ndarray, exponent: float) -> np.ndarray:
    """``x ** exponent`` element by element through libm's ``pow``, as numpy computes a float64
    scalar's ``** 2``; an array's ``** 2`` multiplies instead, which differs in the last bit for
    ~0.1 % of values. (``exponent`` is an argument so that the compiler cannot make it a product.)"""
    out = np.empty(x.shape)
    for i in range(x.shape[0]):
        out[i] = x[i] ** exponent
    return out


def square(x: np.ndarray) -> np.ndarray:
    return _pow(x, 2.0)


def observe(state: np.ndarray) -> np.ndarray:
    """``_get_ob`` of [L, 4] states: cos/sin in the state's own dtype, then float32."""
    s0, s1 = state[:, 0], state[:, 1]
    return np.stack([cos(s0), sin(s0), cos(s1), sin(s1), state[:, 2], state[:, 3]], axis=1).astype(np.float32)


def wrap(x: np.ndarray, m: float, M: float) -> np.ndarray:
    """gymnasium's ``wrap``, lane by lane: subtract the range while above M, then add it while below m."""
    diff = M - m
    while (over := x > M).any():
        x = np.where(over, x - diff, x)
    while (under := x < m).any():
        x = np.where(under, x + diff, x)
    return x


class AcrobotLanes:
    """Acrobot-v1 lanes (the book dynamics, no torque noise: gymnasium's defaults)."""

    def __init__(self, lane_seeds: Sequence[int]) -> None:
        env = gym.make(ACROBOT)
        core: Any = env.unwrapped
        if core.book_or_nips != "book" or core.torque_noise_max != 0:
            raise RuntimeError("AcrobotLanes reproduces gymnasium's default Acrobot (book dynamics, no torque noise)")
        self.core = core
        self.max_steps = int(env.spec.max_episode_steps) if env.spec and env.spec.max_episode_steps else 0
        self.rngs = [seeding.np_random(int(s))[0] for s in lane_seeds]
        self.observation_space: gym.spaces.Box = core.observation_space
        self.obs_dim = int(self.observation_space.shape[0])
        self.n_actions = int(core.action_space.n)
        self.torques = np.asarray(core.AVAIL_TORQUE, np.float64)
        n = len(lane_seeds)
        self.state = np.zeros((n, 4))
        self.steps = np.zeros(n, np.int64)
        self.obs = np.zeros((n, self.obs_dim), np.float32)

    def _reset(self, lanes: np.ndarray) -> None:
        fresh = np.stack([self.rngs[i].uniform(low=RESET_LOW, high=RESET_HIGH, size=(4,)).astype(np.float32)
                          for i in lanes])
        self.state[lanes], self.steps[lanes], self.obs[lanes] = fresh, 0, observe(fresh)

    def reset(self) -> np.ndarray:
        self._reset(np.arange(len(self.rngs)))
        return self.obs.copy()

    def _dsdt(self, s: np.ndarray, a: np.ndarray) -> np.ndarray:
        """``AcrobotEnv._dsdt`` (book) of [L, 4] states under torques a, written as gymnasium writes it."""
        c = self.core
        m1, m2, l1, lc1, lc2, I1, I2 = (c.LINK_MASS_1, c.LINK_MASS_2, c.LINK_LENGTH_1, c.LINK_COM_POS_1,
                                        c.LINK_COM_POS_2, c.LINK_MOI, c.LINK_MOI)
        g = 9.8
        theta1, theta2, dtheta1, dtheta2 = s[:, 0], s[:, 1], s[:, 2], s[:, 3]
        d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * cos(theta2)) + I1 + I2
        d2 = m2 * (lc2**2 + l1 * lc2 * cos(theta2)) + I2
        phi2 = m2 * lc2 * g * cos(theta1 + theta2 - pi / 2.0)
        phi1 = (
            -m2 * l1 * lc2 * square(dtheta2) * sin(theta2)
            - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin(theta2)
            + (m1 * lc1 + m2 * l1) * g * cos(theta1 - pi / 2)
            + phi2
        )
        ddtheta2 = (
            a + d2 / d1 * phi1 - m2 * l1 * lc2 * square(dtheta1) * sin(theta2) - phi2
        ) / (m2 * lc2**2 + I2 - square(d2) / d1)
        ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
        return np.stack([dtheta1, dtheta2, ddtheta1, ddtheta2], axis=1)

    def _next_state(self, y0: np.ndarray, a: np.ndarray) -> np.ndarray:
        """``rk4`` over one step of ``dt`` (the torque, rk4's fifth component, has derivative 0)."""
        dt = self.core.dt
        dt2 = dt / 2.0
        k1 = self._dsdt(y0, a)
        k2 = self._dsdt(y0 + dt2 * k1, a)
        k3 = self._dsdt(y0 + dt2 * k2, a)
        k4 = self._dsdt(y0 + dt * k3, a)
        ns = y0 + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        ns[:, 0] = wrap(ns[:, 0], -pi, pi)
        ns[:, 1] = wrap(ns[:, 1], -pi, pi)
        ns[:, 2] = np.minimum(np.maximum(ns[:, 2], -self.core.MAX_VEL_1), self.core.MAX_VEL_1)
        ns[:, 3] = np.minimum(np.maximum(ns[:, 3], -self.core.MAX_VEL_2), self.core.MAX_VEL_2)
        return ns

    def step(self, actions: np.ndarray, active: np.ndarray) -> LaneStep:
        n = len(self.rngs)
        final = self.obs.copy()
        reward = np.zeros(n, np.float32)
        terminated, truncated = np.zeros(n, bool), np.zeros(n, bool)
        lanes = np.flatnonzero(active)
        if lanes.size:
            ns = self._next_state(self.state[lanes], self.torques[np.asarray(actions)[lanes]])
            self.state[lanes] = ns
            self.steps[lanes] += 1
            final[lanes] = self.obs[lanes] = observe(ns)
            done = -cos(ns[:, 0]) - cos(ns[:, 1] + ns[:, 0]) > 1.0
            out_of_time = self.steps[lanes] >= self.max_steps
            terminated[lanes], truncated[lanes], reward[lanes] = done, out_of_time, np.where(done, 0.0, -1.0)
            ended = lanes[done | out_of_time]
            if ended.size:
                self._reset(ended)
        return LaneStep(self.obs.copy(), final, reward, terminated, truncated)

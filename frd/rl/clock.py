"""A run's agents on the virtual clock (``frd.clock``): each agent's time is its steps at its device's
rate plus its rounds, so an episode's end, a transfer and the mission each get a time in virtual seconds.

An agent's work is counted per env step [our choice, in FLOPs of its MLPs: 2 per weight per sample,
biases and activations left out]: the acting forward of its actor; its share of the update, forward
and backward (3 passes) of actor and critic per sample of the rollout plus its optimizer's 4 FLOPs per
weight, spread over the rollout's steps; and the env's own step (``ENV_STEP_FLOPS``). A distillation
minibatch costs three actor passes per sample plus the optimizer's. Between two rounds an agent's time is
linear in its steps, so the lockstep batch stays as it is: a time is read off an agent's step count.
Under ``sync`` every participant resumes when the round's last download is in (``frd.clock``), so with
one kind of device, one architecture and every agent taking part, the agents of a run share one clock and
the first to complete in episodes is the first in seconds.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from frd.agents.a2c import A2CConfig
from frd.clock import Devices, RoundTimes, RoundTiming
from frd.rl.config import RLConfig

ENV_STEP_FLOPS = {"CartPole-v1": 100.0, "CartPole-v0": 100.0, "Acrobot-v1": 2000.0, "MountainCar-v0": 20.0,
                  "LunarLander-v3": 20000.0}
"""An env step's own work, FLOPs [our choice, order-of-magnitude counts of each env's step: CartPole's Euler
step with a sine and a cosine; Acrobot's RK4 of 4 derivative evaluations; LunarLander's Box2D step]."""
OTHER_ENV_STEP_FLOPS = 1000.0
"""An env not in ``ENV_STEP_FLOPS`` [our choice]."""


def _mlp_macs(sizes: list[int]) -> int:
    return sum(a * b for a, b in zip(sizes, sizes[1:]))


def _params(sizes: list[int]) -> int:
    return sum(a * b + b for a, b in zip(sizes, sizes[1:]))


def step_flops(config: A2CConfig, obs_dim: int, n_actions: int, env_id: str) -> float:
    """One env step of an agent with ``config``'s networks (the module's count)."""
    actor = [obs_dim, config.hidden, config.hidden, n_actions]
    critic = [obs_dim, config.hidden, config.hidden, 1]
    acting = 2 * _mlp_macs(actor)
    update = 3 * 2 * (_mlp_macs(actor) + _mlp_macs(critic)) + 4 * (_params(actor) + _params(critic)) / config.n_steps
    return acting + update + ENV_STEP_FLOPS.get(env_id, OTHER_ENV_STEP_FLOPS)


def distill_flops(config: A2CConfig, obs_dim: int, n_actions: int, batch: int) -> float:
    """One distillation minibatch of ``batch`` states."""
    actor = [obs_dim, config.hidden, config.hidden, n_actions]
    return 3 * 2 * _mlp_macs(actor) * batch + 4 * _params(actor)


class RunClock:
    """One run's agents on the virtual clock: where each agent's time stood at its last round
    (``origin``, at ``steps0`` of its env steps), its seconds per step and per distillation minibatch,
    and when the run's latest round ended (the next one opens)."""

    def __init__(self, config: RLConfig, obs_dim: int, n_actions: int, seed: int, distill_batch: int) -> None:
        self.devices = Devices(config.clock(), seed, config.agents)
        learners = config.agent_configs()
        self.step_s = np.array([self.devices.seconds(a, step_flops(c, obs_dim, n_actions, config.env_id))
                                for a, c in enumerate(learners)])
        self.distill_s = np.array([self.devices.seconds(a, distill_flops(c, obs_dim, n_actions, distill_batch))
                                   for a, c in enumerate(learners)])
        self.origin = np.zeros(config.agents)
        self.steps0 = np.zeros(config.agents, np.int64)
        self.opened = 0.0

    def at(self, agent: int, env_steps: int) -> float:
        """``agent``'s time once it has taken ``env_steps`` steps (since its start), before its next round."""
        return float(self.origin[agent] + (env_steps - self.steps0[agent]) * self.step_s[agent])

    def timing(self, env_steps: Mapping[int, int]) -> RoundTiming:
        """The round of the agents in ``env_steps`` (agent → its steps), each uploading as it arrives."""
        return RoundTiming(self.opened, {a: self.at(a, n) for a, n in env_steps.items()}, self.devices)

    def after_round(self, times: RoundTimes, env_steps: Mapping[int, int], minibatches: Mapping[int, int]) -> None:
        """Each participant resumes when the round says, then distils its ``minibatches``."""
        for a, resume in times.resume.items():
            self.origin[a] = resume + minibatches.get(a, 0) * self.distill_s[a]
            self.steps0[a] = env_steps[a]
        self.opened = times.ended

"""The mission [Seo et al. 2022, §4]: complete when an agent's mean score over its latest
``window`` episodes first reaches ``target``. Its target per env is here; the engine applies the
rule in ``frd.rl.episode_end``."""
from __future__ import annotations

import gymnasium as gym

from frd.errors import FrdError

SEED_TARGETS = {"CartPole-v1": 490.0}
"""Missions the sources set [Seo et al. 2022, §4: CartPole, mean of the latest 10 episodes ≥ 490]."""


def default_target(env_id: str) -> float:
    """The env's mission score: the FRD chapter's for CartPole, else gymnasium's ``reward_threshold``
    (Acrobot-v1 −100, MountainCar-v0 −110, LunarLander-v3 200)."""
    if env_id in SEED_TARGETS:
        return SEED_TARGETS[env_id]
    threshold = gym.spec(env_id).reward_threshold
    if threshold is None:
        raise FrdError(f"{env_id} has no documented mission score; give one with --target")
    return float(threshold)

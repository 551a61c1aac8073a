"""Shared pieces of the benchmarks: the Stable-Baselines3 reference and timing helpers."""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from collections import deque

import numpy as np
import torch
from stable_baselines3 import A2C
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env


def sb3_a2c(seed: int) -> A2C:
    """SB3 A2C with the rl-zoo CartPole-v1 settings (8 envs, ent_coef 0, MlpPolicy 64-64)."""
    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    return A2C("MlpPolicy", env, ent_coef=0.0, seed=seed, device="cpu", verbose=0)


class MissionCallback(BaseCallback):
    """Stops SB3 when the mean of its latest ``window`` episodes reaches ``target`` [Seo et al. 2022, §4]."""

    def __init__(self, target: float = 490.0, window: int = 10) -> None:
        super().__init__()
        self.scores: deque[float] = deque(maxlen=window)
        self.target, self.window = target, window
        self.episodes = 0
        self.completed = False

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            if "episode" in info:
                self.scores.append(info["episode"]["r"])
                self.episodes += 1
                if len(self.scores) == self.window and np.mean(self.scores) >= self.target:
                    self.completed = True
                    return False
        return True


class Clock:
    """Wall and process-CPU seconds of a block. Both runners here are single-threaded in this
    process, so CPU seconds compare them fairly even while other jobs load the machine."""

    def __enter__(self) -> "Clock":
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.wall, self.cpu = time.perf_counter() - self._wall, time.process_time() - self._cpu


def sb3_steps(timesteps: int, seed: int = 0) -> Clock:
    model = sb3_a2c(seed)
    with Clock() as clock:
        model.learn(total_timesteps=timesteps)
    return clock


def set_threads(n: int) -> None:
    torch.set_num_threads(n)


def frd_child(args: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (the child and every process below it) of ``python -m frd *args`` run
    from this checkout, its output discarded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "frd", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, "PYTHONPATH": os.getcwd()})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

"""RL's saved agents (``frd.saved``): each agent's final actor and critic, and ``frd eval``'s play.

A run saves, per agent, its actor and critic as ``agent<i>.actor`` and ``agent<i>.critic``: state
dicts of ``frd.agents.stacked.sequential`` modules (``nn.Linear`` layers, ``0.weight`` [out, in],
``0.bias``, ``2.…``, ``4.…``), with ``sizes`` and ``activation`` per network in the metadata. The
weights are those after the update that takes in the run's last steps (``RLBatch._take_models``).

``frd eval`` plays each agent's actor on fresh gymnasium instances of the run's env, like
Stable-Baselines3's ``evaluate_policy``: greedily (argmax) and with actions sampled from the
policy, ``--episodes`` episodes each, and reports the mean and standard deviation (ddof 0, as
``evaluate_policy``) of the unshaped return. Episode k starts from
``reset(seed=derive_seed(S, k, RL_EVAL_STATES))`` for every agent and both ways of acting, so
agents are compared on the same first states [our choice]; its sampled actions draw from their
own generator, so the same ``--seed`` gives the same returns.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Mapping, Sequence

import gymnasium as gym
import numpy as np
import pandas as pd
import torch
from torch import nn

from frd.agents.stacked import MODULE_ACTIVATIONS, sequential
from frd.errors import FrdError
from frd.results import run_id
from frd.rl.config import RLConfig
from frd.saved import EvalRequest, SavedModels, models_file
from frd.seeding import Stream, derive_seed

EPISODES = 100
"""``frd eval``'s episodes per agent and way of acting (SB3's ``evaluate_policy`` plays 10; more
make the std meaningful) [our choice]."""
ACTING = ("greedy", "sampled")
MISSING_VIDEO = "--video needs moviepy (gymnasium's RecordVideo writes the files with it): pip install moviepy"


def agents_file(config: RLConfig, method: str, seed: int, networks: Mapping[int, tuple[nn.Sequential, nn.Sequential]]) -> bytes:
    """A run's saved file: ``networks`` maps each agent to its (actor, critic)."""
    described, state_dicts = {}, {}
    for agent, pair in sorted(networks.items()):
        for role, net in zip(("actor", "critic"), pair):
            linears = [layer for layer in net if isinstance(layer, nn.Linear)]
            described[f"agent{agent}.{role}"] = {
                "sizes": [layer.in_features for layer in linears] + [linears[-1].out_features],
                "activation": activation_of(net, config.activation)}
            state_dicts[f"agent{agent}.{role}"] = net.state_dict()
    metadata = {"run_id": run_id(method, seed), "method": method, "seed": seed, "env_id": config.env_id,
                "agents": sorted(networks), "networks": described}
    return models_file("rl", metadata, state_dicts)


def activation_of(net: nn.Sequential, default: str) -> str:
    """The name of ``net``'s hidden activation (an SB3 DQN's is ReLU whatever ``--activation``)."""
    names = {kind: name for name, kind in MODULE_ACTIVATIONS.items()}
    return next((names[type(layer)] for layer in net if type(layer) in names), default)


def network(saved: SavedModels, name: str) -> nn.Sequential:
    """The network ``name`` (``agent0.actor``) of a saved file, rebuilt and loaded."""
    described = saved.metadata["networks"][name]
    net = sequential(described["sizes"], described["activation"])
    net.load_state_dict(saved.state_dicts[name])
    return net


def evaluate(saved: Sequence[SavedModels], request: EvalRequest) -> tuple[pd.DataFrame, str]:
    """Every saved agent played ``request.episodes`` times each way (``ACTING``): one row per agent."""
    episodes = EPISODES if request.episodes is None else request.episodes
    seed = 0 if request.seed is None else request.seed
    if request.video is not None:
        try:
            import moviepy  # noqa: F401 - only whether it is there
        except ImportError:
            raise FrdError(MISSING_VIDEO) from None
    rows = []
    for run in saved:
        meta = run.metadata
        for agent in meta["agents"]:
            actor = network(run, f"agent{agent}.actor")
            row = {"run_id": meta["run_id"], "method": meta["method"], "seed": meta["seed"], "agent": agent,
                   "episodes": episodes, "eval_seed": seed}
            for acting in ACTING:
                video = request.video if acting == "greedy" else None
                returns = play(meta["env_id"], actor, episodes, seed, acting == "greedy", video,
                               f"{meta['run_id']}-agent{agent}")
                row[f"{acting}_mean"], row[f"{acting}_std"] = float(returns.mean()), float(returns.std())
            rows.append(row)
    frame = pd.DataFrame(rows)
    shown = frame[["run_id", "agent"]].assign(**{acting: [f"{m:.1f} ± {s:.1f}" for m, s in zip(
        frame[f"{acting}_mean"], frame[f"{acting}_std"])] for acting in ACTING})
    return frame, (f"return over {episodes} episodes (mean ± std), seed {seed}\n" + shown.to_string(index=False))


def play(env_id: str, actor: nn.Module, episodes: int, seed: int, greedy: bool, video: Path | None = None,
         name: str = "agent") -> np.ndarray:
    """The return of each of ``episodes`` episodes of ``actor`` on ``env_id``, played side by side
    (one forward per step for all live episodes); ``video``: record episode 0 there."""
    try:
        envs = [_recorder(env_id, video, name) if k == 0 and video is not None else gym.make(env_id)
                for k in range(episodes)]
        try:
            return _returns(envs, actor, seed, greedy)
        finally:
            for env in envs:
                env.close()  # a recorder writes its video here
    except gym.error.DependencyNotInstalled as exc:  # what rendering or writing a video needs (pygame, moviepy)
        raise FrdError(f"--video: {str(exc).splitlines()[0]}") from None


def _recorder(env_id: str, video: Path, name: str) -> gym.Env:
    """An instance of ``env_id`` that records its first episode as ``video/<name>-episode-0.mp4``."""
    with warnings.catch_warnings():  # "Overwriting existing videos": each agent adds its own files
        warnings.simplefilter("ignore")
        return gym.wrappers.RecordVideo(gym.make(env_id, render_mode="rgb_array"), str(video), name_prefix=name,
                                        episode_trigger=lambda episode: episode == 0)


def _returns(envs: Sequence[gym.Env], actor: nn.Module, seed: int, greedy: bool) -> np.ndarray:
    """Play episode k on ``envs[k]`` from its seeded first state until every episode has ended."""
    draws = [np.random.default_rng(derive_seed(seed, k, Stream.RL_EVAL_ACTIONS)) for k in range(len(envs))]
    obs = np.stack([env.reset(seed=derive_seed(seed, k, Stream.RL_EVAL_STATES))[0]
                    for k, env in enumerate(envs)]).astype(np.float32)
    returns, live = np.zeros(len(envs)), np.ones(len(envs), bool)
    while live.any():
        playing = np.flatnonzero(live)
        with torch.no_grad():
            logits = actor(torch.from_numpy(obs[playing])).double().numpy()
        for k, scores in zip(playing.tolist(), logits):
            action = int(np.argmax(scores)) if greedy else _sample(scores, draws[k].random())
            obs[k], reward, terminated, truncated, _ = envs[k].step(action)
            returns[k] += float(reward)
            live[k] = not (terminated or truncated)
    return returns


def _sample(logits: np.ndarray, uniform: float) -> int:
    """The action a uniform draws from softmax(``logits``) by inverse CDF."""
    probs = np.exp(logits - logits.max())
    cdf = np.cumsum(probs / probs.sum())
    return min(int(np.searchsorted(cdf, uniform, side="right")), len(cdf) - 1)

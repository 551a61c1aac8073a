"""Figures for a results folder: learning curves and mission times, and payload per method."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from frd.results import save_figure  # noqa: E402


def _learning_curves(episodes: pd.DataFrame, window: int) -> dict[str, np.ndarray]:
    """Per method, a [runs, episodes] array of the run's progress towards the mission: the best
    agent's mean score over its latest ``window`` episodes. A finished run holds its last value
    (a completed mission stays completed; a capped run stays where it stopped)."""
    curves = {}
    for method, g in episodes.groupby("method", sort=False):
        series = []
        for _, run in g.groupby("run_id"):
            table = run.pivot(index="episode", columns="agent", values="score").sort_index()
            means = table.apply(lambda scores: scores.dropna().rolling(window, min_periods=1).mean())
            series.append(means.ffill().max(axis=1).to_numpy())
        length = max(len(s) for s in series)
        curves[method] = np.stack([np.pad(s, (0, length - len(s)), mode="edge") for s in series])
    return curves


def plot_mission(episodes: pd.DataFrame, runs: pd.DataFrame, path: Path, window: int = 10,
                 target: float = 490.0) -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for method, curve in _learning_curves(episodes, window).items():
        x = np.arange(1, curve.shape[1] + 1)
        q25, q50, q75 = np.percentile(curve, [25, 50, 75], axis=0)
        left.plot(x, q50, label=method)
        left.fill_between(x, q25, q75, alpha=0.2)
    left.axhline(target, color="grey", ls="--", lw=1)
    left.set(xlabel="episode", ylabel=f"best agent's mean score, latest {window} episodes",
             title=f"learning curves: median, 25–75 % ({runs['seed'].nunique()} seeds)")
    left.legend()
    methods = list(dict.fromkeys(runs["method"]))
    data = [runs.loc[runs["method"] == m, "mission_episodes"].to_numpy() for m in methods]
    right.boxplot(data, whis=(0, 100))
    right.set_xticks(range(1, len(methods) + 1), methods)
    for i, m in enumerate(methods, start=1):
        rate = runs.loc[runs["method"] == m, "completed"].mean()
        right.annotate(f"{rate:.0%} done", (i, 0), xycoords=("data", "axes fraction"),
                       xytext=(0, 4), textcoords="offset points", ha="center", fontsize=8)
    right.set(ylabel="episodes of the completing agent", title="mission completion time")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def plot_payload(runs: pd.DataFrame, path: Path) -> None:
    """Bits up and down per agent and round, and in total until the mission; median over seeds."""
    exchanging = runs[runs["rounds"] > 0]
    if exchanging.empty:
        return
    agent_rounds = exchanging["rounds"] * exchanging["n_agents"]
    per_round = exchanging.assign(up=exchanging["bits_up"] / agent_rounds, down=exchanging["bits_down"] / agent_rounds)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, frame, cols, title in ((axes[0], per_round, ["up", "down"], "per agent and round"),
                                  (axes[1], exchanging, ["bits_up", "bits_down"], "total until the mission")):
        med = frame.groupby("method", sort=False)[cols].median()
        x = np.arange(len(med))
        ax.bar(x - 0.2, med[cols[0]], 0.4, label="uplink")
        ax.bar(x + 0.2, med[cols[1]], 0.4, label="downlink")
        ax.set_xticks(x, med.index)
        ax.set_yscale("log")
        ax.set(ylabel="bits (median over seeds)", title=f"payload {title}")
        ax.legend()
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)

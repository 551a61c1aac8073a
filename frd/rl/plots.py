"""Figures for a results folder: learning curves and mission times, and payload per method."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from frd.results import save_figure  # noqa: E402
from frd.rl.episode_end import window_means  # noqa: E402
from frd.rl.summary import agent_rounds  # noqa: E402
from frd.stats import fmt  # noqa: E402


def _learning_curves(episodes: pd.DataFrame, window: int) -> dict[str, np.ndarray]:
    """Per method, a [runs, episodes] array of the run's progress towards the mission: the best
    agent's mean score over its latest ``window`` episodes. A finished run holds its last value
    (a completed mission stays completed; a capped run stays where it stopped)."""
    curves = {}
    for method, g in episodes.groupby("method", sort=False):
        series = []
        for _, run in g.groupby("run_id"):
            table = run.pivot(index="episode", columns="agent", values="score").sort_index()
            means = table.apply(lambda scores: _mission_averages(scores.dropna(), window))
            series.append(means.ffill().max(axis=1).to_numpy())
        length = max(len(s) for s in series)
        curves[method] = np.stack([np.pad(s, (0, length - len(s)), mode="edge") for s in series])
    return curves


def _mission_averages(scores: pd.Series, window: int) -> pd.Series:
    """The mission rule's average after each of an agent's episodes (``episode_end.window_means``)."""
    return pd.Series(window_means(scores.to_numpy(np.float64), window), scores.index)


def method_order(runs: pd.DataFrame) -> list[str]:
    """The methods of ``runs`` in the one order every panel of every figure uses: the table's
    (``report`` sorts it in the order the methods were asked for), each named as on the command
    line, so that legends, boxes and bars agree."""
    return list(dict.fromkeys(runs["method"]))


def mission_figure(episodes: pd.DataFrame, runs: pd.DataFrame, window: int = 10, target: float = 490.0) -> Figure:
    """Learning curves (median and 25–75 % over runs) and the mission completion time per method."""
    methods = method_order(runs)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    curves = _learning_curves(episodes, window)
    for method in (m for m in methods if m in curves):
        x = np.arange(1, curves[method].shape[1] + 1)
        q25, q50, q75 = np.percentile(curves[method], [25, 50, 75], axis=0)
        left.plot(x, q50, label=method)
        left.fill_between(x, q25, q75, alpha=0.2)
    left.axhline(target, color="grey", ls="--", lw=1)
    left.set(xlabel="episode", ylabel=f"best agent's mean score, latest {window} episodes",
             title=f"learning curves: median, 25–75 % ({runs['seed'].nunique()} seeds)")
    left.legend()
    data = [runs.loc[runs["method"] == m, "mission_episodes"].to_numpy() for m in methods]
    right.boxplot(data, whis=(0, 100))
    right.set_xticks(range(1, len(methods) + 1), methods)
    for i, m in enumerate(methods, start=1):
        rate = runs.loc[runs["method"] == m, "completed"].mean()
        right.annotate(f"{rate:.0%} done", (i, 0), xycoords=("data", "axes fraction"),
                       xytext=(0, 4), textcoords="offset points", ha="center", fontsize=8)
    right.set(ylabel="episodes of the completing agent", title="mission completion time")
    fig.tight_layout()
    return fig


def payload_figure(runs: pd.DataFrame) -> Figure | None:
    """Bits up and down per agent and round, and in total until the mission; median over seeds
    (None without an exchanging method). Bars on a linear axis from zero, so their lengths compare
    [our choice: a log axis cut near the smallest bar made FRL's look empty]; each is labelled with
    its value, which a bar of a method that sends far less than another still shows."""
    exchanging = runs[runs["rounds"] > 0]
    if exchanging.empty:
        return None
    methods = [m for m in method_order(runs) if m in set(exchanging["method"])]
    count = agent_rounds(exchanging)
    per_round = exchanging.assign(up=exchanging["bits_up"] / count, down=exchanging["bits_down"] / count)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, frame, cols, title in ((axes[0], per_round, ["up", "down"], "per agent and round"),
                                  (axes[1], exchanging, ["bits_up", "bits_down"], "total until the mission")):
        med = frame.groupby("method")[cols].median().reindex(methods)
        x = np.arange(len(methods))
        for offset, col, label in ((-0.2, cols[0], "uplink"), (0.2, cols[1], "downlink")):
            bars = ax.bar(x + offset, med[col], 0.4, label=label)
            ax.bar_label(bars, labels=[fmt(v) for v in med[col]], fontsize=7, padding=2)
        ax.set_xticks(x, methods)
        ax.set_ylim(0, ax.get_ylim()[1] * 1.08)  # room for the labels above the tallest bar
        ax.set(ylabel="bits (median over seeds)", title=f"payload {title}")
        ax.legend()
    fig.tight_layout()
    return fig


def plot_mission(episodes: pd.DataFrame, runs: pd.DataFrame, path: Path, window: int = 10,
                 target: float = 490.0) -> None:
    fig = mission_figure(episodes, runs, window, target)
    save_figure(fig, path)
    plt.close(fig)


def plot_payload(runs: pd.DataFrame, path: Path) -> None:
    fig = payload_figure(runs)
    if fig is not None:
        save_figure(fig, path)
        plt.close(fig)

"""Outcome against cost across a report's rows, with the non-dominated rows (the Pareto front)
marked: *at equal bits, which way of sharing wins?* (``frd report``; the domain names its
frontiers, e.g. RL's mission episodes against each agent's uplink bits).

A row is on the front when no other row costs at most as much and does at least as well, and
strictly better in one of the two [the usual Pareto dominance]. A row that cost nothing (an
``independent`` cell) is a horizontal line: a log axis has no zero, and it is the bar that
sharing has to clear.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure


@dataclass(frozen=True)
class Frontier:
    """One outcome against one cost, as a domain declares it."""

    name: str
    """Its files: ``figures/<name>.png`` and ``.pdf``, ``<name>.csv``."""
    outcome: str
    """The summary column of the outcome, with ``<outcome>_lo`` and ``_hi`` its interval where present."""
    outcome_label: str
    cost: str
    """The summary column of the cost."""
    cost_label: str
    higher_is_better: bool
    per: str | None = None
    """A column that divides the cost (``agents``: per agent), if any."""
    percent: bool = False
    """The outcome is a fraction, shown in %."""


def pareto_front(cost: np.ndarray, outcome: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Whether each (cost, outcome) is non-dominated; NaNs are never on the front."""
    good = outcome if higher_is_better else -outcome
    valid = np.isfinite(cost) & np.isfinite(good)
    front = np.zeros(len(cost), bool)
    for i in np.flatnonzero(valid):
        others = valid & (cost <= cost[i]) & (good >= good[i]) & ((cost < cost[i]) | (good > good[i]))
        front[i] = not others.any()
    return front


def frontier_table(summary: pd.DataFrame, frontier: Frontier, names: Sequence[str],
                   within: Sequence[str] = ()) -> pd.DataFrame:
    """The rows' ``names`` columns, cost, outcome and its interval, and ``pareto``: on the front of
    the rows that share their values of ``within`` (e.g. ``agents``: one front per agent count)."""
    cost = summary[frontier.cost].to_numpy(float)
    if frontier.per is not None:
        cost = cost / summary[frontier.per].to_numpy(float)
    table = summary[list(dict.fromkeys([*within, *names]))].copy()
    table["cost"] = cost
    table["outcome"] = summary[frontier.outcome].to_numpy(float)
    for end in ("lo", "hi"):
        column = f"{frontier.outcome}_{end}"
        table[f"outcome_{end}"] = summary[column].to_numpy(float) if column in summary.columns else np.nan
    table["pareto"] = False
    for _, rows in _groups(table, within):
        table.loc[rows.index, "pareto"] = pareto_front(rows["cost"].to_numpy(float), rows["outcome"].to_numpy(float),
                                                       frontier.higher_is_better)
    return table


def _groups(table: pd.DataFrame, within: Sequence[str]) -> list[tuple[str, pd.DataFrame]]:
    """(title, rows) per combination of ``within``'s values; the whole table without them."""
    if not within:
        return [("", table)]
    return [(", ".join(f"{k}={v}" for k, v in zip(within, values)), rows)
            for values, rows in table.groupby(list(within), sort=False, dropna=False)]


def frontier_figure(table: pd.DataFrame, frontier: Frontier, series: Callable[[pd.DataFrame], list],
                    within: Sequence[str] = ()) -> Figure:
    """The rows as points with their interval (one style per series), the front as a step line
    through ringed points, costless rows as horizontal lines; one panel per group of ``within``."""
    groups = _groups(table, within)
    figure = Figure(figsize=(5.2 * len(groups) + 2.6, 4.4), layout="constrained")
    for ax, (title, rows) in zip(np.atleast_1d(figure.subplots(1, len(groups), sharey=True)), groups):
        _panel(ax, rows, frontier, series)
        ax.set_title(title or f"{frontier.outcome_label} against {frontier.cost_label.split(' (')[0]}", fontsize=9)
    handles: dict[str, Any] = {}
    for ax in figure.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    figure.legend(list(handles.values()), list(handles), loc="outside right upper", fontsize=7)
    return figure


def _panel(ax, table: pd.DataFrame, frontier: Frontier, series: Callable[[pd.DataFrame], list]) -> None:
    scale = 100 if frontier.percent else 1
    free = table["cost"] == 0
    for label, style, rows in series(table):
        paid = rows[~free.loc[rows.index]]
        y = paid["outcome"].to_numpy(float) * scale
        errors = np.nan_to_num(np.clip([y - paid["outcome_lo"].to_numpy(float) * scale,
                                        paid["outcome_hi"].to_numpy(float) * scale - y], 0, None))
        if len(paid):
            ax.errorbar(paid["cost"], y, yerr=errors, capsize=3, lw=1, linestyle="none", label=label or None, **style)
        for _, row in rows[free.loc[rows.index]].iterrows():
            ax.axhline(row["outcome"] * scale, color=style["color"], ls="--", lw=1,
                       label=f"{label or 'no exchange'} (0 bits)")
    front = table[table["pareto"] & ~free].sort_values("cost")
    if len(front):
        ax.step(front["cost"], front["outcome"] * scale, where="post", color="black", lw=0.8, alpha=0.6)
        ax.scatter(front["cost"], front["outcome"] * scale, s=140, facecolors="none", edgecolors="black",
                   label="Pareto front", zorder=3)
    if (table["cost"] > 0).any():
        ax.set_xscale("log")
    ax.set(xlabel=frontier.cost_label, ylabel=frontier.outcome_label + (" (%)" if frontier.percent else ""))
    ax.grid(alpha=0.3)


__all__ = ["Frontier", "frontier_figure", "frontier_table", "pareto_front"]

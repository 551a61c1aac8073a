"""When does sharing beat learning alone? [the methods of Seo et al. 2022, §4; our question]

The study is the experiment file ``benchmarks/experiments/sharing.toml`` (every cell runs until every
agent completes its mission or hits the cap; environment × agent count × population × variant):

    frd run benchmarks/experiments/sharing.toml --out results/sharing     # resumable; processes may share it
    python -m benchmarks.sharing_study results/sharing [--out benchmarks/results]

This script says only what the file cannot: from ``frd report``'s ``summary.csv`` of that experiment
(redrawn first), the study's table in its own words (``sharing_summary.csv``, ``sharing_table.md``
with the helps / hurts verdicts) and its two figures (``sharing.png``, ``sharing_cost.png``). Every
number is ``frd report``'s: per cell the IQM of the episodes to the first agent's mission and to the
last agent's, each with a 95 % stratified-bootstrap CI, the probability that the variant needs fewer
episodes than independent agents of the same cell (``p_improvement``, ``p_improvement_all_agents``,
with CIs), and the wire's cost per agent.

``--convert RECORD`` first turns the record the study kept before it was a file
(``benchmarks/results/sharing_runs.csv``: every run of every cell, with where it computed) into the
experiment's record in the folder, one results folder per cell as ``frd run`` writes it, so that
``frd run`` goes on from it and ``frd report`` reads it.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from benchmarks.records import convert  # noqa: E402
from frd.experiment_file import read_file  # noqa: E402
from frd.report import report  # noqa: E402
from frd.rl.summary import BASELINE  # noqa: E402

EXPERIMENT = Path("benchmarks/experiments/sharing.toml")
MEASURES = {"mission_episodes": "first agent", "all_agents_episodes": "every agent"}
AXES = ["env", "agents", "population", "variant"]
"""The experiment's axes: what identifies a cell in the study's table and in the old record."""
COLUMNS = {"runs": "runs", "all_agents_completed_frac": "all_completed",
           "mission_episodes_iqm": "first agent IQM", "mission_episodes_iqm_lo": "first agent IQM lo",
           "mission_episodes_iqm_hi": "first agent IQM hi", "all_agents_episodes_iqm": "every agent IQM",
           "all_agents_episodes_iqm_lo": "every agent IQM lo", "all_agents_episodes_iqm_hi": "every agent IQM hi",
           "p_improvement": "first agent P(better)", "p_improvement_lo": "first agent P lo",
           "p_improvement_hi": "first agent P hi", "p_improvement_all_agents": "every agent P(better)",
           "p_improvement_all_agents_lo": "every agent P lo", "p_improvement_all_agents_hi": "every agent P hi"}
"""``frd report``'s summary column → the study's name for it."""
ORDER = ["env", "agents", "population", "variant", "runs", "all_completed", "wire_mb_per_agent",
         *(f"{name} IQM{end}" for name in MEASURES.values() for end in ("", " lo", " hi")),
         *(f"{name} {col}" for name in MEASURES.values() for col in ("P(better)", "P lo", "P hi"))]
"""The columns of ``sharing_summary.csv``, in order."""


def study_table(summary: pd.DataFrame, seeds: int) -> pd.DataFrame:
    """``frd report``'s summary of the experiment in the study's words (``sharing_summary.csv``):
    the variants that have all ``seeds`` runs in a cell whose independent agents have them all
    (what is left out is named)."""
    table = summary.rename(columns=COLUMNS)
    table["wire_mb_per_agent"] = summary["bits_per_agent_total"] / 8e6
    whole = table["runs"] == seeds
    cells = pd.Series(list(zip(*(table[axis] for axis in AXES[:3]))), index=table.index)
    keep = whole & cells.isin(set(cells[whole & (table["variant"] == BASELINE)]))
    for _, row in table[~keep].iterrows():
        print(f"--- {row['env']}-{row['agents']}agents-{row['population']} {row['variant']}: {row['runs']} of {seeds} runs "
              f"or its independent runs unfinished, left out")
    return table.loc[keep, ORDER].reset_index(drop=True)


def interval_verdict(lo: float, hi: float) -> str:
    """helps / hurts when the P(improvement) interval [lo, hi] excludes 0.5, else no difference shown."""
    return "helps" if lo > 0.5 else "hurts" if hi < 0.5 else "–"


def verdict(row: pd.Series, name: str) -> str:
    """``interval_verdict`` of one measure of a summary row."""
    return interval_verdict(row[f"{name} P lo"], row[f"{name} P hi"])


def markdown(table: pd.DataFrame) -> str:
    lines = ["| env | agents | population | variant | all agents done | first agent: IQM [95 % CI] | P(better) [CI] | "
             "every agent: IQM [95 % CI] | P(better) [CI] | sharing, first / every | MB per agent |", "|---" * 11 + "|"]
    for _, r in table.iterrows():
        cells = [r["env"], str(r["agents"]), r["population"], r["variant"], f"{r['all_completed']:.0%}"]
        for name in MEASURES.values():
            cells.append(f"{r[f'{name} IQM']:.0f} [{r[f'{name} IQM lo']:.0f}–{r[f'{name} IQM hi']:.0f}]")
            cells.append("–" if r["variant"] == BASELINE else
                         f"{r[f'{name} P(better)']:.2f} [{r[f'{name} P lo']:.2f}–{r[f'{name} P hi']:.2f}]")
        cells.append("" if r["variant"] == BASELINE else " / ".join(verdict(r, name) for name in MEASURES.values()))
        cells.append(f"{r['wire_mb_per_agent']:.3g}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def blank_panels(rows: int, cols: int, **kwargs: Any) -> tuple[Any, Any]:
    """A grid of panels, each blank until drawn on (``set_axis_on``): a cell not yet run stays blank."""
    fig, axes = plt.subplots(rows, cols, squeeze=False, **kwargs)
    for ax in axes.flat:
        ax.set_axis_off()
    return fig, axes


def plot(table: pd.DataFrame, path: Path) -> None:
    """P(fewer episodes than independent) for every agent to complete, with its CI: one panel per
    (env, population), a row per env, one marker per agent count; right of 0.5 sharing helps."""
    envs, populations = list(dict.fromkeys(table["env"])), list(dict.fromkeys(table["population"]))
    fig, axes = blank_panels(len(envs), len(populations), figsize=(4.2 * len(populations), 4.5 * len(envs)),
                             sharex=True)
    for (env, population), cell in table.groupby(["env", "population"], sort=False):
        ax = axes[envs.index(env)][populations.index(population)]
        ax.set_axis_on()
        shared = cell[cell["variant"] != BASELINE]
        labels = list(dict.fromkeys(shared["variant"]))
        for k, (agents, g) in enumerate(shared.groupby("agents")):
            g = g.set_index("variant").reindex(labels)
            y = [i + 0.2 * k for i in range(len(labels))]
            p = g["every agent P(better)"]
            ax.errorbar(p, y, xerr=[p - g["every agent P lo"], g["every agent P hi"] - p], fmt="o", capsize=2,
                        label=f"{agents} agents")
        ax.axvline(0.5, color="grey", lw=1, ls="--")
        ax.set(yticks=range(len(labels)), yticklabels=labels, xlim=(0, 1), title=f"{env}, {population}",
               xlabel="P(every agent done sooner than alone)")
        ax.invert_yaxis()
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


FAMILIES = {"frl": ("o", "tab:blue"), "pd": ("s", "tab:orange"), "frd": ("^", "tab:green"), "mixfrd": ("D", "tab:red")}
"""Method → marker and colour of the cost figure."""
KNOB_LABELS = {"steps": "st", "better": "b", "steps+better": "st+b"}
"""Knob → the short tag written beside its point in the cost figure."""


def plot_cost(table: pd.DataFrame, path: Path) -> None:
    """What sharing costs on the wire against what it buys: per (env, agents) panel, each
    variant's MB per agent (log) against P(every agent done sooner than alone) with its CI; one
    marker per method, filled for the homogeneous population and open for the others (tagged).
    Variants that sent nothing (no round took place) have no place on the log axis; with none
    left, no figure is written."""
    shared = table[(table["variant"] != BASELINE) & (table["wire_mb_per_agent"] > 0)]
    if shared.empty:
        return
    envs, counts = list(dict.fromkeys(shared["env"])), sorted(set(shared["agents"]))
    fig, axes = blank_panels(len(envs), len(counts), figsize=(6 * len(counts), 4.8 * len(envs)), sharey=True)
    for (env, agents), cell in shared.groupby(["env", "agents"], sort=False):
        ax = axes[envs.index(env)][counts.index(agents)]
        ax.set_axis_on()
        for _, r in cell.iterrows():
            method, _, knob = r["variant"].partition(" ")
            marker, colour = FAMILIES[method]
            p = r["every agent P(better)"]
            homogeneous = r["population"] == "homogeneous"
            ax.errorbar(r["wire_mb_per_agent"], p, yerr=[[p - r["every agent P lo"]], [r["every agent P hi"] - p]],
                        fmt=marker, color=colour, mfc=colour if homogeneous else "white", ms=6, capsize=2, alpha=0.8)
            tag = "/".join(t for t in (KNOB_LABELS.get(knob, ""), "" if homogeneous else r["population"][0]) if t)
            if tag:
                ax.annotate(tag, (r["wire_mb_per_agent"], p), fontsize=6, xytext=(3, 2), textcoords="offset points")
        ax.axhline(0.5, color="grey", lw=1, ls="--")
        ax.set(xscale="log", ylim=(0, 1.02), title=f"{env}, {agents} agents", xlabel="MB per agent over a run (median)")
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 3.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.grid(alpha=0.3)
    for row in axes:
        row[0].set_ylabel("P(every agent done sooner than alone)")
    handles = [plt.Line2D([], [], marker=m, color=c, ls="", label=name) for name, (m, c) in FAMILIES.items()]
    handles += [plt.Line2D([], [], marker="o", color="grey", mfc="white", ls="", label="open: w = widths, r = rlcode")]
    handles += [plt.Line2D([], [], ls="", label="tags: st = fixed steps, b = better peers")]
    fig.legend(handles=handles, fontsize=8, loc="lower center", ncol=len(handles))
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiment", type=Path, help="the experiment's folder (frd run's --out)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"),
                        help="where sharing_summary.csv, sharing_table.md and the two PNGs go")
    parser.add_argument("--convert", type=Path, metavar="RECORD",
                        help="first write the runs of the study's old record (sharing_runs.csv) into the experiment")
    args = parser.parse_args()
    if args.convert:
        print(f"{convert(args.convert, EXPERIMENT, args.experiment)} runs converted into {args.experiment}")
    table = study_table(report([args.experiment], args.experiment), int(read_file(EXPERIMENT)[1]["seeds"]))
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "sharing_summary.csv", index=False)
    (args.out / "sharing_table.md").write_text(markdown(table))
    plot(table, args.out / "sharing.png")
    plot_cost(table, args.out / "sharing_cost.png")
    print(markdown(table))


if __name__ == "__main__":
    main()

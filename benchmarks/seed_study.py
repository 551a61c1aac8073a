"""The FRD CartPole study [Seo et al. 2022, §4, Fig. 12 and the hidden-width remark], as experiment files.

    frd run benchmarks/experiments/seed_agents.toml --out results/seed_agents   # a, b: agents × method
    frd run benchmarks/experiments/seed_grid.toml --out results/seed_grid       # c: FRD's grid S
    frd run benchmarks/experiments/seed_hidden.toml --out results/seed_hidden   # d: width h, FRL and FRD
    python -m benchmarks.seed_study [--work results] [--out benchmarks/results] [--flatten | --convert]

a. mission completion time of FRD, PD, FRL and independent agents for 2, 4 and 8 agents;
b. uplink and downlink payload per round and in total (2 agents);
c. FRD state-grid granularity S ∈ {5, 10, 20, 30, 50}: payload per round against mission time;
d. hidden width h ∈ {16, 32, 64, 128, 256}: FRL against FRD payload per round, and where they cross.

The study's tables are ``frd report``'s ``summary.csv`` of each experiment, committed as
``seed_study_{agents,grid,hidden}.csv``; this script adds only what no file can say: the study's
four figures and the width where FRL's payload overtakes FRD's. ``--flatten`` also writes each
experiment's flat record (``seed_study_{part}_runs.csv``, committed, ``benchmarks.records``);
``--convert`` first turns those committed records back into the experiments' records under
``--work``, so that the committed tables and figures are redrawn without running anything.
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from benchmarks.records import add_record_arguments, convert, flatten  # noqa: E402
from frd.report import report  # noqa: E402
from frd.results import save_figure  # noqa: E402
from frd.rl.plots import method_order, plot_payload  # noqa: E402

PARTS = ("agents", "grid", "hidden")
"""The study's experiment files, ``benchmarks/experiments/seed_<part>.toml``."""
EXPERIMENTS = Path("benchmarks/experiments")


def _errorbars(ax, table: pd.DataFrame, x: str, label: str | None = None) -> None:
    """Median mission episodes with their 25–75 % range against ``x``."""
    median = table["mission_episodes_median"]
    ax.errorbar(table[x], median, yerr=[median - table["mission_episodes_q25"], table["mission_episodes_q75"] - median],
                marker="o", capsize=3, label=label)


def plot_agents(summary: pd.DataFrame, path: Path) -> None:
    """a: mission time against agents, one line per method."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for method in method_order(summary):
        _errorbars(ax, summary[summary["method"] == method].sort_values("agents"), "agents", method)
    ax.set(xlabel="agents", ylabel="episodes to mission (median, 25–75 %)", xticks=sorted(set(summary["agents"])),
           title=f"mission completion time, {summary['runs'].max()} seeds")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def plot_grid(summary: pd.DataFrame, path: Path) -> None:
    """c: mission time against FRD's uplink per agent and round, one point per S."""
    fig, ax = plt.subplots(figsize=(6, 4))
    _errorbars(ax, summary, "bits_up_per_agent_round")
    for _, row in summary.iterrows():
        ax.annotate(f"S={row['grid']}", (row["bits_up_per_agent_round"], row["mission_episodes_median"]),
                    xytext=(4, 4), textcoords="offset points")
    ax.set(xscale="log", xlabel="FRD uplink bits per agent-round (median, 2 agents)",
           ylabel="episodes to mission (median, 25–75 %)", title=f"FRD granularity, {summary['runs'].max()} seeds")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def crossing(widths: np.ndarray, frl: np.ndarray, frd: np.ndarray) -> float | None:
    """Width where FRL's payload per round first exceeds FRD's (log-linear interpolation)."""
    diff = np.log(frl) - np.log(frd)
    for i in range(len(widths) - 1):
        if diff[i] <= 0 < diff[i + 1]:
            return float(widths[i] + (widths[i + 1] - widths[i]) * -diff[i] / (diff[i + 1] - diff[i]))
    return None if diff[0] <= 0 else float(widths[0])


def plot_hidden(summary: pd.DataFrame, path: Path) -> float | None:
    """d: FRL's and FRD's uplink per agent and round against h, and where they cross (returned)."""
    frl, frd = (summary[summary["method"] == m].sort_values("hidden") for m in ("frl", "frd"))
    widths = frl["hidden"].to_numpy(float)
    cross = crossing(widths, frl["bits_up_per_agent_round"].to_numpy(), frd["bits_up_per_agent_round"].to_numpy())
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, part in (("frl", frl), ("frd", frd)):
        ax.plot(part["hidden"], part["bits_up_per_agent_round"], marker="o", label=name)
    if cross:
        ax.axvline(cross, color="grey", ls="--", lw=1, label=f"cross at h ≈ {cross:.0f}")
    ax.set(xscale="log", yscale="log")
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set(xticks=widths, xticklabels=[f"{w:.0f}" for w in widths],
           xlabel="hidden width h (neurons per layer)", ylabel="uplink bits per agent-round (median)",
           title=f"FRL vs FRD payload, 2 agents, {summary['runs'].max()} seeds")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return cross


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("results"),
                        help="the experiments' folders: WORK/seed_agents, WORK/seed_grid, WORK/seed_hidden")
    add_record_arguments(parser, "records of the experiments")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    summaries, runs = {}, {}
    for part in PARTS:
        file, folder, record = (EXPERIMENTS / f"seed_{part}.toml", args.work / f"seed_{part}",
                                args.out / f"seed_study_{part}_runs.csv")
        if args.convert:
            print(f"{convert(record, file, folder)} runs of {record} converted into {folder}")
        summaries[part] = report([folder], folder)
        shutil.copyfile(folder / "summary.csv", args.out / f"seed_study_{part}.csv")
        runs[part] = flatten(file, folder)
        if args.flatten:
            runs[part].to_csv(record, index=False)
    plot_agents(summaries["agents"], args.out / "seed_study_agents.png")
    plot_payload(runs["agents"][runs["agents"]["agents"] == 2], args.out / "seed_study_payload.png")
    plot_grid(summaries["grid"], args.out / "seed_study_grid.png")
    cross = plot_hidden(summaries["hidden"], args.out / "seed_study_hidden.png")
    print(f"\nFRL's uplink per round exceeds FRD's from h ≈ {cross:.0f}" if cross else "\nno crossing in range")


if __name__ == "__main__":
    main()

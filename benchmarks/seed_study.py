"""The FRD CartPole study [Seo et al. 2022, §4, Fig. 12 and the hidden-width remark], reproduced.

    python -m benchmarks.seed_study [--parts a b c d] [--seeds 20] [--hidden-seeds 10]

a. mission completion time of FRD, PD, FRL and independent agents for 2, 4 and 8 agents;
b. uplink and downlink payload per round and in total (2 agents);
c. FRD state-grid granularity S ∈ {5, 10, 20, 30, 50}: payload per round vs mission time;
d. hidden width h ∈ {16, 32, 64, 128, 256}: FRL vs FRD payload per round, and where they cross.

Raw runs go to ``--work`` (resumable: rerun the same command after an interruption); CSV
summaries and PNGs to ``--out`` (committed under benchmarks/results/).
"""
from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from frd.results import ResultStore  # noqa: E402
from frd.rl.config import RLConfig  # noqa: E402
from frd.rl.experiment import run_experiment  # noqa: E402
from frd.rl.methods.frd import FRDOptions  # noqa: E402
from frd.rl.plots import plot_payload  # noqa: E402
from frd.stats import quartile_columns  # noqa: E402

METHODS = ("frd", "pd", "frl", "independent")
AGENTS = (2, 4, 8)
GRIDS = (5, 10, 20, 30, 50)
WIDTHS = (16, 32, 64, 128, 256)


def runs_of(config: RLConfig, work: Path) -> pd.DataFrame:
    """Run (or resume) one experiment; its runs table gains payload per agent and round."""
    print(f"\n--- {work.name}: {', '.join(config.methods)}, {config.agents} agents, {config.seeds} seeds")
    run_experiment(config, work)
    runs = ResultStore(work, config, config.resume_key()).read("runs")
    runs = runs[runs["method"].isin(config.methods)
                & runs["seed"].between(config.first_seed, config.first_seed + config.seeds - 1)]
    agent_rounds = runs["rounds"].where(runs["rounds"] > 0) * runs["n_agents"]
    return runs.assign(bits_up_per_round=runs["bits_up"] / agent_rounds,
                       bits_down_per_round=runs["bits_down"] / agent_rounds,
                       seconds=runs["compute_s"] + runs["comm_s"])


def mission_table(runs: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    table = quartile_columns(runs, by, "mission_episodes")
    for column in ("mission_env_steps", "seconds", "bits_up_per_round", "bits_down_per_round", "bits_up", "bits_down"):
        table = table.merge(quartile_columns(runs, by, column), on=by)
    completion = runs.groupby(by, sort=False)["completed"].agg(["mean", "size"]).reset_index()
    return completion.rename(columns={"mean": "completion_rate", "size": "runs"}).merge(table, on=by)


def _errorbars(ax, table: pd.DataFrame, x: str, y: str, label: str) -> None:
    ax.errorbar(table[x], table[f"{y}_median"],
                yerr=[table[f"{y}_median"] - table[f"{y}_q25"], table[f"{y}_q75"] - table[f"{y}_median"]],
                marker="o", capsize=3, label=label)


def part_a_b(base: RLConfig, work: Path, out: Path, agents: dict[int, int]) -> None:
    """``agents``: agent count → seeds."""
    runs = pd.concat([runs_of(replace(base, methods=METHODS, agents=n, seeds=k), work / f"agents{n}")
                      for n, k in agents.items()])
    table = mission_table(runs, ["method", "n_agents"])
    table.to_csv(out / "seed_study_agents.csv", index=False)
    fig, ax = plt.subplots(figsize=(6, 4))
    for method in METHODS:
        _errorbars(ax, table[table.method == method], "n_agents", "mission_episodes", method)
    seeds = "/".join(str(k) for k in agents.values())
    ax.set(xlabel="agents", ylabel="episodes to mission (median, 25–75 %)", xticks=list(agents),
           title=f"mission completion time, {seeds} seeds")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "seed_study_agents.png", dpi=120)
    plt.close(fig)
    two = runs[runs.n_agents == 2]
    mission_table(two[two["rounds"] > 0], ["method"])[
        ["method", "runs", "bits_up_per_round_median", "bits_down_per_round_median", "bits_up_median",
         "bits_down_median", "mission_episodes_median"]].to_csv(out / "seed_study_payload.csv", index=False)
    plot_payload(two, out / "seed_study_payload.png")


def part_c(base: RLConfig, work: Path, out: Path) -> None:
    runs = pd.concat([runs_of(replace(base, methods=("frd",), options={"frd": FRDOptions(grid=s)}), work / f"grid{s}")
                      .assign(grid=s)
                      for s in GRIDS])
    table = mission_table(runs, ["grid"])
    table.to_csv(out / "seed_study_grid.csv", index=False)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.errorbar(table["bits_up_per_round_median"], table["mission_episodes_median"],
                yerr=[table["mission_episodes_median"] - table["mission_episodes_q25"],
                      table["mission_episodes_q75"] - table["mission_episodes_median"]], marker="o", capsize=3)
    for _, row in table.iterrows():
        ax.annotate(f"S={row.grid}", (row.bits_up_per_round_median, row.mission_episodes_median),
                    xytext=(4, 4), textcoords="offset points")
    ax.set(xscale="log", xlabel="FRD uplink bits per agent-round (median, 2 agents)",
           ylabel="episodes to mission (median, 25–75 %)", title=f"FRD granularity, {base.seeds} seeds")
    fig.tight_layout()
    fig.savefig(out / "seed_study_grid.png", dpi=120)
    plt.close(fig)


def crossing(widths: np.ndarray, frl: np.ndarray, frd: np.ndarray) -> float | None:
    """Width where FRL's payload per round first exceeds FRD's (log-linear interpolation)."""
    diff = np.log(frl) - np.log(frd)
    for i in range(len(widths) - 1):
        if diff[i] <= 0 < diff[i + 1]:
            return float(widths[i] + (widths[i + 1] - widths[i]) * -diff[i] / (diff[i + 1] - diff[i]))
    return None if diff[0] <= 0 else float(widths[0])


def part_d(base: RLConfig, work: Path, out: Path, seeds: int) -> None:
    runs = pd.concat([runs_of(replace(base, methods=("frl", "frd"), hidden=h, seeds=seeds), work / f"hidden{h}")
                      .assign(hidden=h) for h in WIDTHS])
    table = mission_table(runs, ["method", "hidden"])
    table.to_csv(out / "seed_study_hidden.csv", index=False)
    frl, frd = (table[table.method == m].sort_values("hidden") for m in ("frl", "frd"))
    cross = crossing(np.array(WIDTHS, float), frl["bits_up_per_round_median"].to_numpy(),
                     frd["bits_up_per_round_median"].to_numpy())
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, part in (("frl", frl), ("frd", frd)):
        ax.plot(part["hidden"], part["bits_up_per_round_median"], marker="o", label=name)
    if cross:
        ax.axvline(cross, color="grey", ls="--", lw=1, label=f"cross at h ≈ {cross:.0f}")
    ax.set(xscale="log", yscale="log")
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set(xticks=WIDTHS, xticklabels=[str(w) for w in WIDTHS],
           xlabel="hidden width h (neurons per layer)", ylabel="uplink bits per agent-round (median)",
           title=f"FRL vs FRD payload, 2 agents, {seeds} seeds")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "seed_study_hidden.png", dpi=120)
    plt.close(fig)
    print(f"\nFRL's uplink per round exceeds FRD's from h ≈ {cross}" if cross else "\nno crossing in range")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", nargs="+", default=["a", "c", "d"], help="a (includes b), c, d")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--agents", nargs="+", default=[str(n) for n in AGENTS],
                        help="agent counts of part a, each N or N:SEEDS (default seeds: --seeds)")
    parser.add_argument("--hidden-seeds", type=int, default=10, help="seeds per width in part d")
    parser.add_argument("--max-episodes", type=int, default=RLConfig.max_episodes, help="episode cap per agent")
    parser.add_argument("--work", default="results/seed_study", help="raw runs (resumable)")
    parser.add_argument("--out", default="benchmarks/results", help="CSV summaries and PNGs")
    args = parser.parse_args()
    work, out = Path(args.work), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = RLConfig(seeds=args.seeds, max_episodes=args.max_episodes)
    if "a" in args.parts or "b" in args.parts:
        agents = {int(n): int(k or args.seeds) for n, _, k in (a.partition(":") for a in args.agents)}
        part_a_b(base, work, out, agents)
    if "c" in args.parts:
        part_c(base, work, out)
    if "d" in args.parts:
        part_d(base, work, out, args.hidden_seeds)


if __name__ == "__main__":
    main()

"""Does a standard learner gain from sharing? Mixed pairs on CartPole [issue 43 §5; the methods of
Seo et al. 2022, §4; our question].

    frd run benchmarks/experiments/sb3_pairs.toml --out results/sb3_pairs   # resumable; processes may share it
    python -m benchmarks.sb3_pairs [--work results/sb3_pairs] [--out benchmarks/results] [--redraw]

Each run pairs a Stable-Baselines3 learner (agent 0: PPO or DQN at the rl-zoo's CartPole
hyperparameters) with our A2C (agent 1, h = 64) and goes on until both complete the mission (mean
score of the latest 10 episodes ≥ 490) or reach 1,000 episodes. ``frd report`` compares runs by
their first or last agent; the question here is per learner: does the SB3 agent (or ours) reach
its own mission in fewer episodes when it shares than when it learns alone (``independent``, same
pair, same seeds)? So this script reads each agent's episodes from the record and writes:

- ``sb3_pairs_agents.csv``: one row per agent of every finished run (its cell, seed, learner,
  episodes to its mission, or the cap where it did not complete, env steps over them, completed);
- ``sb3_pairs_summary.csv`` and ``sb3_pairs_table.md``: per pair, variant and learner, the IQM of
  the episodes with its 95 % stratified-bootstrap CI, the share that completed, and P(fewer episodes
  than the same learner alone) with its CI (``frd.stats``; a capped agent counts as the cap); the
  wire per agent;
- ``sb3_pairs.png``: the IQMs with their CIs.

``--redraw`` reads the committed ``sb3_pairs_agents.csv`` instead of the record (which holds every
episode and saved agent, too large to commit).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from benchmarks.records import CELL, flatten_tables  # noqa: E402
from benchmarks.sharing_study import interval_verdict  # noqa: E402
from frd.experiment_file import read_file  # noqa: E402
from frd.rl.config import RLConfig  # noqa: E402
from frd.rl.mission import default_target  # noqa: E402
from frd.stats import improvement_ci, iqm_ci  # noqa: E402

EXPERIMENT = Path("benchmarks/experiments/sb3_pairs.toml")
AXES = ["pair", "variant"]
SEEDS = int(read_file(EXPERIMENT)[1]["seeds"])
"""Runs a cell needs before it is in the table: a cell still running is named and left out."""
BASELINE = "independent"
TARGET = default_target("CartPole-v1")
WINDOW = RLConfig.window
"""The mission: mean score of the latest ``WINDOW`` episodes ≥ ``TARGET``, as the runs used."""
LEARNERS = {"frd": "our A2C", "ppo": "PPO (SB3)", "dqn": "DQN (SB3)", "a2c-sb3": "A2C (SB3)"}
"""``runs.csv``'s algorithm names as the table shows them."""


def agents_of(work: Path) -> pd.DataFrame:
    """One row per agent of every finished run in the record: episodes to its own mission (its
    episode count: a completed agent retires at once under ``--until all``), env steps, completed."""
    flat = flatten_tables(EXPERIMENT, work, ("episodes", "runs"))
    episodes = flat["episodes"].rename(columns={f"{CELL}{a}": a for a in AXES})
    keys = [*AXES, "run_id", "seed", "agent", "algorithm"]
    per_agent = episodes.groupby(keys, sort=False).agg(
        episodes=("episode", "size"), env_steps=("env_steps", "sum"),
        last_mean=("score", lambda s: s.tail(WINDOW).mean() if len(s) >= WINDOW else -np.inf)).reset_index()
    per_agent["completed"] = per_agent.pop("last_mean") >= TARGET
    runs = flat["runs"][["run_id", f"{CELL}pair", f"{CELL}variant", "n_agents", "rounds", "bits_up", "bits_down"]]
    runs = runs.rename(columns={f"{CELL}{a}": a for a in AXES})
    per_agent = per_agent.merge(runs, on=[*AXES, "run_id"])
    per_agent["wire_bits_per_agent"] = (per_agent.pop("bits_up") + per_agent.pop("bits_down")) / per_agent.pop("n_agents")
    return per_agent


def summary(agents: pd.DataFrame) -> pd.DataFrame:
    """Per pair, variant and learner of every cell with all its runs: IQM episodes [CI], completed
    share, P(better than alone) [CI]."""
    rows = []
    runs = agents.groupby(AXES, sort=False)["run_id"].nunique()
    for pair, variant in runs[runs < SEEDS].index:
        print(f"{pair}, {variant}: {runs[pair, variant]} of {SEEDS} runs so far, left out")
    agents = agents.join(runs.rename("cell_runs"), on=AXES).query("cell_runs == @SEEDS")
    for (pair, variant, learner), group in agents.groupby(["pair", "variant", "algorithm"], sort=False):
        alone = agents[(agents["pair"] == pair) & (agents["variant"] == BASELINE) & (agents["algorithm"] == learner)]
        both = sorted(set(group["seed"]) & set(alone["seed"]))  # compared on the seeds both have
        mine, theirs = (g.set_index("seed").loc[both, "episodes"] for g in (group, alone))
        episodes_iqm, lo, hi = iqm_ci(group["episodes"])
        p, p_lo, p_hi = improvement_ci(mine, theirs) if variant != BASELINE else (np.nan,) * 3
        rows.append(dict(pair=pair, variant=variant, learner=learner, runs=len(group),
                         completed_frac=group["completed"].mean(), episodes_iqm=episodes_iqm, episodes_iqm_lo=lo,
                         episodes_iqm_hi=hi, env_steps_median=group["env_steps"].median(),
                         p_better_than_alone=p, p_lo=p_lo, p_hi=p_hi,
                         wire_mbit_per_agent=group["wire_bits_per_agent"].median() / 1e6))
    return pd.DataFrame(rows)


def verdict(row: pd.Series) -> str:
    """The sharing study's ``interval_verdict`` of P's interval, in words ("" for the baseline)."""
    if row["variant"] == BASELINE or np.isnan(row["p_lo"]):
        return ""
    shown = interval_verdict(row["p_lo"], row["p_hi"])
    return "no clear difference" if shown == "–" else shown


def markdown(table: pd.DataFrame) -> str:
    lines = ["| pair | variant | learner | runs | completed | episodes to its mission, IQM [95 % CI] | "
             "P(fewer than alone) [95 % CI] | verdict | wire Mbit/agent |", "|---" * 9 + "|"]
    for _, r in table.iterrows():
        p = "–" if np.isnan(r["p_better_than_alone"]) else f"{r['p_better_than_alone']:.2f} [{r['p_lo']:.2f}–{r['p_hi']:.2f}]"
        learner = LEARNERS.get(r["learner"], r["learner"])
        lines.append(f"| {r['pair']} | {r['variant']} | {learner} | {r['runs']} | {r['completed_frac']:.0%} | "
                     f"{r['episodes_iqm']:.0f} [{r['episodes_iqm_lo']:.0f}–{r['episodes_iqm_hi']:.0f}] | {p} | "
                     f"{verdict(r)} | {r['wire_mbit_per_agent']:.2f} |")
    return "\n".join(lines) + "\n"


def plot(table: pd.DataFrame, path: Path) -> None:
    """IQM episodes to each learner's mission with CIs, a panel per pair, a series per learner."""
    pairs = list(dict.fromkeys(table["pair"]))
    fig, axes = plt.subplots(1, len(pairs), figsize=(5.5 * len(pairs), 3.8), squeeze=False)
    top = 1.05 * table["episodes_iqm_hi"].max()  # one scale from zero for every panel
    for ax, pair in zip(axes[0], pairs):
        cell = table[table["pair"] == pair]
        variants = list(dict.fromkeys(cell["variant"]))
        for i, (learner, rows) in enumerate(cell.groupby("learner", sort=False)):
            x = np.array([variants.index(v) for v in rows["variant"]]) + (i - 0.5) * 0.2
            ax.errorbar(x, rows["episodes_iqm"], yerr=[rows["episodes_iqm"] - rows["episodes_iqm_lo"],
                                                      rows["episodes_iqm_hi"] - rows["episodes_iqm"]],
                        fmt="o", capsize=3, label=LEARNERS.get(learner, learner))
        ax.set(title=pair, xticks=range(len(variants)), xticklabels=variants, ylim=(0, top),
               ylabel="episodes to its own mission, IQM (95 % CI)")
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8)
    fig.suptitle("CartPole-v1, 2 agents: an SB3 learner beside our A2C")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("results/sb3_pairs"), help="the experiment's folder")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--redraw", action="store_true", help="read the committed sb3_pairs_agents.csv, not the record")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.redraw:
        agents = pd.read_csv(args.out / "sb3_pairs_agents.csv")
    else:
        agents = agents_of(args.work)
        agents.to_csv(args.out / "sb3_pairs_agents.csv", index=False)
    table = summary(agents)
    table.to_csv(args.out / "sb3_pairs_summary.csv", index=False)
    (args.out / "sb3_pairs_table.md").write_text(markdown(table))
    plot(table, args.out / "sb3_pairs.png")
    print(markdown(table))


if __name__ == "__main__":
    main()

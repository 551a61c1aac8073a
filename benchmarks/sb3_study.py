"""Does a standard learner gain from sharing? Stable-Baselines3 learners beside ours, and among
themselves [issue 43 §5; the methods of Seo et al. 2022, §4; our question].

    frd run benchmarks/experiments/sb3_pairs.toml --out results/sb3_pairs   # resumable; processes may share it
    python -m benchmarks.sb3_study [--experiment FILE] [--work DIR] [--out benchmarks/results] [--redraw] [--partial]

Every run goes on until each agent completes its own mission (the mean score of its latest
``window`` episodes reaches the env's target) or reaches the cap. ``frd report`` compares runs by
their first or last agent; the question here is per learner: does an SB3 agent (or ours) reach its
own mission in fewer episodes when it shares than when it learns alone (the experiment's
``independent`` cell, the same other axes, the same seeds)? For an experiment file ``<name>.toml``
this script reads each agent's episodes from the record and writes:

- ``<name>_agents.csv``: one row per agent of every finished run (its cell, seed, learner, episodes
  to its mission, or the cap where it did not complete, env steps over them, its late score: the
  mean of its latest ``window`` scores, completed);
- ``<name>_edges.csv``: per agent and round barrier, its mean score over the ``EDGE`` episodes
  before the barrier and the ``EDGE`` after (``round_edges``): does a round set a learner back?
  ``<name>_edges_summary.csv``: per cell and learner, the step across a barrier and the gain
  within a period, over runs [95 % CI] (``edge_summary``);
- ``<name>_summary.csv`` and ``<name>_table.md``: per cell and learner, the IQM over runs of the
  learner's episodes (the mean over its agents in the run, where a run has several of one
  algorithm [our choice: the run is the unit, its agents shared with each other]) with its 95 %
  stratified-bootstrap CI, the share of its agents that completed, and P(fewer episodes than the
  same learner alone) with its CI (``frd.stats``; a capped agent counts as the cap); the wire per
  agent;
- ``<name>.png``: the IQMs with their CIs.

``--redraw`` reads the committed ``<name>_agents.csv`` instead of the record (which holds every
saved agent, too large to commit). ``--flatten`` also writes the record's tables flat and
compressed (``<name>_record_<table>.csv.gz``, or one file per cell where that would pass 2 MB,
``<name>_record_<table>.<cell's values>.csv.gz``; ``benchmarks.records``), and ``--convert`` turns them
back into the record, so that a study run over several sessions resumes where it stopped. A cell
with fewer runs than the file's seeds is named and left out, unless ``--partial``: then its row
counts what it has.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from benchmarks.records import add_record_arguments, axes_named, cell_configs, convert_tables, flatten_tables, write_flat_table  # noqa: E402
from benchmarks.sharing_study import interval_verdict  # noqa: E402
from frd.experiment_file import SKIP_KEY, read_file  # noqa: E402
from frd.stats import improvement_ci, iqm_ci, stratified_bootstrap  # noqa: E402

PAIRS = Path("benchmarks/experiments/sb3_pairs.toml")
BASELINE = "independent"
"""The value of the compared axis that learns alone."""
LEARNERS = {"frd": "our A2C", "ppo": "PPO (SB3)", "dqn": "DQN (SB3)", "a2c-sb3": "A2C (SB3)"}
"""``runs.csv``'s algorithm names as the table shows them."""
RECORD_TABLES = ("runs", "episodes", "rounds", "ledger", "provenance")
"""The tables of a run (its saved agents aside): what ``--flatten`` keeps and ``--convert`` restores."""
MIN_RUNS = 5
"""Fewer runs than this give a cell no verdict and no P interval [our choice]: with 2 runs a side,
a stratified bootstrap resamples 2 values, and a P of 0 comes with the interval [0.00–0.00]."""
TITLES = {"sb3_pairs": "CartPole-v1, 2 agents: an SB3 learner beside our A2C",
          "sb3_all": "8 SB3 agents (3 PPO, 3 A2C, 2 DQN)",
          "sb3_qstudent": "CartPole-v1, a DQN beside our A2C: its student τ (default τ = 0.01, or qstudent=1)"}


class Study:
    """An experiment file's axes: the one whose values include ``independent`` (``compared``) and
    the others (``within``: each value its own comparison, e.g. the pair or the env)."""

    def __init__(self, experiment: Path) -> None:
        self.name = experiment.stem
        self.experiment = experiment
        _, settings, axes = read_file(experiment)
        self.axes = [axis for axis in axes if axis != SKIP_KEY]
        self.seeds = int(settings["seeds"])
        compared = [axis for axis in self.axes if BASELINE in axes[axis]]
        if len(compared) != 1:
            raise SystemExit(f"{experiment}: one axis must have the value {BASELINE!r}, got {compared}")
        self.compared = compared[0]
        self.within = [axis for axis in self.axes if axis != self.compared]


def record_path(out: Path, study: Study, table: str) -> Path:
    """Where ``--flatten`` writes one table of the flat record (``benchmarks.records``)."""
    return out / f"{study.name}_record_{table}.csv.gz"


def agent_outcomes(episodes: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per agent (``keys``) of ``episodes`` (its rows in order, with its cell's ``target`` and
    ``window``): episodes, env steps (cumulative: the last), late score (the mean of its latest
    ``window`` scores: how close a capped agent came) and completed (that mean reaches the target
    over a full window)."""
    grouped = episodes.groupby(keys, sort=False)
    per_agent = grouped.agg(episodes=("episode", "size"), env_steps=("env_steps", "max"),
                            target=("target", "first"), window=("window", "first")).reset_index()
    per_agent["late_score"] = grouped[["score", "window"]].apply(
        lambda rows: rows["score"].tail(int(rows["window"].iloc[0])).mean()).to_numpy()
    per_agent["completed"] = (per_agent["episodes"] >= per_agent.pop("window")) \
        & (per_agent["late_score"] >= per_agent.pop("target"))
    return per_agent


EDGE = 5
"""Episodes on each side of a round's barrier that ``round_edges`` averages."""


def round_edges(episodes: pd.DataFrame, keys: list[str], edge: int = EDGE) -> pd.DataFrame:
    """Per agent (``keys``) and barrier of ``episodes`` (with its cell's ``period``; episode numbers
    from 1): the mean score of its last ``edge`` episodes before the barrier and of its first
    ``edge`` after, where it has both. A round's own effect is the step across a barrier (after −
    before); learning within a period is the step from one barrier's after to the next one's
    before. Under ``independent`` the same episodes are a control: no round happens there."""
    rows = episodes.assign(barrier=(episodes["episode"] - 1) // episodes["period"],
                           place=(episodes["episode"] - 1) % episodes["period"])
    sides = {"before": rows[rows["place"] >= rows["period"] - edge].assign(barrier=lambda r: r["barrier"] + 1),
             "after": rows[rows["place"] < edge]}
    before, after = (frame.groupby([*keys, "barrier"]).agg(**{side: ("score", "mean"), f"n_{side}": ("score", "size")})
                     for side, frame in sides.items())
    both = before.join(after, how="inner")  # no barrier 0: nothing comes before the first episode
    return both.loc[(both["n_before"] == edge) & (both["n_after"] == edge), ["before", "after"]].reset_index()


def edge_summary(edges: pd.DataFrame, cell: list[str]) -> pd.DataFrame:
    """Per cell and learner of ``round_edges``: the step across a barrier (after − before) and the
    gain within a period (the same agent's before at the next barrier − its after at this one),
    each run the mean over its agents and barriers, then the mean over runs with its 95 %
    bootstrap interval (the run is the unit: one agent's barriers are not independent)."""
    agent = [*cell, "run_id", "agent", "algorithm"]
    edges = edges.sort_values([*agent, "barrier"])
    following = edges.groupby(agent)[["barrier", "before"]].shift(-1)
    edges = edges.assign(across=edges["after"] - edges["before"],
                         within=following["before"].where(following["barrier"] == edges["barrier"] + 1) - edges["after"])
    per_run = edges.groupby([*cell, "algorithm", "run_id"])[["across", "within"]].mean()
    rows = []
    for values, runs in per_run.groupby(level=[*cell, "algorithm"]):
        row: dict[str, object] = {**dict(zip([*cell, "algorithm"], values)), "runs": len(runs)}
        for step in ("across", "within"):
            v = runs[step].dropna().to_numpy(float)
            lo, hi = stratified_bootstrap(lambda s: float(s[0].mean()), [v]) if len(v) > 1 else (np.nan, np.nan)
            row.update({step: v.mean(), f"{step}_lo": lo, f"{step}_hi": hi})
        rows.append(row)
    return pd.DataFrame(rows)


def episodes_of(study: Study, work: Path, flat: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """The episodes of every finished run in the record in ``work`` (``flat``: its tables,
    ``flatten_tables``), each with its cell's mission (target, window) and period."""
    cells = pd.DataFrame([{**values, "target": c.target, "window": c.window, "period": c.period}
                          for values, c in cell_configs(study.experiment, work)])
    return axes_named(flat["episodes"], study.axes).merge(cells, on=study.axes)


def agent_keys(study: Study) -> list[str]:
    return [*study.axes, "run_id", "seed", "agent", "algorithm"]


def agents_of(study: Study, episodes: pd.DataFrame, flat: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per agent of ``episodes`` (``episodes_of``): episodes to its own mission (its
    episode count: a completed agent retires at once under ``--until all``) and the rest of
    ``agent_outcomes``, with the run's wire per agent (from ``flat``'s runs)."""
    per_agent = agent_outcomes(episodes, agent_keys(study))
    runs = axes_named(flat["runs"], study.axes)[[*study.axes, "run_id", "n_agents", "bits_up", "bits_down"]]
    per_agent = per_agent.merge(runs, on=[*study.axes, "run_id"])
    per_agent["wire_bits_per_agent"] = (per_agent.pop("bits_up") + per_agent.pop("bits_down")) / per_agent.pop("n_agents")
    return per_agent


def summary(study: Study, agents: pd.DataFrame, partial: bool = False) -> pd.DataFrame:
    """Per cell and learner (of every cell with all its runs, or any with ``partial``): IQM
    episodes over runs [CI], completed share, P(better than alone) [CI]."""
    cell_runs = agents.groupby(study.axes, sort=False)["run_id"].nunique().rename("cell_runs")
    for cell, n in cell_runs[cell_runs < study.seeds].items():
        print(f"{cell}: {n} of {study.seeds} runs so far" + ("" if partial else ", left out"))
    if not partial:
        agents = agents.join(cell_runs, on=study.axes).loc[lambda a: a["cell_runs"] == study.seeds]
    per_run = agents.groupby([*study.axes, "algorithm", "run_id", "seed"], sort=False).agg(
        episodes=("episodes", "mean"), agents=("agent", "size"), completed=("completed", "sum"),
        env_steps=("env_steps", "mean"), wire=("wire_bits_per_agent", "first")).reset_index()
    rows = []
    for key, group in per_run.groupby([*study.axes, "algorithm"], sort=False):
        cell = dict(zip([*study.axes, "learner"], key))
        alone = per_run[(per_run[study.within] == pd.Series({a: cell[a] for a in study.within})).all(axis=1)
                        & (per_run[study.compared] == BASELINE) & (per_run["algorithm"] == cell["learner"])]
        both = sorted(set(group["seed"]) & set(alone["seed"]))  # compared on the seeds both have
        mine, theirs = (g.set_index("seed").loc[both, "episodes"] for g in (group, alone))
        episodes_iqm, lo, hi = iqm_ci(group["episodes"])
        p, p_lo, p_hi = improvement_ci(mine, theirs) if cell[study.compared] != BASELINE else (np.nan,) * 3
        rows.append(dict(**cell, runs=len(group), agents_per_run=int(group["agents"].iloc[0]),
                         completed_frac=group["completed"].sum() / group["agents"].sum(), episodes_iqm=episodes_iqm,
                         episodes_iqm_lo=lo, episodes_iqm_hi=hi, env_steps_median=group["env_steps"].median(),
                         p_better_than_alone=p, p_lo=p_lo, p_hi=p_hi,
                         wire_mbit_per_agent=group["wire"].median() / 1e6))
    return pd.DataFrame(rows)


def few_runs(row: pd.Series) -> bool:
    """Whether a summary row has too few runs for a verdict or a P interval (``MIN_RUNS``)."""
    return bool(row["runs"] < MIN_RUNS)


def verdict(study: Study, row: pd.Series) -> str:
    """The sharing study's ``interval_verdict`` of P's interval, in words ("" for the baseline)."""
    if row[study.compared] == BASELINE or np.isnan(row["p_lo"]):
        return ""
    if few_runs(row):
        return "too few runs"
    shown = interval_verdict(row["p_lo"], row["p_hi"])
    return "no clear difference" if shown == "–" else shown


def _interval(row: pd.Series, prefix: str, form: str) -> str:
    """`` [lo–hi]`` of ``row``'s ``<prefix>lo`` and ``<prefix>hi``; nothing where one run gives none."""
    lo, hi = row[f"{prefix}lo"], row[f"{prefix}hi"]
    return "" if np.isnan(lo) else f" [{lo:{form}}–{hi:{form}}]"


def markdown(study: Study, table: pd.DataFrame) -> str:
    heads = [*study.axes, "learner", "runs", "completed", "episodes to its mission, IQM [95 % CI]",
             "P(fewer than alone) [95 % CI]", "verdict", "wire Mbit/agent"]
    lines = ["| " + " | ".join(heads) + " |", "|---" * len(heads) + "|"]
    for _, r in table.iterrows():
        p = "–" if np.isnan(r["p_better_than_alone"]) else f"{r['p_better_than_alone']:.2f}" + (
            "" if few_runs(r) else _interval(r, "p_", ".2f"))
        learner = LEARNERS.get(r["learner"], r["learner"])
        if r["agents_per_run"] > 1:
            learner += f" ×{r['agents_per_run']}"
        runs = f"{r['runs']}" if r["runs"] == study.seeds else f"{r['runs']} of {study.seeds}"
        lines.append("| " + " | ".join(str(r[a]) for a in study.axes) + f" | {learner} | {runs} | "
                     f"{r['completed_frac']:.0%} | {r['episodes_iqm']:.0f}{_interval(r, 'episodes_iqm_', '.0f')} | "
                     f"{p} | {verdict(study, r)} | {r['wire_mbit_per_agent']:.2f} |")
    return "\n".join(lines) + "\n"


def plot(study: Study, table: pd.DataFrame, path: Path) -> None:
    """IQM episodes to each learner's mission with CIs, a panel per value of the other axes, a
    series per learner."""
    panels = list(table.groupby(study.within, sort=False)) if study.within else [((), table)]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 3.8), squeeze=False)
    for ax, (panel, cell) in zip(axes[0], panels):
        variants = list(dict.fromkeys(cell[study.compared]))
        learners = list(dict.fromkeys(cell["learner"]))
        for i, (learner, rows) in enumerate(cell.groupby("learner", sort=False)):
            x = np.array([variants.index(v) for v in rows[study.compared]]) + (i - (len(learners) - 1) / 2) * 0.2
            ax.errorbar(x, rows["episodes_iqm"], yerr=[rows["episodes_iqm"] - rows["episodes_iqm_lo"],
                                                      rows["episodes_iqm_hi"] - rows["episodes_iqm"]],
                        fmt="o", capsize=3, label=LEARNERS.get(learner, learner))
        ax.set(title=", ".join(map(str, np.atleast_1d(panel))), xticks=range(len(variants)), xticklabels=variants,
               xlim=(-0.5, len(variants) - 0.5),  # one variant: its learners side by side, not across the panel
               ylim=(0, 1.05 * np.nanmax(table[["episodes_iqm", "episodes_iqm_hi"]])),  # one scale from zero
               ylabel="episodes to its own mission, IQM (95 % CI)")
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8)
    fig.suptitle(TITLES.get(study.name, study.name))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--experiment", type=Path, default=PAIRS, help="the experiment file (default: the pairs)")
    parser.add_argument("--work", type=Path, help="the experiment's folder (default results/<file name>)")
    parser.add_argument("--redraw", action="store_true", help="read the committed <name>_agents.csv, not the record")
    parser.add_argument("--partial", action="store_true", help="also the cells with fewer runs than the file's seeds")
    add_record_arguments(parser, "record's tables (<name>_record_<table>.csv.gz)")
    args = parser.parse_args()
    study = Study(args.experiment)
    work = args.work or Path("results") / study.name
    args.out.mkdir(parents=True, exist_ok=True)
    if args.convert:
        added = convert_tables({t: record_path(args.out, study, t) for t in RECORD_TABLES}, study.experiment, work)
        print(f"{added} runs converted into {work}")
    if args.redraw:
        agents = pd.read_csv(args.out / f"{study.name}_agents.csv")
    else:
        flat = flatten_tables(study.experiment, work, RECORD_TABLES if args.flatten else ("episodes", "runs"))
        if args.flatten:
            for table, frame in flat.items():
                write_flat_table(frame, record_path(args.out, study, table))
        episodes = episodes_of(study, work, flat)
        agents = agents_of(study, episodes, flat)
        agents.to_csv(args.out / f"{study.name}_agents.csv", index=False)
        edges = round_edges(episodes, agent_keys(study))
        edges.to_csv(args.out / f"{study.name}_edges.csv", index=False, float_format="%.4g")
        edge_summary(edges, study.axes).to_csv(args.out / f"{study.name}_edges_summary.csv", index=False,
                                               float_format="%.2f")
    table = summary(study, agents, args.partial)
    table.to_csv(args.out / f"{study.name}_summary.csv", index=False)
    (args.out / f"{study.name}_table.md").write_text(markdown(study, table))
    plot(study, table, args.out / f"{study.name}.png")
    print(markdown(study, table))


if __name__ == "__main__":
    main()

"""When does sharing beat learning alone? [the methods of Seo et al. 2022, §4; our question]

    python -m benchmarks.sharing_study [--seeds 20] [--envs cartpole acrobot] [--agents 2 8]
                                       [--populations homogeneous widths rlcode] [--max-episodes 1000]
                                       [--chunk 5]

Every cell (environment × agent count × population) runs every variant on the same seeds, each
run until **every** agent completes its mission (``--until all``) or hits the episode cap:

- variants: independent, FRL, PD, FRD, MixFRD at the seed's protocol, and PD / FRD with the
  distillation knobs: a fixed amount (``--distill-steps``, ``STEPS`` minibatches per round,
  whatever the memory's size, instead of one epoch) and the teacher (``--distill-target better``:
  only peers whose recent mean beats the receiver's), alone and together;
- populations: ``homogeneous`` (the default n-step A2C, h = 64), ``widths`` (hidden widths
  32 / 64 / 128 cycled over the agents, which FRL cannot average, so it is left out) and
  ``rlcode`` (every agent the weaker rlcode recipe);
- environments: CartPole-v1 (mission 490) and Acrobot-v1 (mission −100), 2 and 8 agents.

Reported per cell and variant: the IQM of the episodes to the first agent's mission and to the
last agent's, each with a 95 % stratified-bootstrap CI, and the probability that the variant needs
fewer episodes than independent agents on the same cell (both measures, with CIs).

The study's state is its record, ``--out/sharing_runs.csv``: every finished run of every cell,
finished cells or not, with where it computed (package versions, code hash, CPU; runs recorded
before 2026-12-02 lack them), merged in as each batch of ``--chunk`` seeds ends (a run's results
do not depend on its batch-mates). Committed, it lets a fresh checkout go on where the last one
stopped: seeds already in the record are not run again, and ``--report-only`` rebuilds the
tables from it. The raw runs of a batch under way go to ``--work``, checkpointed every 10
minutes (``frd.rl.checkpoint``) so that a rerun on the same machine resumes it. Several
processes may share a study, even one folder: each batch is run by whichever process locks it
first, and merges into the record under a lock; ``--variants`` picks some of a cell's folders.
The report (``sharing_summary.csv``, ``sharing_table.md`` and two PNGs in ``--out``) covers every
variant that has all its seeds in a cell whose independent runs have all theirs; the rest is
named as left out.
"""
from __future__ import annotations

import argparse
import fcntl
import itertools
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from frd.results import ResultStore, atomic_write_csv  # noqa: E402
from frd.rl.config import rl_config  # noqa: E402
from frd.rl.experiment import run_experiment  # noqa: E402
from frd.rl.summary import BASELINE  # noqa: E402
from frd.stats import improvement_ci, iqm_ci  # noqa: E402

ENVS = {"cartpole": "CartPole-v1", "acrobot": "Acrobot-v1"}
AGENTS = (2, 8)
POPULATIONS: dict[str, dict[str, Any]] = {
    "homogeneous": {}, "widths": {"agent_spec": "h=32;h=64;h=128"}, "rlcode": {"recipe": "rlcode"}}
"""Population → common RL settings on top of the defaults."""
STEPS = 20
"""Minibatches per round of the fixed-amount knob [our choice: below every default epoch of the FRD paper
study, 2 agents' PD ≈ 92 and FRD S = 30 ≈ 40 per round]."""
KNOBS: dict[str, dict[str, Any]] = {
    "": {}, " steps": {"distill_steps": STEPS}, " better": {"distill_target": "better"},
    " steps+better": {"distill_steps": STEPS, "distill_target": "better"}}
"""Label suffix → distillation options of PD and FRD; the first is the seed's protocol."""
PLAIN = ("independent", "frl", "pd", "frd", "mixfrd")
ORDER = ["independent", "frl", *(m + suffix for m in ("pd", "frd") for suffix in KNOBS), "mixfrd"]
"""Rows of a cell in the tables and the figure."""
MEASURES = {"mission_episodes": "first agent", "all_agents_episodes": "every agent"}
RECORD = "sharing_runs.csv"
KEY = ["env", "agents", "population", "variant", "seed"]
"""What identifies a run in the record."""


def variants(population: str) -> list[tuple[str, tuple[str, ...], dict[str, Any]]]:
    """(folder, methods, options) of the experiments of one cell: one batch of every method at its
    defaults, then one batch of PD and FRD per knob setting."""
    plain = tuple(m for m in PLAIN if not (m == "frl" and population == "widths"))
    return [("default", plain, {})] + [(suffix.strip(), ("pd", "frd"), options)
                                       for suffix, options in KNOBS.items() if options]


FOLDERS = [folder for folder, _, _ in variants("homogeneous")]


def labelled(methods: tuple[str, ...], folder: str) -> list[str]:
    return [m if folder == "default" else f"{m} {folder}" for m in methods]


@contextmanager
def locked(path: Path, wait: bool = True) -> Iterator[bool]:
    """Hold ``path`` + ``.lock`` exclusively (processes sharing a record merge one at a time, and
    run different batches); whether it is held: without ``wait``, False if another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True


def read_record(path: Path, max_episodes: int) -> pd.DataFrame:
    """The runs recorded so far; a record of another episode cap is refused (its runs are not
    comparable)."""
    if not path.exists():
        return pd.DataFrame(columns=[*KEY, "max_episodes"])
    record = pd.read_csv(path)
    caps = sorted(set(record["max_episodes"]))
    if caps and caps != [max_episodes]:
        raise SystemExit(f"sharing_study: {path} records runs capped at {caps[0]} episodes, not {max_episodes}; "
                         "use another --out")
    return record


def merge_into_record(path: Path, runs: pd.DataFrame) -> None:
    """Add finished runs to the record (a run already there stays as it is), atomically."""
    with locked(path):
        record = pd.read_csv(path) if path.exists() else runs.iloc[:0]
        atomic_write_csv(pd.concat([record, runs], ignore_index=True).drop_duplicates(KEY, keep="first"), path)


def consecutive(seeds: list[int], most: int) -> list[range]:
    """``seeds`` (ascending) as ranges of consecutive seeds, each of at most ``most``: the batches
    of a folder's runs missing from the record, whatever chunk size recorded the others."""
    batches: list[range] = []
    for s in seeds:
        if batches and batches[-1].stop == s and len(batches[-1]) < most:
            batches[-1] = range(batches[-1].start, s + 1)
        else:
            batches.append(range(s, s + 1))
    return batches


def cell_runs(record: pd.DataFrame, env: str, agents: int, population: str) -> pd.DataFrame:
    return record[(record["env"] == env) & (record["agents"] == agents) & (record["population"] == population)]


def recorded(args: argparse.Namespace, env: str, agents: int, population: str) -> set[tuple[str, int]]:
    """(variant, seed) of the cell's runs in the record."""
    cell = cell_runs(read_record(args.out / RECORD, args.max_episodes), env, agents, population)
    return set(zip(cell["variant"], cell["seed"]))


def run_cell(env: str, agents: int, population: str, args: argparse.Namespace) -> None:
    """Run the seeds of one cell's chosen folders that the record lacks, at most ``--chunk`` seeds
    per batch, merging each batch into the record as it finishes; a batch that another process
    is running is left to it."""
    for folder, methods, options in variants(population):
        if folder not in args.variants:
            continue
        config = rl_config(methods, env_id=ENVS[env], agents=agents, seeds=args.seeds, until="all",
                           max_episodes=args.max_episodes, **POPULATIONS[population], **options)
        have = recorded(args, env, agents, population)
        missing = [s for s in range(args.seeds) if any((v, s) not in have for v in labelled(methods, folder))]
        for seeds in consecutive(missing, args.chunk):
            out = args.work / f"{env}-{agents}agents-{population}" / folder / f"seeds{seeds[0]}-{seeds[-1]}"
            with locked(out, wait=False) as mine:
                have = recorded(args, env, agents, population)
                if not mine or all((v, s) in have for v in labelled(methods, folder) for s in seeds):
                    continue
                print(f"--- {out}: {', '.join(methods)}", flush=True)
                batch = replace(config, first_seed=seeds[0], seeds=len(seeds))
                run_experiment(batch, out, progress=args.progress)
                store = ResultStore(out, batch, batch.resume_key())
                runs = store.read("runs")
                runs = runs.assign(variant=labelled(tuple(runs["method"]), folder), env=env, agents=agents,
                                   population=population, max_episodes=args.max_episodes)
                merge_into_record(args.out / RECORD, runs.merge(store.read("provenance").drop(columns="command"),
                                                                on="run_id", how="left"))


def finished_cells(record: pd.DataFrame, seeds: int) -> pd.DataFrame:
    """The record's runs, first ``seeds`` seeds, of every variant that has them all, in cells whose
    independent runs have them all (what a variant is compared with), in the study's order
    (environments, agent counts, populations). What is left out is said."""
    frames = []
    for env, agents, population in itertools.product(ENVS, sorted(set(record["agents"])), POPULATIONS):
        runs = cell_runs(record, env, agents, population)
        runs = runs[runs["seed"] < seeds]
        variant_names = [v for folder, methods, _ in variants(population) for v in labelled(methods, folder)]
        done = [v for v in variant_names if set(runs.loc[runs["variant"] == v, "seed"]) >= set(range(seeds))]
        cell = f"--- {env}-{agents}agents-{population}"
        if BASELINE in done and len(done) > 1:
            frames.append(runs[runs["variant"].isin(done)])
            if len(done) < len(variant_names):
                print(f"{cell}: {', '.join(v for v in variant_names if v not in done)} unfinished, left out",
                      flush=True)
        elif not runs.empty:
            print(f"{cell}: {len(runs)} of {len(variant_names) * seeds} runs, left out", flush=True)
    return pd.concat(frames, ignore_index=True) if frames else record.iloc[:0]


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Per cell and variant: completion, IQM [CI] of both measures, P(fewer episodes than
    independent) [CI] on both, and the wire's cost: the median run's traffic per agent (up and
    down, every round until the run ended), in megabytes."""
    rows = []
    for (env, agents, population), cell in runs.groupby(["env", "agents", "population"], sort=False):
        alone = cell[cell["variant"] == BASELINE]
        for variant, g in sorted(cell.groupby("variant"), key=lambda item: ORDER.index(item[0])):
            row: dict[str, Any] = dict(env=env, agents=agents, population=population, variant=variant, runs=len(g),
                                       all_completed=(g["agents_completed"] == agents).mean(),
                                       wire_mb_per_agent=((g["bits_up"] + g["bits_down"]) / agents).median() / 8e6)
            for column, name in MEASURES.items():
                mid, lo, hi = iqm_ci(g[column])
                row.update({f"{name} IQM": mid, f"{name} IQM lo": lo, f"{name} IQM hi": hi})
                if variant != BASELINE:
                    p, p_lo, p_hi = improvement_ci(g[column], alone[column])
                    row.update({f"{name} P(better)": p, f"{name} P lo": p_lo, f"{name} P hi": p_hi})
            rows.append(row)
    return pd.DataFrame(rows)


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
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--envs", nargs="+", choices=list(ENVS), default=list(ENVS))
    parser.add_argument("--agents", nargs="+", type=int, default=list(AGENTS))
    parser.add_argument("--populations", nargs="+", choices=list(POPULATIONS), default=list(POPULATIONS))
    parser.add_argument("--variants", nargs="+", choices=FOLDERS, default=FOLDERS,
                        help="which of a cell's folders to run: default = every method at the seed's protocol, "
                             "the others PD and FRD with that knob")
    parser.add_argument("--max-episodes", type=int, default=1000, help="episode cap per agent")
    parser.add_argument("--chunk", type=int, default=5,
                        help="seeds per batch: each batch's runs enter the record as it finishes")
    parser.add_argument("--work", type=Path, default=Path("results/sharing_study"),
                        help="raw runs of the batches under way (resumable)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"),
                        help="the record (sharing_runs.csv), CSV summaries and the PNGs")
    parser.add_argument("--no-progress", dest="progress", action="store_false")
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing: tabulate what the record holds in full")
    args = parser.parse_args()
    if args.chunk < 1:
        parser.error(f"--chunk must be at least 1, got {args.chunk}")
    read_record(args.out / RECORD, args.max_episodes)  # a record of another cap: refused before anything runs
    if not args.report_only:
        args.out.mkdir(parents=True, exist_ok=True)
        for env, agents, population in itertools.product(args.envs, args.agents, args.populations):
            run_cell(env, agents, population, args)
    runs = finished_cells(read_record(args.out / RECORD, args.max_episodes), args.seeds)
    if runs.empty:
        raise SystemExit("sharing_study: no finished cell to report")
    table = summarise(runs)
    table.to_csv(args.out / "sharing_summary.csv", index=False)
    (args.out / "sharing_table.md").write_text(markdown(table))
    plot(table, args.out / "sharing.png")
    plot_cost(table, args.out / "sharing_cost.png")
    print(markdown(table))


if __name__ == "__main__":
    main()

"""One RL experiment end to end: configs → batched runs → saved tables → summary and plots."""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from frd.backends import LOCAL, Executor
from frd.domains import check_baseline
from frd.results import ResultStore, atomic_write_csv, resumed, run_id
from frd.rl.checkpoint import BatchCheckpoint
from frd.rl.config import RLConfig
from frd.rl.plots import plot_mission, plot_payload
from frd.rl.runner import simulate
from frd.rl.runs import RUNS
from frd.rl.series import tensorboard_series
from frd.rl.summary import BASELINE, rl_summary
from frd.tensorboard import live_logger

SINGLE_AGENT = "single-agent"
"""Subfolder of the single-agent reference runs (a config of its own: one agent, independent)."""


def run_experiment(config: RLConfig, out_dir: str | Path, progress: bool = True,
                   single_agent_reference: bool = False, backend: Executor = LOCAL,
                   tensorboard: str | Path | None = None, baseline: str | None = None) -> pd.DataFrame:
    """Run every method × seed not already in ``out_dir``; return the numeric summary
    (``frd.rl.summary.rl_summary``: one row per method and agent count, also in ``summary.csv``).

    Each run's rows are saved the moment it finishes (on any ``backend``), so an interrupted
    experiment resumes where it stopped when the same command is run again; locally the runs
    still going resume from the batch's last checkpoint (``frd.rl.checkpoint``), not from scratch.
    ``single_agent_reference`` also runs one independent agent per seed (in
    ``out_dir/single-agent``), whose row the summary gains: what learning alone takes, against
    which first-of-N missions can be read. ``tensorboard``: also write each finished run's events
    there (``frd.tensorboard``). ``baseline``: the method P(improvement) compares with (default
    ``independent``; one named must be among ``config.methods``).
    """
    config.validate()  # before anything is written
    if baseline is not None:
        check_baseline(baseline, config.methods)
    log = live_logger(tensorboard, tensorboard_series)
    reference = None
    if single_agent_reference:
        alone = replace(config, agents=1, methods=("independent",), options={})
        run_experiment(alone, Path(out_dir) / SINGLE_AGENT, progress, backend=backend,
                       tensorboard=None if tensorboard is None else Path(tensorboard) / SINGLE_AGENT)
        reference = ResultStore(Path(out_dir) / SINGLE_AGENT, backend.record(alone), alone.resume_key())
    store = ResultStore(out_dir, backend.record(config), config.resume_key())
    seeds = range(config.first_seed, config.first_seed + config.seeds)
    done = store.finished()
    todo = [(m, s) for m in config.methods for s in seeds if run_id(m, s) not in done]
    total = len(config.methods) * config.seeds
    note = resumed(total - len(todo), total, store.out)
    if progress and note:
        print(note, file=sys.stderr)
    try:
        with tqdm(total=total, initial=total - len(todo), desc="runs", unit="run", disable=not progress) as bar:
            def finished(tables: dict[str, pd.DataFrame]) -> None:
                if str(tables["runs"]["run_id"].iloc[0]) in done:  # run again from a checkpoint: the same tables
                    return
                store.save_run(tables)
                log(store, tables)
                bar.update()

            if backend.local:  # all methods in one batch, resumable mid-way
                checkpoint = BatchCheckpoint(store.out / "checkpoint.pkl", config)
                simulate(config, todo, finished, bar.set_postfix_str, checkpoint=checkpoint)
            else:
                for _, tables in backend.execute(RUNS, config, todo, on_status=bar.set_postfix_str):
                    finished(tables)
    finally:
        store.consolidate()  # also after Ctrl-C: the tables hold every finished run
    return report(store, config, reference, baseline or BASELINE)


def report(store: ResultStore, config: RLConfig, reference: ResultStore | None = None,
           baseline: str = BASELINE) -> pd.DataFrame:
    """Numeric summary (saved as ``summary.csv``) and figures of this config's methods and seeds
    (a folder may hold more), with the single-agent reference's row last when there is one;
    P(improvement) against ``baseline``."""
    def mine(frame: pd.DataFrame) -> pd.DataFrame:
        if frame.empty:  # a record of runs alone, converted from a study's
            return frame
        seeds = frame["seed"].between(config.first_seed, config.first_seed + config.seeds - 1)
        return frame[frame["method"].isin(config.methods) & seeds]

    runs, episodes = mine(store.read("runs")), mine(store.read("episodes"))
    order = {m: i for i, m in enumerate(config.methods)}  # tables and plots in the order asked for
    runs = runs.sort_values("method", key=lambda m: m.map(order), kind="stable")
    summary = rl_summary(runs, baseline)
    if reference is not None:
        alone = mine(reference.read("runs")).assign(method="independent")
        summary = pd.concat([summary, rl_summary(alone, baseline)], ignore_index=True)
    atomic_write_csv(summary, store.path("summary"))
    if not episodes.empty:
        plot_mission(episodes, runs, store.out / "mission.png", config.window, config.target)
    plot_payload(runs, store.out / "payload.png")
    return summary

"""A classification experiment at a glance: a summary table over seeds and accuracy vs iterations."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from frd.classification.methods import GLOBAL
from frd.results import save_figure
from frd.stats import quartiles


def summarize(runs: pd.DataFrame, ledger: pd.DataFrame) -> pd.DataFrame:
    """One row per (method, dataset, partition): final accuracy (median [25–75 %] over seeds) and
    payload, per device per training round (from the ledger) and in total per run."""
    rows = []
    for (method, dataset, partition), group in runs.groupby(["method", "dataset", "partition"], sort=False):
        sent = ledger[ledger["run_id"].isin(group["run_id"]) & (ledger["round"] >= 1)]
        per_round = sent.groupby("direction")["bits"].mean()
        rows.append({
            "method": method, "dataset": dataset, "partition": partition, "seeds": len(group),
            "parameters": int(group["parameters"].iloc[0]), "iterations": int(group["iterations"].iloc[0]),
            "device acc %": quartiles(100 * group["accuracy"]),
            "device acc after local %": quartiles(100 * group["local_accuracy"]),
            "global acc %": quartiles(100 * group["global_accuracy"]),
            "up bits/dev/round": int(per_round.get("up", 0)), "down bits/dev/round": int(per_round.get("down", 0)),
            "total up bits": quartiles(group["bits_up"]), "total down bits": quartiles(group["bits_down"]),
            "compute s": quartiles(group["compute_s"]), "comm s": quartiles(group["comm_s"]),
        })
    return pd.DataFrame(rows)


def plot_accuracy(rounds: pd.DataFrame, path: str | Path, title: str) -> None:
    """Test accuracy vs local iterations: median over seeds, shaded 25–75 %, one line per model.
    Each round has two points at the same iteration, after local training and after the
    download, so a drop at the exchange and the recovery during local training show as a sawtooth."""
    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.add_subplot()
    seeds = rounds["seed"].nunique()
    order = {"local": 0, "exchanged": 1}
    for device, group in rounds.groupby("device"):
        q = group.groupby(["iteration", group["phase"].map(order)])["accuracy"].quantile([0.25, 0.5, 0.75]).unstack()
        x = q.index.get_level_values("iteration")
        label = "global model" if device == GLOBAL else f"reference device {device}"
        ax.plot(x, q[0.5], label=label)
        ax.fill_between(x, q[0.25], q[0.75], alpha=0.25)
    ax.set(xlabel="local iterations", ylabel="test accuracy", title=f"{title} — median of {seeds} seed(s)")
    ax.grid(alpha=0.3)
    ax.legend()
    save_figure(fig, Path(path))

"""A classification experiment at a glance: a summary table over seeds and accuracy vs iterations."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from frd.classification.config import ClsConfig
from frd.classification.methods import GLOBAL
from frd.results import ResultStore, atomic_write_csv, run_id, save_figure
from frd.stats import fmt


def cls_summary(runs: pd.DataFrame, rounds: pd.DataFrame, ledger: pd.DataFrame) -> pd.DataFrame:
    """One numeric row per (method, dataset, partition); accuracies are fractions in [0, 1].

    Columns: ``seeds``, ``parameters`` (one model's), ``iterations`` (local iterations per device
    in a run); ``accuracy_final`` (the reference device's test accuracy after the last round's
    download: median over seeds) with ``_q25``/``_q75``; ``accuracy_best`` and ``best_round``
    (the best round ≥ 1 of the reference device's accuracy curve after each download, averaged
    over seeds); ``accuracy_after_local`` (the same device after the last round's local training,
    median over seeds); ``accuracy_global`` (the server's model, median over seeds). Each is NaN
    where the method has no such model (FedDualMatch keeps no device model, FD no global one).
    ``bits_up_per_device_round``/``bits_down_per_device_round``: one device's payload per
    training round (the mean over the ledger's transfers of rounds ≥ 1, all seeds);
    ``bits_up_total``/``bits_down_total``: all devices and rounds of a run, setup included
    (median over seeds); ``compute_seconds``/``comm_seconds``: per run, median over seeds."""
    rows = []
    for (method, dataset, partition), group in runs.groupby(["method", "dataset", "partition"], sort=False):
        sent = ledger[ledger["run_id"].isin(group["run_id"]) & (ledger["round"] >= 1)]
        per_round = sent.groupby("direction")["bits"].mean()
        mine = rounds[rounds["run_id"].isin(group["run_id"])]
        curve = mine[(mine["device"] != GLOBAL) & (mine["phase"] == "exchanged") & (mine["round"] >= 1)]
        curve = curve.groupby("round")["accuracy"].mean()
        accuracy = group["accuracy"]
        rows.append({
            "method": method, "dataset": dataset, "partition": partition, "seeds": len(group),
            "parameters": int(group["parameters"].iloc[0]), "iterations": int(group["iterations"].iloc[0]),
            "accuracy_final": accuracy.median(), "accuracy_final_q25": accuracy.quantile(0.25),
            "accuracy_final_q75": accuracy.quantile(0.75),
            "accuracy_best": curve.max() if len(curve) else np.nan,
            "best_round": int(curve.idxmax()) if len(curve) else np.nan,
            "accuracy_after_local": group["local_accuracy"].median(), "accuracy_global": group["global_accuracy"].median(),
            "bits_up_per_device_round": float(per_round.get("up", 0)),
            "bits_down_per_device_round": float(per_round.get("down", 0)),
            "bits_up_total": group["bits_up"].median(), "bits_down_total": group["bits_down"].median(),
            "compute_seconds": group["compute_s"].median(), "comm_seconds": group["comm_s"].median(),
        })
    return pd.DataFrame(rows)


def cls_table(summary: pd.DataFrame) -> pd.DataFrame:
    """``cls_summary``'s rows as text for people: accuracies in %, quartiles in brackets, – for none."""
    def percent(x: float) -> str:
        return fmt(100 * x)

    return pd.DataFrame([{
        "method": row["method"], "dataset": row["dataset"], "partition": row["partition"], "seeds": row["seeds"],
        "parameters": row["parameters"], "iterations": row["iterations"],
        "device acc %": (f"{percent(row['accuracy_final'])} [{percent(row['accuracy_final_q25'])}–"
                         f"{percent(row['accuracy_final_q75'])}]" if np.isfinite(row["accuracy_final"]) else "–"),
        "best device acc % (round)": (f"{percent(row['accuracy_best'])} ({row['best_round']:.0f})"
                                      if np.isfinite(row["accuracy_best"]) else "–"),
        "device acc after local %": percent(row["accuracy_after_local"]),
        "global acc %": percent(row["accuracy_global"]),
        "up bits/dev/round": fmt(row["bits_up_per_device_round"]),
        "down bits/dev/round": fmt(row["bits_down_per_device_round"]),
        "total up bits": fmt(row["bits_up_total"]), "total down bits": fmt(row["bits_down_total"]),
        "compute s": fmt(row["compute_seconds"]), "comm s": fmt(row["comm_seconds"]),
    } for _, row in summary.iterrows()])


def summarize(config: ClsConfig, store: ResultStore) -> pd.DataFrame:
    """The numeric summary of ``config``'s seeds in ``store`` (also written as ``summary.csv``) and
    their accuracy plot (``accuracy.png``); the folder may hold other seeds."""
    ids = {run_id(config.method, s) for s in config.run_seeds}
    runs, rounds, ledger = (store.read(t) for t in ("runs", "rounds", "ledger"))
    runs, rounds = runs[runs["run_id"].isin(ids)], rounds[rounds["run_id"].isin(ids)]
    summary = cls_summary(runs, rounds, ledger)
    atomic_write_csv(summary, store.path("summary"))
    plot_accuracy(rounds, store.out / "accuracy.png", f"{config.method} on {config.dataset} ({config.partition})")
    return summary


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

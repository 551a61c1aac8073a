"""A classification experiment at a glance: a summary table over seeds per method, accuracy against
uplink bits, and accuracy against local iterations."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from frd.classification.config import ClsConfig, as_configs
from frd.classification.methods import CLS_METHODS, GLOBAL
from frd.results import ResultStore, atomic_write_csv, run_id, save_figure
from frd.stats import fmt, iqm_ci, median_ci

DIRECTIONS = ("up", "down")


def cls_summary(runs: pd.DataFrame, rounds: pd.DataFrame, ledger: pd.DataFrame) -> pd.DataFrame:
    """One numeric row per (method, dataset, partition), in the order of ``runs``; accuracies are
    fractions in [0, 1], and names follow ``frd.rl.summary.rl_summary`` where the idea is the same.

    Columns: ``runs`` (seeds), ``parameters`` (one model's), ``iterations`` (local iterations per
    device in a run); ``accuracy_final_median`` (the reference device's test accuracy after the last
    round's download) with ``_q25``/``_q75``, the median's 95 % bootstrap interval
    ``_median_lo/_hi``, and the IQM with its 95 % stratified-bootstrap interval ``_iqm/_iqm_lo/_iqm_hi``
    (intervals NaN below 2 seeds); ``accuracy_best`` and ``best_round`` (the best round ≥ 1 of the
    reference device's accuracy curve after each download, averaged over seeds);
    ``accuracy_after_local_median`` (the same device after the last round's local training);
    ``accuracy_global_median`` (the server's model). Each is NaN where the method has no such model
    (FedDualMatch keeps no device model, FD no global one).
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
        median_lo, median_hi = median_ci(accuracy)
        iqm, iqm_lo, iqm_hi = iqm_ci(accuracy)
        final = "accuracy_final_"
        rows.append({
            "method": method, "dataset": dataset, "partition": partition, "runs": len(group),
            "parameters": int(group["parameters"].iloc[0]), "iterations": int(group["iterations"].iloc[0]),
            final + "median": accuracy.median(), final + "q25": accuracy.quantile(0.25),
            final + "q75": accuracy.quantile(0.75), final + "median_lo": median_lo, final + "median_hi": median_hi,
            final + "iqm": iqm, final + "iqm_lo": iqm_lo, final + "iqm_hi": iqm_hi,
            "accuracy_best": curve.max() if len(curve) else np.nan,
            "best_round": int(curve.idxmax()) if len(curve) else np.nan,
            "accuracy_after_local_median": group["local_accuracy"].median(),
            "accuracy_global_median": group["global_accuracy"].median(),
            **{f"bits_{d}_per_device_round": float(per_round.get(d, 0)) for d in DIRECTIONS},
            **{f"bits_{d}_total": group[f"bits_{d}"].median() for d in DIRECTIONS},
            "compute_seconds": group["compute_s"].median(), "comm_seconds": group["comm_s"].median(),
        })
    return pd.DataFrame(rows)


def accuracy_vs_bits(runs: pd.DataFrame, rounds: pd.DataFrame, ledger: pd.DataFrame) -> pd.DataFrame:
    """One numeric row per method (in the order of ``runs``) and round r ≥ 1: ``runs`` (seeds),
    ``model`` (``device``: the reference device, the one ``accuracy_final_median`` reads; ``global``
    where devices keep no model: FedDualMatch), ``bits_up_cumulative``/``bits_down_cumulative``
    (what all devices sent / received in rounds 0…r, setup included: mean over seeds), and that
    model's test accuracy after round r's download: ``accuracy_mean`` and the range over seeds
    ``accuracy_min``/``accuracy_max``. Round 0 is left out: it may have sent nothing, which a
    log axis cannot show [our choice]."""
    after = rounds[(rounds["phase"] == "exchanged") & (rounds["round"] >= 1)]
    points = []
    for _, run in runs.iterrows():
        rid, steps = run["run_id"], range(int(run["rounds"]) + 1)
        sent = ledger[ledger["run_id"] == rid]
        cumulative = {d: sent[sent["direction"] == d].groupby("round")["bits"].sum().reindex(steps, fill_value=0).cumsum()
                      for d in DIRECTIONS}
        mine = after[after["run_id"] == rid]
        model = "device" if (mine["device"] != GLOBAL).any() else "global"
        curve = mine[(mine["device"] != GLOBAL) == (model == "device")].set_index("round")["accuracy"]
        points += [{"method": run["method"], "model": model, "round": r, "run_id": rid,
                    **{f"bits_{d}": cumulative[d][r] for d in DIRECTIONS}, "accuracy": accuracy}
                   for r, accuracy in curve.items()]
    by = pd.DataFrame(points).groupby(["method", "model", "round"], sort=False)
    return by.agg(runs=("run_id", "size"), bits_up_cumulative=("bits_up", "mean"),
                  bits_down_cumulative=("bits_down", "mean"), accuracy_mean=("accuracy", "mean"),
                  accuracy_min=("accuracy", "min"), accuracy_max=("accuracy", "max")).reset_index()


def cls_table(summary: pd.DataFrame) -> pd.DataFrame:
    """``cls_summary``'s rows as text for people: accuracies in %, quartiles in brackets, – for none."""
    def percent(x: float) -> str:
        return fmt(100 * x)

    final = "accuracy_final_"
    return pd.DataFrame([{
        "method": row["method"], "dataset": row["dataset"], "partition": row["partition"], "seeds": row["runs"],
        "parameters": row["parameters"], "iterations": row["iterations"],
        "device acc %": (f"{percent(row[final + 'median'])} [{percent(row[final + 'q25'])}–"
                         f"{percent(row[final + 'q75'])}]" if np.isfinite(row[final + "median"]) else "–"),
        "best device acc % (round)": (f"{percent(row['accuracy_best'])} ({row['best_round']:.0f})"
                                      if np.isfinite(row["accuracy_best"]) else "–"),
        "device acc after local %": percent(row["accuracy_after_local_median"]),
        "global acc %": percent(row["accuracy_global_median"]),
        "up bits/dev/round": fmt(row["bits_up_per_device_round"]),
        "down bits/dev/round": fmt(row["bits_down_per_device_round"]),
        "total up bits": fmt(row["bits_up_total"]), "total down bits": fmt(row["bits_down_total"]),
        "compute s": fmt(row["compute_seconds"]), "comm s": fmt(row["comm_seconds"]),
    } for _, row in summary.iterrows()])


def summarize(configs: ClsConfig | Sequence[ClsConfig], store: ResultStore) -> pd.DataFrame:
    """The numeric summary of the configs' seeds in ``store``, one row per method in their order
    (also written as ``summary.csv``), their accuracy against uplink bits (``accuracy_bits.csv``,
    ``.png`` and ``.pdf``) and against local iterations (``accuracy.png``); the folder may hold
    other runs."""
    configs = as_configs(configs)
    order = {config.method: i for i, config in enumerate(configs)}
    ids = {run_id(config.method, s) for config in configs for s in config.run_seeds}
    runs, rounds, ledger = (frame[frame["run_id"].isin(ids)] for frame in map(store.read, ("runs", "rounds", "ledger")))
    runs = runs.sort_values("method", key=lambda m: m.map(order), kind="stable")
    summary, curves = cls_summary(runs, rounds, ledger), accuracy_vs_bits(runs, rounds, ledger)
    atomic_write_csv(summary, store.path("summary"))
    atomic_write_csv(curves, store.path("accuracy_bits"))
    where = f"{configs[0].dataset} ({configs[0].partition})"
    plot_accuracy(rounds, runs, store.out / "accuracy.png", f"{','.join(order)} on {where}")
    plot_accuracy_bits(curves, store.out / "accuracy_bits.png", where)
    return summary


def method_color(method: str) -> str:
    """A method's colour in every figure: its place among the registered methods."""
    names = list(CLS_METHODS)
    return f"C{names.index(method) % 10}" if method in names else "black"


def accuracy_bits_figure(curves: pd.DataFrame, title: str) -> Figure:
    """``accuracy_vs_bits`` drawn: one line per method (mean over seeds, shaded between the seeds'
    lowest and highest accuracy when there are several), uplink bits on a log axis."""
    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.add_subplot()
    for (method, model), curve in curves.groupby(["method", "model"], sort=False):
        color = method_color(method)
        ax.plot(curve["bits_up_cumulative"], curve["accuracy_mean"], marker="o", markersize=3, color=color,
                label=method if model == "device" else f"{method} ({model} model)")
        if curve["runs"].max() > 1:
            ax.fill_between(curve["bits_up_cumulative"], curve["accuracy_min"], curve["accuracy_max"],
                            color=color, alpha=0.2)
    seeds = int(curves["runs"].max())
    band = ", band: lowest–highest seed" if seeds > 1 else ""
    ax.set_xscale("log")
    ax.set(xlabel="uplink bits, all devices, cumulative", ylabel="test accuracy after the download",
           title=f"{title}: mean of {seeds} seed(s){band}")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    return fig


def plot_accuracy_bits(curves: pd.DataFrame, path: Path, title: str) -> None:
    """``accuracy_bits_figure`` as ``path`` (PNG) and beside it as PDF."""
    save_figure(accuracy_bits_figure(curves, title), path, also=(".pdf",))


def plot_accuracy(rounds: pd.DataFrame, runs: pd.DataFrame, path: str | Path, title: str) -> None:
    """Test accuracy vs local iterations: median over seeds, shaded 25–75 %, one line per method
    and model (the global model dashed). Each round has two points at the same iteration, after
    local training and after the download, so a drop at the exchange and the recovery during local
    training show as a sawtooth."""
    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.add_subplot()
    seeds = rounds["seed"].nunique()
    order = {"local": 0, "exchanged": 1}
    methods = rounds["run_id"].map(runs.set_index("run_id")["method"])
    for method in dict.fromkeys(runs["method"]):
        for device, group in rounds[methods == method].groupby("device"):
            q = group.groupby(["iteration", group["phase"].map(order)])["accuracy"].quantile([0.25, 0.5, 0.75]).unstack()
            x = q.index.get_level_values("iteration")
            label = "global model" if device == GLOBAL else f"reference device {device}"
            ax.plot(x, q[0.5], label=f"{method}: {label}", color=method_color(method),
                    linestyle="--" if device == GLOBAL else "-")
            ax.fill_between(x, q[0.25], q[0.75], color=method_color(method), alpha=0.25)
    ax.set(xlabel="local iterations", ylabel="test accuracy", title=f"{title} — median of {seeds} seed(s)")
    ax.grid(alpha=0.3)
    ax.legend()
    save_figure(fig, Path(path))

"""A classification experiment at a glance: a summary table over seeds per method, accuracy against
uplink bits, and accuracy against local iterations."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from frd.classification.config import ClsConfig, as_configs, run_ids
from frd.classification.methods import CLS_METHODS, GLOBAL
from frd.domains import check_baseline
from frd.results import ResultStore, atomic_write_csv, save_figure
from frd.stats import CI95, IQR, bracketed, fmt, improvement_columns, iqm_ci, median_ci, nearest_rank_quartiles

DIRECTIONS = ("up", "down")
IMPROVEMENTS = {"accuracy": "p_improvement"}
"""runs.csv column → the summary column of P(higher than the baseline's) on it: the final accuracy."""


ACCURACY_TARGETS = (0.85, 0.90)
"""Accuracies whose time on the virtual clock the summary reports [our choice: the clock study's targets]."""


def cls_summary(runs: pd.DataFrame, rounds: pd.DataFrame, ledger: pd.DataFrame, baseline: str | None = None) -> pd.DataFrame:
    """One numeric row per (method, dataset, partition), in the order of ``runs``; accuracies are
    fractions in [0, 1], and names follow ``frd.rl.summary.rl_summary`` where the idea is the same.

    Columns: ``runs`` (seeds), ``parameters`` (one model's), ``iterations`` (local iterations per
    device in a run); ``accuracy_final_median`` (the reference device's test accuracy after the last
    round's download) with ``_q25``/``_q75``, the median's 95 % bootstrap interval
    ``_median_lo/_hi``, and the IQM with its 95 % stratified-bootstrap interval ``_iqm/_iqm_lo/_iqm_hi``
    (intervals NaN below 2 seeds); ``accuracy_best_*`` the same of each seed's best accuracy after a
    download (rounds ≥ 1, of the model ``accuracy_vs_bits`` draws: the reference device, or the
    global model where devices keep none), and ``best_round_median``/``_q25``/``_q75`` of the round
    it came in (the first, on ties), as FL papers report best and last: nearest ranks, so each is a
    round some seed had (``frd.stats.nearest_rank_quartiles``);
    ``accuracy_after_local_median`` with ``_median_lo/_hi`` (the reference device after the last
    round's local training); ``accuracy_global_median`` (the server's model). Each is NaN where the
    method has no such model (FedDualMatch keeps no device model, FD no global one).
    ``baseline`` (the method given, else empty) and ``p_improvement`` with ``_lo/_hi``: P(a higher
    final accuracy than a run of the baseline) and its 95 % interval (NaN without a baseline, and in
    its own row).
    ``bits_up_per_device_round``/``bits_down_per_device_round``: one device's payload per
    training round (the mean over the ledger's transfers of rounds ≥ 1, all seeds);
    ``bits_up_total``/``bits_down_total``: all devices and rounds of a run, setup included
    (median over seeds); ``compute_seconds`` (this machine's time) and ``comm_seconds`` (the channel's): per
    run, median over seeds. On the virtual clock (``frd.clock``): ``sim_seconds`` (a run's end, median over
    seeds), and per target a of ``ACCURACY_TARGETS``, ``time_to_<a%>_median`` (the virtual seconds at the
    first download after which the reported model reached a; a seed that never did counts as never, so the
    median is NaN once half the seeds miss it) and ``time_to_<a%>_reached`` (the share of seeds that did)."""
    after = rounds[(rounds["phase"] == "exchanged") & (rounds["round"] >= 1)]
    base = runs[runs["method"] == baseline]
    rows = []
    for (method, dataset, partition), group in runs.groupby(["method", "dataset", "partition"], sort=False):
        sent = ledger[ledger["run_id"].isin(group["run_id"]) & (ledger["round"] >= 1)]
        per_round = sent.groupby("direction")["bits"].mean()
        curves = [reported_curve(after[after["run_id"] == rid])[1] for rid in group["run_id"]]
        best = pd.Series([c.max() if len(c) else np.nan for c in curves], dtype=float)
        best_round = pd.Series([c.idxmax() if len(c) else np.nan for c in curves], dtype=float)
        after_local = group["local_accuracy"]
        round_q25, round_median, round_q75 = nearest_rank_quartiles(best_round)
        rows.append({
            "method": method, "dataset": dataset, "partition": partition, "runs": len(group),
            "parameters": int(group["parameters"].iloc[0]), "iterations": int(group["iterations"].iloc[0]),
            **spread("accuracy_final_", group["accuracy"]), **spread("accuracy_best_", best),
            "best_round_median": round_median, "best_round_q25": round_q25, "best_round_q75": round_q75,
            "accuracy_after_local_median": after_local.median(),
            **dict(zip(("accuracy_after_local_median_lo", "accuracy_after_local_median_hi"), median_ci(after_local))),
            "accuracy_global_median": group["global_accuracy"].median(),
            "baseline": np.nan if baseline is None else baseline,
            **improvement_columns(group, base if method != baseline else base.iloc[:0], IMPROVEMENTS,
                                  lower_is_better=False),
            **{f"bits_{d}_per_device_round": float(per_round.get(d, 0)) for d in DIRECTIONS},
            **{f"bits_{d}_total": group[f"bits_{d}"].median() for d in DIRECTIONS},
            "compute_seconds": group["compute_s"].median(), "comm_seconds": group["comm_s"].median(),
            "sim_seconds": group["sim_s"].median() if "sim_s" in group else np.nan,
            **time_to_targets([after[after["run_id"] == rid] for rid in group["run_id"]]),
        })
    return pd.DataFrame(rows)


def time_to_targets(runs_after: list[pd.DataFrame]) -> dict[str, float]:
    """``time_to_<a%>_median`` and ``_reached`` over runs, each run given by its ``exchanged`` rows."""
    columns = {}
    for target in ACCURACY_TARGETS:
        times = []
        for after in runs_after:
            model = reported_curve(after)[0]
            rows = after[(after["device"] != GLOBAL) == (model == "device")].sort_values("round")
            reached = rows[rows["accuracy"] >= target]
            times.append(float(reached["sim_s"].iloc[0]) if len(reached) and "sim_s" in rows else np.inf)
        median = float(np.median(times)) if times else np.nan
        name = f"time_to_{round(100 * target)}"
        columns.update({f"{name}_median": median if np.isfinite(median) else np.nan,
                        f"{name}_reached": float(np.mean(np.isfinite(times))) if times else np.nan})
    return columns


def time_to_text(row: pd.Series, target: float) -> str:
    """``0.42 (90%)``: the median virtual seconds to ``target`` and the share of seeds that reached it."""
    name = f"time_to_{round(100 * target)}"
    if f"{name}_reached" not in row or not np.isfinite(row[f"{name}_reached"]):  # a summary saved before the clock
        return "–"
    return f"{fmt(row[f'{name}_median'])} ({row[f'{name}_reached']:.0%})"


def spread(prefix: str, values: pd.Series) -> dict[str, float]:
    """``values`` over seeds as ``prefix`` + median, q25, q75, the median's 95 % bootstrap interval
    (median_lo/_hi) and the IQM with its 95 % stratified-bootstrap interval (iqm, iqm_lo/_hi)."""
    median_lo, median_hi = median_ci(values)
    iqm, iqm_lo, iqm_hi = iqm_ci(values)
    return {prefix + "median": values.median(), prefix + "q25": values.quantile(0.25),
            prefix + "q75": values.quantile(0.75), prefix + "median_lo": median_lo, prefix + "median_hi": median_hi,
            prefix + "iqm": iqm, prefix + "iqm_lo": iqm_lo, prefix + "iqm_hi": iqm_hi}


def reported_curve(after: pd.DataFrame) -> tuple[str, pd.Series]:
    """One run's accuracy after each download (``after``: its ``exchanged`` rows), by round, of the
    model a summary reads: ``device`` (the reference device), or ``global`` where devices keep
    none (FedDualMatch)."""
    model = "device" if (after["device"] != GLOBAL).any() else "global"
    return model, after[(after["device"] != GLOBAL) == (model == "device")].set_index("round")["accuracy"].sort_index()


def accuracy_vs_bits(runs: pd.DataFrame, rounds: pd.DataFrame, ledger: pd.DataFrame) -> pd.DataFrame:
    """One numeric row per method (in the order of ``runs``) and round r ≥ 1: ``runs`` (seeds),
    ``model`` (``device``: the reference device, the one ``accuracy_final_median`` reads; ``global``
    where devices keep no model: FedDualMatch), ``bits_up_cumulative``/``bits_down_cumulative``
    (what all devices sent / received in rounds 0…r, setup included: median over seeds), and that
    model's test accuracy after round r's download: ``accuracy_median`` and the range over seeds
    ``accuracy_min``/``accuracy_max``. Medians, as the summary's (``cls_summary``), so the curve's
    last point is the summary's final accuracy. Round 0 is left out: it may have sent nothing,
    which a log axis cannot show [our choice]."""
    after = rounds[(rounds["phase"] == "exchanged") & (rounds["round"] >= 1)]
    points = []
    for _, run in runs.iterrows():
        rid, steps = run["run_id"], range(int(run["rounds"]) + 1)
        sent = ledger[ledger["run_id"] == rid]
        cumulative = {d: sent[sent["direction"] == d].groupby("round")["bits"].sum().reindex(steps, fill_value=0).cumsum()
                      for d in DIRECTIONS}
        model, curve = reported_curve(after[after["run_id"] == rid])
        points += [{"method": run["method"], "model": model, "round": r, "run_id": rid,
                    **{f"bits_{d}": cumulative[d][r] for d in DIRECTIONS}, "accuracy": accuracy}
                   for r, accuracy in curve.items()]
    by = pd.DataFrame(points).groupby(["method", "model", "round"], sort=False)
    return by.agg(runs=("run_id", "size"), bits_up_cumulative=("bits_up", "median"),
                  bits_down_cumulative=("bits_down", "median"), accuracy_median=("accuracy", "median"),
                  accuracy_min=("accuracy", "min"), accuracy_max=("accuracy", "max")).reset_index()


def cls_table(summary: pd.DataFrame) -> pd.DataFrame:
    """``cls_summary``'s rows as text for people: accuracies in %, each row's label naming its
    statistic and what its brackets hold (the 25–75 % range: ``[IQR]``), – for none."""
    def percent(x: float) -> str:
        return fmt(100 * x)

    final = "accuracy_final_"
    return pd.DataFrame([{
        "method": row["method"], "dataset": row["dataset"], "partition": row["partition"], "seeds": row["runs"],
        "parameters": row["parameters"], "iterations": row["iterations"],
        f"device acc %, median [{IQR}]": bracketed(100 * row[final + "median"], 100 * row[final + "q25"],
                                                   100 * row[final + "q75"]),
        "best acc %, median (round)": (f"{percent(row['accuracy_best_median'])} ({row['best_round_median']:.0f})"
                                       if np.isfinite(row["accuracy_best_median"]) else "–"),
        "device acc after local %": percent(row["accuracy_after_local_median"]),
        "global acc %": percent(row["accuracy_global_median"]),
        **({f"P(higher final acc than {row['baseline']}) [{CI95}]":
            bracketed(row["p_improvement"], row["p_improvement_lo"], row["p_improvement_hi"], lambda x: f"{x:.2f}")}
           if isinstance(row.get("baseline"), str) else {}),
        "up bits/dev/round": fmt(row["bits_up_per_device_round"]),
        "down bits/dev/round": fmt(row["bits_down_per_device_round"]),
        "total up bits": fmt(row["bits_up_total"]), "total down bits": fmt(row["bits_down_total"]),
        **{f"virtual s to {round(100 * a)} %, median (reached)": time_to_text(row, a) for a in ACCURACY_TARGETS},
        "virtual s": fmt(row.get("sim_seconds", np.nan)),
        "compute s": fmt(row["compute_seconds"]), "comm s": fmt(row["comm_seconds"]),
    } for _, row in summary.iterrows()])


def summarize(configs: ClsConfig | Sequence[ClsConfig], store: ResultStore, baseline: str | None = None) -> pd.DataFrame:
    """The numeric summary of the configs' seeds in ``store``, one row per method in their order
    (also written as ``summary.csv``; P(improvement) against ``baseline``, one of their methods, if
    given), their accuracy against uplink bits (``accuracy_bits.csv``, ``.png`` and ``.pdf``) and
    against local iterations (``accuracy.png``); the folder may hold other runs."""
    configs = as_configs(configs)
    if baseline is not None:
        check_baseline(baseline, [config.method for config in configs])
    order = {config.method: i for i, config in enumerate(configs)}
    ids = run_ids(configs)
    runs, rounds, ledger = (frame[frame["run_id"].isin(ids)] for frame in map(store.read, ("runs", "rounds", "ledger")))
    runs = runs.sort_values("method", key=lambda m: m.map(order), kind="stable")
    summary, curves = cls_summary(runs, rounds, ledger, baseline), accuracy_vs_bits(runs, rounds, ledger)
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
    """``accuracy_vs_bits`` drawn: one line per method (median over seeds, shaded between the seeds'
    lowest and highest accuracy when there are several), uplink bits on a log axis."""
    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.add_subplot()
    for (method, model), curve in curves.groupby(["method", "model"], sort=False):
        color = method_color(method)
        ax.plot(curve["bits_up_cumulative"], curve["accuracy_median"], marker="o", markersize=3, color=color,
                label=method if model == "device" else f"{method} ({model} model)")
        if curve["runs"].max() > 1:
            ax.fill_between(curve["bits_up_cumulative"], curve["accuracy_min"], curve["accuracy_max"],
                            color=color, alpha=0.2)
    seeds = int(curves["runs"].max())
    band = ", band: lowest–highest seed" if seeds > 1 else ""
    ax.set_xscale("log")
    ax.set(xlabel="uplink bits, all devices, cumulative", ylabel="test accuracy after the download",
           title=f"{title}: median of {seeds} seed(s){band}")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    return fig


def plot_accuracy_bits(curves: pd.DataFrame, path: Path, title: str) -> None:
    """``accuracy_bits_figure`` as ``path`` (PNG) and beside it as PDF."""
    save_figure(accuracy_bits_figure(curves, title), path)


def plot_accuracy(rounds: pd.DataFrame, runs: pd.DataFrame, path: str | Path, title: str) -> None:
    """Test accuracy vs local iterations (``path``, PNG, and beside it PDF): median over seeds,
    shaded 25–75 %, one line per method and model (the global model dashed). Each round has two
    points at the same iteration, after local training and after the download, so a drop at the
    exchange and the recovery during local training show as a sawtooth."""
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

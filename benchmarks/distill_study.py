"""FedDualMatch and FedDM against FedAvg and FD on MNIST under Dirichlet label skew [FedDualMatch, OpenReview; Xiong et al. 2023].

    frd run benchmarks/experiments/distill.toml --out results/distill     # the grid (resumable)
    python -m benchmarks.distill_study [--work results/distill] [--out benchmarks/results] [--flatten | --convert]

Setting: the shared MNIST set (the official 10,000 test images; 8,000 pool / 2,000 held-out test,
split seed 0), 10 clients × 500 samples drawn by Dirichlet(α), 20 rounds, one seed, every method on
the same DD ConvNet (3 × [conv 3×3, instance norm, ReLU, avg-pool 2] + linear).

Scaled for 2 shared CPU cores in the experiment file, and only there:
ConvNet width 16 (paper 128); distillation 20 image updates per client and round (the cpu preset's
30, paper scale 20,000) with 16 real images per class per update; server T_g = 5 epochs (paper
scale 300); 2 global gradient-matching iterations; FedAvg and FD 50 local SGD iterations of batch
10 per round. IPC is the seed's 10 and the synthetic images are float32 whatever the width, so
the uplink is exactly the paper-scale one; the downlink is also reported for width 128.

Its last run (2026-12-05, one process at nice 19 beside other jobs): 30 min wall-clock, 19 min of
compute (FedAvg 4, FD 3, FedDM 3, FedDM from noise 3, FedDualMatch 6).

Accuracy is the global model's for FedAvg, FedDM and FedDualMatch and the reference device's
(device 0) for FD, which keeps no global model. The grid is the experiment file; this script only
turns its record into the study's ``distill_*`` CSVs, PNGs and markdown table in ``--out``.
``--flatten`` also writes the record's runs, rounds, ledger and provenance tables as
``distill_record_<table>.csv`` (committed, ``benchmarks.records``); ``--convert`` first turns
those back into the experiment's record under ``--work``, so that the committed tables and
figures are redrawn without running anything.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from benchmarks.records import add_record_arguments, axes_named, convert_tables, flatten_tables  # noqa: E402
from frd.classification.methods import GLOBAL  # noqa: E402
from frd.classification.models import build_model, count_parameters  # noqa: E402
from frd.payload import FLOAT_BITS  # noqa: E402

EXPERIMENT = Path("benchmarks/experiments/distill.toml")
LABELS = ("fl", "fd", "feddm", "feddm-noise", "feddualmatch")
"""The file's ``method`` axis (``feddm-noise``: FedDM with its synthetic sets started from N(0, 1)
noise, as the FedDualMatch authors reran their FedDM baseline)."""
DISTILLATION = ("feddm", "feddm-noise", "feddualmatch")
COLORS = dict(zip(LABELS, ("tab:blue", "tab:orange", "tab:green", "tab:olive", "tab:red")))
PAPER_WIDTH = 128
TABLES = ("runs", "rounds", "ledger", "provenance")
"""The record's tables the flat record keeps."""


def paper_weight_bits() -> int:
    """Bits of the weights of the paper's width-128 ConvNet on MNIST (what FedAvg would send there)."""
    return count_parameters(build_model("convnet", "mnist", (1, 28, 28), 10, PAPER_WIDTH)) * FLOAT_BITS


def record_tables(work: Path, flatten_to: Path | None) -> tuple[pd.DataFrame, ...]:
    """The experiment's runs, rounds and ledger tables, each row tagged with its cell's label
    (``method``) and α; with ``flatten_to``, its flat record is written there first."""
    flat = flatten_tables(EXPERIMENT, work, TABLES)
    if flatten_to is not None:
        for table, frame in flat.items():
            frame.to_csv(flatten_to / f"distill_record_{table}.csv", index=False)
    return tuple(axes_named(flat[table], ["method", "alpha"]) for table in TABLES[:3])


def accuracy_per_round(rounds: pd.DataFrame) -> pd.DataFrame:
    """The global model's accuracy where a method keeps one, else the reference device's."""
    has_global = rounds.groupby("method")["device"].transform(lambda d: (d == GLOBAL).any())
    chosen = rounds[((rounds["device"] == GLOBAL) | ~has_global) & (rounds["phase"] == "exchanged")]
    return chosen[["method", "alpha", "round", "accuracy", "compute_s"]].reset_index(drop=True)


def payload_per_round(ledger: pd.DataFrame) -> pd.DataFrame:
    """Mean bits per client per round, up and down (training rounds only)."""
    sent = ledger[ledger["round"] >= 1]
    table = sent.groupby(["method", "alpha", "round", "direction"])["bits"].mean().unstack("direction")
    return table.rename(columns={"up": "up_bits", "down": "down_bits"}).reset_index()


def summary(accuracy: pd.DataFrame, payload: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Per method and α: final, best and last-5-round accuracy, payload per client and round, time."""
    paper_down = paper_weight_bits()
    rows = []
    for (method, alpha), acc in accuracy.groupby(["method", "alpha"], sort=False):
        acc = acc.sort_values("round")
        bits = payload[(payload["method"] == method) & (payload["alpha"] == alpha)]
        run = runs[(runs["method"] == method) & (runs["alpha"] == alpha)].iloc[0]
        up, down = bits["up_bits"].mean(), bits["down_bits"].mean()
        rows.append(dict(method=method, alpha=alpha, final_acc=acc["accuracy"].iloc[-1], best_acc=acc["accuracy"].max(),
                         last5_acc=acc["accuracy"].tail(5).mean(), up_bits=up, down_bits=down,
                         down_over_up=down / up,
                         paper_width_down_over_up=paper_down / up if method in DISTILLATION else float("nan"),
                         compute_s=run["compute_s"]))
    return pd.DataFrame(rows)


def plot_accuracy(accuracy: pd.DataFrame, path: Path) -> None:
    alphas = sorted(accuracy["alpha"].unique(), reverse=True)
    fig, axes = plt.subplots(1, len(alphas), figsize=(4 * len(alphas), 3.5), sharey=True, squeeze=False)
    for ax, alpha in zip(axes[0], alphas):
        for method, group in accuracy[accuracy["alpha"] == alpha].groupby("method", sort=False):
            ax.plot(group["round"], group["accuracy"], marker=".", label=method, color=COLORS[method])
        ax.set(title=f"Dirichlet α = {alpha}", xlabel="round")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("test accuracy")
    axes[0][-1].legend()
    fig.suptitle("MNIST, 10 clients, ConvNet width 16 (CPU scale), 1 seed")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_final(table: pd.DataFrame, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for method, group in table.groupby("method", sort=False):
        ax.plot(group["alpha"], group["last5_acc"], marker="o", label=method, color=COLORS[method])
    ax.set(xscale="log", xlabel="Dirichlet α (smaller = more heterogeneous)", ylabel="accuracy, mean of last 5 rounds")
    ax.invert_xaxis()
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_payload(table: pd.DataFrame, path: Path) -> None:
    """Bits per client per round (constant over rounds), up and down, per α and method, with the
    weights of the paper's width-128 ConvNet for scale. The distillation uplink grows with the
    classes a client holds, so it shrinks as α does."""
    alphas = sorted(table["alpha"].unique(), reverse=True)
    methods = list(dict.fromkeys(table["method"]))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    step = 0.8 / len(methods)
    for ax, column in zip(axes, ("up_bits", "down_bits")):
        for i, method in enumerate(methods):
            bits = table[table["method"] == method].set_index("alpha").loc[alphas, column]
            ax.bar([a + i * step for a in range(len(alphas))], bits, step, label=method, color=COLORS[method])
        ax.axhline(paper_weight_bits(), color="k", ls="--", lw=1, label="ConvNet-128 weights")
        ax.set(yscale="log", title=column.replace("_", " ") + " per client per round", xlabel="Dirichlet α",
               xticks=[a + 0.4 - step / 2 for a in range(len(alphas))], xticklabels=[str(a) for a in alphas])
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel("bits")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def markdown(table: pd.DataFrame) -> str:
    acc = table.pivot(index="method", columns="alpha", values="last5_acc").loc[list(dict.fromkeys(table["method"]))]
    acc = acc[sorted(acc.columns, reverse=True)]
    lines = ["Test accuracy (global model; FD: device 0), mean of the last 5 rounds, and payload per client and round.", "",
             "| method | " + " | ".join(f"α = {a}" for a in acc.columns) + " | up kbit/client/round | down kbit/client/round |",
             "|---" * (len(acc.columns) + 3) + "|"]
    for method, row in acc.iterrows():
        bits = table[table["method"] == method]
        lines.append(f"| {method} | " + " | ".join(f"{100 * v:.1f} %" for v in row)
                     + f" | {bits['up_bits'].mean() / 1e3:.1f} | {bits['down_bits'].mean() / 1e3:.1f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("results/distill"), help="the experiment's folder")
    add_record_arguments(parser)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.convert:
        added = convert_tables({t: args.out / f"distill_record_{t}.csv" for t in TABLES}, EXPERIMENT, args.work)
        print(f"{added} runs converted into {args.work}")
    runs, rounds, ledger = record_tables(args.work, args.out if args.flatten else None)
    accuracy, payload = accuracy_per_round(rounds), payload_per_round(ledger)
    table = summary(accuracy, payload, runs)
    accuracy.to_csv(args.out / "distill_accuracy.csv", index=False)
    payload.to_csv(args.out / "distill_payload.csv", index=False)
    table.to_csv(args.out / "distill_summary.csv", index=False)
    (args.out / "distill_table.md").write_text(markdown(table))
    plot_accuracy(accuracy, args.out / "distill_accuracy.png")
    plot_final(table, args.out / "distill_final.png")
    plot_payload(table, args.out / "distill_payload.png")
    print(table.to_string(index=False))
    print(markdown(table))


if __name__ == "__main__":
    main()

"""FedDualMatch and FedDM against FedAvg and FD on MNIST under Dirichlet label skew [FedDualMatch, OpenReview; Xiong et al. 2023].

    nice -n 5 python -m benchmarks.distill_study [--alphas 0.5 0.1 0.05 0.01] [--rounds 20] [--methods ...]

Setting: the shared MNIST set (the official 10,000 test images; 8,000 pool / 2,000 held-out test,
split seed 0), 10 clients × 500 samples drawn by Dirichlet(α), 20 rounds, one seed, every method on
the same DD ConvNet (3 × [conv 3×3, instance norm, ReLU, avg-pool 2] + linear).

Scaled for 2 shared CPU cores (the whole grid in under an hour on one thread), and only here:
ConvNet width 16 (paper 128); distillation 20 image updates per client and round (the cpu preset's
30, paper scale 20,000) with 16 real images per class per update; server T_g = 5 epochs (paper
scale 300); 2 global gradient-matching iterations; FedAvg and FD 50 local SGD iterations of batch
10 per round. IPC is the seed's 10 and the synthetic images are float32 whatever the width, so
the uplink is exactly the paper-scale one; the downlink is also reported for width 128.

Measured on the shared 2-core machine (load average 5–8 from other jobs): 59 min wall-clock with the
grid split over two processes (``--alphas 0.5 0.01`` and ``--alphas 0.05 0.1``); the 16 runs' compute
times sum to 73 min (FedAvg 9, FD 8, FedDM 25, FedDualMatch 30), the α = 0.5 runs slowest (most classes
per client, and tests running beside them).

Accuracy is the global model's for FedAvg, FedDM and FedDualMatch and the reference device's
(device 0) for FD, which keeps no global model. Raw runs go to ``--work`` (resumable: rerun the
same command); ``distill_*`` CSVs, PNGs and a markdown table go to ``--out``.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from frd.classification.data import load_dataset  # noqa: E402
from frd.classification.experiment import run_experiment  # noqa: E402
from frd.classification.methods import GLOBAL, study_config  # noqa: E402
from frd.classification.models import build_model, count_parameters  # noqa: E402
from frd.payload import FLOAT_BITS  # noqa: E402

METHODS: dict[str, tuple[str, dict[str, Any]]] = {
    "fl": ("fl", {}), "fd": ("fd", {}), "feddm": ("feddm", {}), "feddm-noise": ("feddm", {"init": "noise"}),
    "feddualmatch": ("feddualmatch", {})}
"""Rows of the grid: label → (method, options). ``feddm-noise`` is FedDM with its synthetic sets
started from N(0, 1) noise, as the FedDualMatch authors reran their FedDM baseline."""
DISTILLATION = ("feddm", "feddm-noise", "feddualmatch")
COLORS = dict(zip(METHODS, ("tab:blue", "tab:orange", "tab:green", "tab:olive", "tab:red")))
ALPHAS = (0.5, 0.1, 0.05, 0.01)
PAPER_WIDTH = 128
SCALED: dict[str, Any] = dict(dataset="mnist", partition="dirichlet", devices=10, samples_per_device=500, model="convnet",
              width=16, iterations_per_round=50, distill_iterations=20, server_epochs=5)
"""The CPU scaling of this study (see the module docstring); ``--rounds`` and α come on top."""


def paper_weight_bits() -> int:
    """Bits of the weights of the paper's width-128 ConvNet on MNIST (what FedAvg would send there)."""
    return count_parameters(build_model("convnet", "mnist", (1, 28, 28), 10, PAPER_WIDTH)) * FLOAT_BITS


def run_grid(alphas: list[float], methods: list[str], rounds: int, work: Path) -> tuple[pd.DataFrame, ...]:
    """Every (method, α) run, resumed from ``work``; its runs, rounds and ledger tables tagged with α."""
    tables: dict[str, list[pd.DataFrame]] = {"runs": [], "rounds": [], "ledger": []}
    for alpha in alphas:
        for method in methods:
            name, options = METHODS[method]
            config = study_config(name, alpha=alpha, rounds=rounds, **SCALED, **options)
            store = run_experiment(config, work / f"{method}-alpha{alpha}", progress=False)
            for name, frame in tables.items():
                frame.append(store.read(name).assign(method=method, alpha=alpha))
            run = tables["runs"][-1].iloc[0]
            final = run["global_accuracy"] if pd.notna(run["global_accuracy"]) else run["accuracy"]
            print(f"{method:>12} α={alpha:<5} final acc {final:.3f}  compute {run['compute_s']:.0f} s", flush=True)
    return tuple(pd.concat(frames, ignore_index=True) for frames in tables.values())


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
    parser.add_argument("--alphas", type=float, nargs="+", default=list(ALPHAS))
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS))
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--work", type=Path, default=Path("results/distill_study"))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    load_dataset("mnist")  # fail early, with the files to fetch, before any run
    runs, rounds, ledger = run_grid(args.alphas, args.methods, args.rounds, args.work)
    accuracy, payload = accuracy_per_round(rounds), payload_per_round(ledger)
    table = summary(accuracy, payload, runs)
    args.out.mkdir(parents=True, exist_ok=True)
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

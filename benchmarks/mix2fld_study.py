"""The Mix2FLD letter's study [Oh et al. 2020, Fig. 2 and Tables II–III], reproduced on MNIST.

    frd run benchmarks/experiments/mix2fld.toml --out results/mix2fld     # part a (resumable)
    python -m benchmarks.mix2fld_study [--work results/mix2fld] [--out benchmarks/results] [--flatten | --convert]

a. 10 devices × 500 MNIST samples (the shared test set split 80/20 into pool and test), IID and
   the letter's non-IID split, asymmetric and symmetric wireless channels (classification/README.md) under both
   uplink-access readings (fdma, tdma). In the asymmetric FDMA cell: FL, FD, FLD, MixFLD
   (n_mix ∈ {10, 50}; n_inv does not enter MixFLD) and Mix2FLD with (n_mix, n_inv) ∈
   {(10, 10), (10, 20), (50, 50), (50, 100)}; in the other three cells FL and Mix2FLD (50, 100),
   whose large uploads (weights; 50 seed samples) are the ones the readings can lose. Reference
   device 0's accuracy after local training (the letter's reading) and after the download, vs
   time (measured compute + channel time), uplink payload and its ratio to FL's, failed uploads.
   The grid is the experiment file; ``frd run --cells`` runs part of it.
b. Sample privacy of Mixup (one device) and Mix2up (two devices) over γ (the γ = 0 row is a raw
   upload: distance 0, log = −inf).
c. The channel alone, over P_up ∈ {10, …, 40} dBm and both access readings: slots and failure
   rate of one FL upload (the model's weights), one FD / Mix2FLD upload (10 × 10 outputs) and
   one seed-sample upload (n_mix = 50), 2,000 draws each.

The file's scale is ``frd cls``'s: 16 rounds × 100 local iterations (K = 1,600, paper 6,400) and
K_s = 800 server iterations per round (paper 3,200); everything else is the paper's (η = 0.01,
β = 0.01, server step ε = 0.05, batch 10, γ = 0.2 [our choice]).

This script runs parts b and c and turns part a's record into the study's ``mix2fld_*`` CSVs and
PNGs in ``--out``. ``--flatten`` also writes the record's runs, rounds, ledger and provenance
tables as ``mix2fld_record_<table>.csv.gz`` (committed, compressed, ``benchmarks.records``); ``--convert`` first
turns those back into the experiment's record under ``--work``, so that the committed tables and
figures are redrawn without running anything.
"""
from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from benchmarks.records import add_record_arguments, axes_named, convert_tables, flatten_tables, write_flat_table  # noqa: E402
from frd.channel import ACCESS, make_wireless  # noqa: E402
from frd.classification.config import ClsConfig  # noqa: E402
from frd.classification.context import RunContext  # noqa: E402
from frd.classification.data import load_dataset  # noqa: E402
from frd.classification.methods import cls_config  # noqa: E402
from frd.classification.privacy import PRIVACY_GAMMAS, privacy_table  # noqa: E402
from frd.payload import FLOAT_BITS  # noqa: E402

EXPERIMENT = Path("benchmarks/experiments/mix2fld.toml")
TABLES = ("runs", "rounds", "ledger", "provenance")
"""The record's tables the flat record keeps."""
RECORD = "mix2fld_record_{}.csv.gz"
"""A flat record table's file in ``--out`` (compressed: the ledger alone is 2.3 MB as text)."""
KEYS = ["partition", "channel", "label"]
"""A cell of part a: the file's axes, the partition by its display name."""
PARTITIONS = {"iid": "IID", "mix2fld": "non-IID"}
CHANNELS = ("asym. FDMA", "sym. FDMA", "asym. TDMA", "sym. TDMA")
"""The file's channel cells: the letter's asymmetric (23 dBm up) and symmetric (40 dBm) links
under both uplink-access readings of the channel model (classification/README.md)."""
FULL_CELL = "asym. FDMA"
"""The channel cell that runs every method."""
P_UP_DBM = (10, 13, 15, 18, 20, 23, 30, 40)
CONVERGED = 0.95
"""Convergence time: the first time the reference accuracy reaches this share of its final value."""


def record_tables(work: Path, flatten_to: Path | None) -> tuple[pd.DataFrame, ...]:
    """Part a's runs, rounds and ledger tables, each row tagged with its cell (``KEYS``; the
    partition by its display name); with ``flatten_to``, its flat record is written there first."""
    flat = flatten_tables(EXPERIMENT, work, TABLES)
    if flatten_to is not None:
        for table, frame in flat.items():
            write_flat_table(frame, flatten_to / RECORD.format(table))
    return tuple(axes_named(flat[table], KEYS).assign(partition=lambda f: f["partition"].map(PARTITIONS))
                 for table in TABLES[:3])


def reference_curves(rounds: pd.DataFrame) -> pd.DataFrame:
    """The reference device's rounds (``ClsConfig.reference_device``; the record keeps each run's
    rounds in order) with the cumulative time axis: measured compute plus channel time."""
    r = rounds[rounds["device"] == ClsConfig.reference_device]
    r = r.assign(step=r["phase"].map({"local": 0, "exchanged": 1}))
    r["time_s"] = (r["compute_s"] + r["comm_s"]).groupby([r[k] for k in [*KEYS, "seed"]]).cumsum()
    return r.reset_index(drop=True)


def summary(runs: pd.DataFrame, rounds: pd.DataFrame, ledger_uplink: pd.DataFrame) -> pd.DataFrame:
    """One row per (partition, channel, method label): medians over seeds; ``local_accuracy`` (the
    reference device after local training, the letter's reading) with its range over the seeds."""
    def converged(group: pd.DataFrame) -> float:
        final = group["accuracy"].iloc[-1]
        return float(group.loc[group["accuracy"] >= CONVERGED * final, "time_s"].iloc[0])

    conv = rounds.groupby([*KEYS, "seed"]).apply(converged, include_groups=False)
    runs = runs.merge(conv.rename("convergence_s").reset_index(), on=[*KEYS, "seed"])
    runs = runs.merge(ledger_uplink, on=[*KEYS, "run_id"])
    runs["total_s"] = runs["compute_s"] + runs["comm_s"]
    table = runs.groupby(KEYS, sort=False).agg(
        seeds=("seed", "size"), local_accuracy=("local_accuracy", "median"),
        local_min=("local_accuracy", "min"), local_max=("local_accuracy", "max"),
        accuracy=("accuracy", "median"), convergence_s=("convergence_s", "median"),
        total_s=("total_s", "median"), comm_s=("comm_s", "median"), bits_up=("bits_up", "median"),
        bits_up_per_round=("bits_up_per_round", "median"), seed_bits=("seed_bits", "median"),
        bits_down=("bits_down", "median"), failed_up=("failed_up", "median")).reset_index()
    fl = table[table["label"] == "FL"].set_index(["partition", "channel"])
    index = pd.MultiIndex.from_frame(table[["partition", "channel"]])
    table["uplink_ratio_vs_fl"] = fl["bits_up"].reindex(index).to_numpy() / table["bits_up"]
    table["uplink_ratio_per_round_vs_fl"] = fl["bits_up_per_round"].reindex(index).to_numpy() / table["bits_up_per_round"]
    return table


def uplink_of(ledger: pd.DataFrame) -> pd.DataFrame:
    """Per run, from its ledger: uplink bits per device and training round, the one-off seed-sample
    bits (round 0) and the number of failed uploads."""
    up = ledger[ledger["direction"] == "up"]
    training = up["round"] >= 1
    up = up.assign(training_bits=up["bits"].where(training), seed_bits=up["bits"].where(~training, 0),
                   failed_up=~up["delivered"].astype(bool))
    return up.groupby([*KEYS, "run_id"], sort=False).agg(
        bits_up_per_round=("training_bits", "mean"), seed_bits=("seed_bits", "sum"),
        failed_up=("failed_up", "sum")).reset_index()


def plot_accuracy(rounds: pd.DataFrame, path: Path) -> None:
    """Reference-device accuracy vs time, one panel per (partition, channel), like the letter's Fig. 2."""
    fig, axes = plt.subplots(len(PARTITIONS), len(CHANNELS), figsize=(6 * len(CHANNELS), 8), sharey=True)
    colors = {label: f"C{i}" for i, label in enumerate(rounds["label"].unique())}
    for (partition, channel), cell in rounds.groupby(["partition", "channel"], sort=False):
        ax = axes[list(PARTITIONS.values()).index(partition), list(CHANNELS).index(channel)]
        for label, run in cell.groupby("label", sort=False):
            curve = run.groupby(["round", "step"])[["time_s", "accuracy"]].median()  # the sawtooth
            style = "-" if label in ("FL", "FD") else ("--" if label.startswith("MixFLD") else ":")
            ax.plot(curve["time_s"], curve["accuracy"], style, color=colors[label], marker=".", label=label)
        ax.set(title=f"{partition}, {channel} channel", xlabel="time: compute + channel (s)",
               ylabel="test accuracy, reference device")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_payload(table: pd.DataFrame, path: Path) -> None:
    """Total uplink bits vs final accuracy of every method (the asymmetric FDMA cell)."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, (partition, cell) in zip(axes, table[table["channel"] == FULL_CELL].groupby("partition", sort=False)):
        for _, row in cell.iterrows():
            ax.scatter(row["bits_up"], row["accuracy"])
            ax.annotate(row["label"], (row["bits_up"], row["accuracy"]), fontsize=7, xytext=(3, 3),
                        textcoords="offset points")
        ax.set(xscale="log", xlabel="total uplink bits of the run (incl. seed samples)",
               ylabel="final accuracy, reference device", title=f"{partition}, {FULL_CELL} channel")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def privacy(data_dir: str | None, out: Path, seed: int) -> pd.DataFrame:
    """Part b on the first two devices of an IID split of the MNIST pool (50 mixes each)."""
    data = load_dataset("mnist", data_dir)
    ctx = RunContext.build(cls_config(dataset="mnist", samples_per_device=500), seed, data)
    devices = [(x.numpy(), y.numpy()) for x, y in (ctx.device_data(d) for d in range(2))]
    table = privacy_table(devices, n_classes=data.classes, gammas=PRIVACY_GAMMAS, n_mix=50, seed=seed)
    raw = pd.DataFrame([dict(gamma=0.0, scheme="Mixup", mean=-np.inf, std=0.0, n=50)])
    table = pd.concat([raw, table], ignore_index=True)
    table.to_csv(out / "mix2fld_privacy.csv", index=False)
    return table


def channel_sweep(parameters: int, out: Path, draws: int = 2000) -> pd.DataFrame:
    """Part c: one upload among 10 devices sharing the band, per uplink power and access reading."""
    rows = []
    payloads = (("FL weights", parameters * FLOAT_BITS), ("outputs (FD, FLD)", 10 * 10 * FLOAT_BITS),
                ("seed-sample pixels (n_mix 50)", 50 * 28 * 28 * 8))
    for access, p_up in itertools.product(ACCESS, P_UP_DBM):
        channel = make_wireless(seed=p_up, p_up_dbm=float(p_up), access=access)
        for what, bits in payloads:
            t = [channel.uplink({d: bits for d in range(10)}) for _ in range(draws // 10)]
            latency = np.array([x.latency_s for r in t for x in r.values()])
            ok = np.array([x.delivered for r in t for x in r.values()])
            rows.append(dict(access=access, p_up_dbm=p_up, payload=what, bits=bits, failure_rate=1 - ok.mean(),
                             mean_slots_delivered=latency[ok].mean() / channel.slot_s if ok.any() else np.nan))
    table = pd.DataFrame(rows)
    table.to_csv(out / "mix2fld_channel_sweep.csv", index=False)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("results/mix2fld"), help="the experiment's folder")
    parser.add_argument("--data-dir", help="MNIST IDX files for part b (default: as frd cls --data-dir)")
    add_record_arguments(parser)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.convert:
        added = convert_tables({t: args.out / RECORD.format(t) for t in TABLES}, EXPERIMENT, args.work)
        print(f"{added} runs converted into {args.work}")
    runs, rounds, ledger = record_tables(args.work, args.out if args.flatten else None)
    curves = reference_curves(rounds)
    table = summary(runs, curves, uplink_of(ledger))
    table.to_csv(args.out / "mix2fld_summary.csv", index=False)
    curves[[*KEYS, "seed", "round", "time_s", "comm_s", "accuracy"]].to_csv(args.out / "mix2fld_curves.csv", index=False)
    plot_accuracy(curves, args.out / "mix2fld_accuracy.png")
    plot_payload(table, args.out / "mix2fld_payload.png")
    print(table.to_string(index=False))
    print(privacy(args.data_dir, args.out, 0).to_string(index=False))
    print(channel_sweep(int(runs["parameters"].iloc[0]), args.out).to_string(index=False))


if __name__ == "__main__":
    main()

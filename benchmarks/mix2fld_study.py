"""The Mix2FLD letter's study [Oh et al. 2020, Fig. 2 and Tables II–III], reproduced on MNIST.

    python -m benchmarks.mix2fld_study [--backend ray|local] [--groups 2] [--seeds 1] [--scale cpu|paper]

a. 10 devices × 500 MNIST samples (the shared test set split 80/20 into pool and test), IID and
   the letter's non-IID split, asymmetric and symmetric wireless channels (classification/README.md) under both
   uplink-access readings (fdma, tdma). In the asymmetric FDMA cell: FL, FD, FLD, MixFLD
   (n_mix ∈ {10, 50}; n_inv does not enter MixFLD) and Mix2FLD with (n_mix, n_inv) ∈
   {(10, 10), (10, 20), (50, 50), (50, 100)}; in the other three cells FL and Mix2FLD (50, 100),
   whose large uploads (weights; 50 seed samples) are the ones the readings can lose. Reference
   device 0's accuracy after local training (the letter's reading) and after the download, vs
   time (measured compute + channel time), uplink payload and its ratio to FL's, failed uploads.
   ``--cells`` / ``--labels`` run part of the grid (the summary covers what has finished).
b. Sample privacy of Mixup (one device) and Mix2up (two devices) over γ (the γ = 0 row is a raw
   upload: distance 0, log = −inf).
c. The channel alone, over P_up ∈ {10, …, 40} dBm and both access readings: slots and failure
   rate of one FL upload (the model's weights), one FD / Mix2FLD upload (10 × 10 outputs) and
   one seed-sample upload (n_mix = 50), 2,000 draws each.

Scale ``cpu`` (default) is ``frd cls``'s: 16 rounds × 100 local iterations (K = 1,600, paper
6,400) and K_s = 800 server iterations per round (paper 3,200); everything else is the paper's
(η = 0.01, β = 0.01, server step ε = 0.05, batch 10, γ = 0.2 [our choice]). ``paper`` uses 16 × 400
and 3,200 (hours on a CPU).

Raw runs go to ``--work`` (resumable); CSV summaries and PNGs to ``--out`` (prefix ``mix2fld_``).
"""
from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

from frd.backends import Backend, add_backend_arguments, backend_from_args  # noqa: E402
from frd.channel import ACCESS, make_wireless  # noqa: E402
from frd.classification.config import ClsConfig  # noqa: E402
from frd.classification.context import RunContext  # noqa: E402
from frd.classification.data import load_dataset  # noqa: E402
from frd.classification.methods import cls_config, study_config  # noqa: E402
from frd.classification.privacy import PRIVACY_GAMMAS, privacy_table  # noqa: E402
from frd.classification.runs import RUNS  # noqa: E402
from frd.errors import FrdError  # noqa: E402
from frd.payload import FLOAT_BITS  # noqa: E402
from frd.results import ResultStore, run_id  # noqa: E402

PARTITIONS = {"iid": "IID", "mix2fld": "non-IID"}
CHANNELS = {"asym. FDMA": ("wireless-asymmetric", {}), "sym. FDMA": ("wireless-symmetric", {}),
            "asym. TDMA": ("wireless-asymmetric", {"access": "tdma"}),
            "sym. TDMA": ("wireless-symmetric", {"access": "tdma"})}
"""Channel cells by label: (channel name, options), the letter's asymmetric (23 dBm up) and
symmetric (40 dBm) links under both uplink-access readings of the channel model (classification/README.md).
The first cell runs every
method; the others the methods whose uploads the reading can change (CHANNEL_LABELS)."""
FULL_CELL = "asym. FDMA"
CHANNEL_LABELS = ("FL", "Mix2FLD (50,100)")
SEED_CONFIGS = ((10, 10), (10, 20), (50, 50), (50, 100))
SCALES = {"cpu": dict(rounds=16, iterations_per_round=100, server_iterations=800),
          "paper": dict(iterations_per_round=400, server_iterations=3200)}
"""``cpu`` is ``frd cls``'s default scale (16 × 100 local iterations, K_s = 800); ``paper`` the letter's."""
P_UP_DBM = (10, 13, 15, 18, 20, 23, 30, 40)
CONVERGED = 0.95
"""Convergence time: the first time the reference accuracy reaches this share of its final value."""


def grid(base: dict[str, Any]) -> list[tuple[str, str, ClsConfig]]:
    """(label, channel cell, config) of every run of part a."""
    runs = []
    for tag, (channel, options) in CHANNELS.items():
        for partition in PARTITIONS:
            cell = dict(base, partition=partition, channel=channel, channel_options=dict(options))
            cell_runs = [(name.upper(), study_config(name, True, **cell)) for name in ("fl", "fd", "fld")]
            cell_runs += [(f"MixFLD ({m})", study_config("mixfld", True, **cell, n_mix=m))
                          for m in sorted({m for m, _ in SEED_CONFIGS})]
            cell_runs += [(f"Mix2FLD ({m},{i})", study_config("mix2fld", True, **cell, n_mix=m, n_inv=i))
                          for m, i in SEED_CONFIGS]
            runs += [(label, tag, c) for label, c in cell_runs if tag == FULL_CELL or label in CHANNEL_LABELS]
    return runs


Job = tuple[str, str, ClsConfig, Path]
"""(method label, channel cell, config, raw-run folder)."""


def folder(work: Path, cell: str, config: ClsConfig) -> Path:
    seeds = f"{getattr(config.options, 'n_mix', None)}-{getattr(config.options, 'n_inv', None)}"
    scale = f"{config.rounds}x{config.iterations_per_round}"
    return work / f"{config.method}-{config.partition}-{cell.replace(' ', '').replace('.', '')}-{seeds}-{scale}"


def run_grid(jobs: list[Job], backend: Backend) -> list[float]:
    """Every unfinished seed of every job on ``backend`` (one dataset, loaded once), each run saved
    in its job's folder as it finishes; returns each job's measured compute seconds."""
    stores = [ResultStore(out, backend.record(config), config.resume_key()) for _, _, config, out in jobs]
    work = [(j, config, seed) for j, ((_, _, config, _), store) in enumerate(zip(jobs, stores))
            for seed in range(config.seeds) if run_id(config.method, seed) not in store.finished()]
    seconds = [0.0] * len(jobs)
    if not work:
        return seconds
    sources = {(c.dataset, c.data_dir, c.download, c.test_fraction, c.split_seed) for _, c, _ in work}
    assert len(sources) == 1, "the grid shares one dataset"
    dataset, data_dir, download, test_fraction, split_seed = sources.pop()
    data = load_dataset(dataset, data_dir, download=download, test_fraction=test_fraction, split_seed=split_seed)
    torch.set_num_threads(work[0][1].threads)  # local backend; Ray tasks set their own
    try:
        for i, tables in backend.execute(RUNS, data, [(config, seed) for _, config, seed in work]):
            j = work[i][0]
            stores[j].save_run(tables)
            seconds[j] += float(tables["runs"]["compute_s"].sum())
            label, cell, config, _ = jobs[j]
            print(f"{label:>18} {config.partition:>8} {cell:>13} seed {work[i][2]}: "
                  f"{tables['runs']['compute_s'].sum():6.1f} s", flush=True)
    finally:
        for store in stores:
            store.consolidate()  # also after Ctrl-C: rerun to resume
    return seconds


def collect(jobs: list[Job]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Runs and rounds of every job, labelled; rounds gain the cumulative time axis."""
    runs, rounds = [], []
    for label, cell, config, out in jobs:
        tag = dict(label=label, partition=PARTITIONS[config.partition], channel=cell,
                   n_mix=getattr(config.options, "n_mix", None), n_inv=getattr(config.options, "n_inv", None))
        runs.append(pd.read_csv(out / "runs.csv").assign(**tag))
        r = pd.read_csv(out / "rounds.csv")
        r = r[r["device"] == config.reference_device]
        r = r.assign(step=r["phase"].map({"local": 0, "exchanged": 1})).sort_values(["seed", "round", "step"])
        r["time_s"] = (r["compute_s"] + r["comm_s"]).groupby(r["seed"]).cumsum()
        rounds.append(r.assign(**tag))
    return pd.concat(runs, ignore_index=True), pd.concat(rounds, ignore_index=True)


def summary(runs: pd.DataFrame, rounds: pd.DataFrame, ledger_uplink: pd.DataFrame) -> pd.DataFrame:
    """One row per (partition, channel, method label): medians over seeds; ``local_accuracy`` (the
    reference device after local training, the letter's reading) with its range over the seeds."""
    def converged(group: pd.DataFrame) -> float:
        final = group["accuracy"].iloc[-1]
        return float(group.loc[group["accuracy"] >= CONVERGED * final, "time_s"].iloc[0])

    conv = rounds.groupby(["partition", "channel", "label", "seed"]).apply(converged, include_groups=False)
    runs = runs.merge(conv.rename("convergence_s").reset_index(), on=["partition", "channel", "label", "seed"])
    runs = runs.merge(ledger_uplink, on=["partition", "channel", "label", "seed"])
    runs["total_s"] = runs["compute_s"] + runs["comm_s"]
    keys = ["partition", "channel", "label"]
    table = runs.groupby(keys, sort=False).agg(
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


def uplink_of(jobs: list[Job]) -> pd.DataFrame:
    """Per run, from its ledger: uplink bits per device and training round, the one-off seed-sample
    bits (round 0) and the number of failed uploads."""
    rows = []
    for label, cell, config, out in jobs:
        ledger = pd.read_csv(out / "ledger.csv")
        up = ledger[ledger["direction"] == "up"]
        for rid, part in up.groupby("run_id"):
            seed = int(str(rid).rsplit("seed", 1)[1])
            rows.append(dict(partition=PARTITIONS[config.partition], channel=cell, label=label,
                             seed=seed, bits_up_per_round=part.loc[part["round"] >= 1, "bits"].mean(),
                             seed_bits=part.loc[part["round"] == 0, "bits"].sum(),
                             failed_up=int((~part["delivered"].astype(bool)).sum())))
    return pd.DataFrame(rows)


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
    """Uplink bits per device and round vs final accuracy (asymmetric channel)."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, (partition, cell) in zip(axes, table[table["channel"] == "asymmetric"].groupby("partition", sort=False)):
        for _, row in cell.iterrows():
            ax.scatter(row["bits_up"], row["accuracy"])
            ax.annotate(row["label"], (row["bits_up"], row["accuracy"]), fontsize=7, xytext=(3, 3),
                        textcoords="offset points")
        ax.set(xscale="log", xlabel="total uplink bits of the run (incl. seed samples)",
               ylabel="final accuracy, reference device", title=f"{partition}, asymmetric channel")
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
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--scale", choices=list(SCALES), default="cpu")
    add_backend_arguments(parser, default="ray")  # ray: runs in parallel over the cores, one torch thread each
    parser.add_argument("--workers", dest="groups", type=int, help=argparse.SUPPRESS)  # the old name of --groups
    parser.add_argument("--data-dir", help="MNIST IDX files (default: as frd cls --data-dir)")
    parser.add_argument("--work", default="results/mix2fld_study", help="raw runs (resumable)")
    parser.add_argument("--out", default="benchmarks/results", help="CSV summaries and PNGs")
    parser.add_argument("--cells", nargs="+", choices=list(CHANNELS), help="run only these channel cells")
    parser.add_argument("--labels", nargs="+", help="run only these methods, e.g. FL 'Mix2FLD (50,100)'")
    parser.add_argument("--finished-only", action="store_true",
                        help="run nothing; summarise the runs already finished in --work")
    args = parser.parse_args()
    out, work = Path(args.out), Path(args.work)
    out.mkdir(parents=True, exist_ok=True)

    base = dict(seeds=args.seeds, data_dir=args.data_dir, **SCALES[args.scale])
    jobs = [(label, cell, config, folder(work, cell, config)) for label, cell, config in grid(base)
            if (args.cells is None or cell in args.cells) and (args.labels is None or label in args.labels)]
    if args.finished_only:
        jobs = [job for job in jobs if (job[3] / "runs.csv").exists()]
        if not jobs:
            parser.error(f"no finished runs in {work}")
    else:
        started = time.perf_counter()
        try:
            backend = backend_from_args(args)
        except FrdError as exc:
            parser.error(str(exc))
        timings = pd.DataFrame([dict(label=label, partition=c.partition, channel=cell, seconds=s)  # compute s
                                for (label, cell, c, _), s in zip(jobs, run_grid(jobs, backend))])
        timings.to_csv(out / "mix2fld_timings.csv", index=False)
        print(f"grid: {time.perf_counter() - started:.0f} s wall-clock on backend {backend.name}")

    runs, rounds = collect(jobs)
    table = summary(runs, rounds, uplink_of(jobs))
    table.to_csv(out / "mix2fld_summary.csv", index=False)
    rounds[["partition", "channel", "label", "seed", "round", "time_s", "comm_s", "accuracy"]].to_csv(
        out / "mix2fld_curves.csv", index=False)
    plot_accuracy(rounds, out / "mix2fld_accuracy.png")
    plot_payload(table, out / "mix2fld_payload.png")
    print(table.to_string(index=False))
    print(privacy(args.data_dir, out, 0).to_string(index=False))
    parameters = int(runs["parameters"].iloc[0])
    print(channel_sweep(parameters, out).to_string(index=False))


if __name__ == "__main__":
    main()

"""Dataset distillation speed: the original FedDM / FedDualMatch code against the current one, side by side.

    python -m benchmarks.distill_speed [--methods feddualmatch feddm] [--partitions iid dirichlet]
                                       [--seeds 0 1 2] [--dataset digits] [--alpha 0.1] [--base afeb57a]
                                       [--native-conv]
    python -m benchmarks.distill_speed --summary benchmarks/results/distill_speed.csv [--variants NAME ...]

The reference is the client and server code (``classification/distillation/client.py`` and
``classification/distillation/server.py``) as of git revision ``--base``, read with ``git show`` and
loaded as separate modules in this same process; everything else (data, partitions, round loop,
methods, model) is the current tree's, shared by both. Each run is the default ``frd cls --method
M --dataset D`` run (``--partition dirichlet --alpha A`` for the Dirichlet rows), once with the
method's ``distill_clients`` and ``server_update`` swapped for the reference ones ("old"; its
``distill`` client after client) and once with the current ones ("new"), one after the other in
this process with one torch thread, after one untimed round of each. Time is CPU time of this
process (``time.process_time``), which other jobs on a shared machine disturb less than
wall-clock time; accuracy is the global model's after the last round. ``--native-conv`` runs both
with PyTorch's own convolutions instead of oneDNN's: the same math summed in other orders, to see
how far float rounding alone moves a run's accuracy. ``--out`` appends the table to a tidy CSV
(``benchmarks/results/distill_speed.csv`` holds every measurement so far) tagged with the commit,
``--variant`` and a repeat number. ``--summary`` runs nothing: it pools the rows of ``--variants`` (all
when omitted) of earlier tables and prints, per method and partition, the seeds, total seconds, the speed-up (in
all and per run), mean accuracies and the paired accuracy change with its 95 % interval.
"""
from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Callable, Sequence

import pandas as pd
import torch

import frd.classification.methods.feddualmatch as dd
from benchmarks.tidy import record, select
from frd.classification.config import ClsConfig
from frd.classification.data import load_dataset
from frd.classification.distillation.client import ClientData, DistillConfig, SyntheticSet
from frd.classification.methods import cls_config
from frd.classification.runner import run_seed
from frd.stats import paired_mean_ci

REPO = Path(__file__).resolve().parent.parent
BASE = "afeb57a"
"""The last commit before the speed-up (issue 13 §3)."""
WARM_UP_SEED = 10_000


def reference_modules(base: str) -> tuple[ModuleType, ModuleType]:
    """The client and server modules as of ``base``, loaded under private names.

    The old server's imports of the client module are pointed at the old client, so the pair is
    the old code as it was. The sources are written to a temporary folder first, where numba can
    keep the cache of any compiled function they define.
    """
    modules = []
    folder = Path(tempfile.mkdtemp(prefix=f"frd_reference_{base}_"))
    for name in ("distill_client", "distill_server"):
        source = subprocess.run(["git", "show", f"{base}:classification/{name}.py"], cwd=REPO, check=True,
                                capture_output=True, text=True).stdout
        source = source.replace("from frd.classification.distill_client import", "from _reference_distill_client import")
        module_name = f"_reference_{name}"
        spec = importlib.util.spec_from_loader(module_name, loader=None)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        module.__file__ = str(folder / f"{name}.py")
        Path(module.__file__).write_text(source)
        sys.modules[module_name] = module  # dataclasses look their module up while being built
        exec(compile(source, module.__file__, "exec"), module.__dict__)
        modules.append(module)
    return modules[0], modules[1]


def timed_run(config: ClsConfig, seed: int, data, distill_clients, server_update) -> tuple[float, float, float]:
    """CPU seconds, wall seconds and final global accuracy of one run with the given implementation."""
    saved = dd.distill_clients, dd.server_update
    dd.distill_clients, dd.server_update = distill_clients, server_update
    try:
        cpu, wall = time.process_time(), time.perf_counter()
        runs = run_seed(config, seed, data)["runs"]
        return time.process_time() - cpu, time.perf_counter() - wall, float(runs["global_accuracy"].iloc[0])
    finally:
        dd.distill_clients, dd.server_update = saved


def one_by_one(distill) -> Callable[[Sequence[ClientData], DistillConfig], list[SyntheticSet]]:
    """``distill_clients`` from a one-client ``distill`` (the reference code's): client after client."""
    return lambda clients, config: [distill(c.model, c.images, c.labels, config, c.radius, c.generator)
                                    for c in clients]


def warm_up(method: str, dataset: str, data, old_client: ModuleType, old_server: ModuleType) -> None:
    """One untimed round of each implementation, so that neither timed run pays the process's
    first calls (oneDNN creating its kernels, numba loading its cache): before this, the first
    reference run took 2–4 s more than the same run later in the process."""
    config = cls_config(method, dataset=dataset, rounds=1)
    timed_run(config, WARM_UP_SEED, data, one_by_one(old_client.distill), old_server.server_update)
    timed_run(config, WARM_UP_SEED, data, dd.distill_clients, dd.server_update)


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=["feddualmatch", "feddm"])
    parser.add_argument("--partitions", nargs="+", default=["iid", "dirichlet"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--alpha", type=float, default=0.1, help="Dirichlet α of the dirichlet rows")
    parser.add_argument("--rounds", type=int, default=None, help="default: the run's default (16)")
    parser.add_argument("--samples-per-device", type=int, default=None)
    parser.add_argument("--base", default=BASE, help="git revision of the reference code")
    parser.add_argument("--out", type=Path, default=None, help="also append the table to this tidy CSV")
    parser.add_argument("--variant", default="adhoc", help="the variant name the --out rows are tagged with")
    parser.add_argument("--variants", nargs="+", default=None, metavar="NAME", help="--summary: only these variants")
    parser.add_argument("--native-conv", action="store_true",
                        help="PyTorch's own convolutions instead of oneDNN's (float-rounding sensitivity)")
    parser.add_argument("--summary", nargs="+", type=Path, default=None, metavar="CSV",
                        help="run nothing: summarise these --out tables (pooled)")
    args = parser.parse_args(argv)
    if args.summary is not None:
        table = pd.concat([select(path, args.variants) for path in args.summary], ignore_index=True)
        print(summary(table).to_string(index=False))
        return table

    torch.set_num_threads(1)
    old_client, old_server = reference_modules(args.base)
    data = load_dataset(args.dataset)
    rows = []
    with torch.backends.mkldnn.flags(enabled=not args.native_conv):
        warm_up(args.methods[0], args.dataset, data, old_client, old_server)
        for method in args.methods:
            for partition in args.partitions:
                extra = {"alpha": args.alpha} if partition == "dirichlet" else {}
                if args.rounds is not None:
                    extra["rounds"] = args.rounds
                if args.samples_per_device is not None:
                    extra["samples_per_device"] = args.samples_per_device
                config = cls_config(method, dataset=args.dataset, partition=partition, **extra)
                for seed in args.seeds:
                    old = timed_run(config, seed, data, one_by_one(old_client.distill), old_server.server_update)
                    new = timed_run(config, seed, data, dd.distill_clients, dd.server_update)
                    label = partition if partition == "iid" else f"dirichlet α={args.alpha:g}"
                    rows.append(dict(method=method, partition=label, seed=seed, old_s=old[0], new_s=new[0],
                                     speedup=old[0] / new[0], old_wall_s=old[1], new_wall_s=new[1],
                                     old_acc=100 * old[2], new_acc=100 * new[2]))
                    print(_markdown(pd.DataFrame(rows[-1:])).splitlines()[-1], flush=True)
    table = pd.DataFrame(rows)
    print(f"\n{args.dataset}, CPU seconds of this process, 1 torch thread, reference = {args.base}\n")
    print(_markdown(table))
    total_old, total_new = table["old_s"].sum(), table["new_s"].sum()
    print(f"\ntotal: old {total_old:.1f} s, new {total_new:.1f} s, speed-up {total_old / total_new:.2f}×; "
          f"largest accuracy change {(table['new_acc'] - table['old_acc']).abs().max():.1f} points")
    if args.out is not None:
        record(table, args.out, args.variant)
    return table


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per method and partition: seeds, total old and new seconds, the speed-up in all and its
    range per run, mean accuracies, and new − old accuracy (paired by seed) with its 95 % interval."""
    rows = []
    for (method, partition), cell in table.groupby(["method", "partition"], sort=False):
        change, low, high = paired_mean_ci(cell["old_acc"], cell["new_acc"])
        rows.append(dict(method=method, partition=partition, runs=len(cell), seeds=_seed_list(cell["seed"]),
                         old_s=round(cell["old_s"].sum(), 1), new_s=round(cell["new_s"].sum(), 1),
                         speedup=f"{cell['old_s'].sum() / cell['new_s'].sum():.2f}x "
                                 f"({cell['speedup'].min():.2f}-{cell['speedup'].max():.2f})",
                         old_acc=round(cell["old_acc"].mean(), 1), new_acc=round(cell["new_acc"].mean(), 1),
                         acc_change=f"{change:+.2f} [{low:+.2f}, {high:+.2f}]"))
    return pd.DataFrame(rows)


def _seed_list(seeds: pd.Series) -> str:
    values = sorted(int(s) for s in seeds)
    contiguous = values == list(range(values[0], values[-1] + 1))
    return f"{values[0]}-{values[-1]}" if contiguous and len(values) > 2 else " ".join(map(str, values))


def _markdown(table: pd.DataFrame) -> str:
    header = "| method | partition | seed | old s | new s | speed-up | old acc % | new acc % |"
    lines = [header, "|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        lines.append(f"| {r.method} | {r.partition} | {r.seed} | {r.old_s:.1f} | {r.new_s:.1f} | "
                     f"{r.speedup:.2f}× | {r.old_acc:.1f} | {r.new_acc:.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()

"""Why FedDualMatch's global accuracy falls after round 4 on IID digits (issue 44 §5).

    nice -n 5 python -m benchmarks.feddualmatch_decline [--variants default tg5 ...] [--seeds 0 1 2]

Each variant is the default ``frd cls --method feddualmatch --dataset digits`` run (IID, 10 clients,
16 rounds, cpu preset: width 32, 30 image updates, T_g = 50 server epochs) with one setting changed,
on seeds 0, 1, 2, one thread. Per round it records the global model's test accuracy and what the
server saw and did: the uploaded images' largest |pixel| and RMS, the radius R_t it sends back,
the global model's accuracy on the synthetic union it was fine-tuned on, and its weights' norm.
Raw rows per (variant, seed) go to ``--work`` (a finished pair is not rerun); the joined rows to
``benchmarks/results/feddualmatch_decline.csv`` and the figure beside it.
"""
from __future__ import annotations

import argparse
import copy
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, cast

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

from frd.classification.data import load_dataset  # noqa: E402
from frd.classification.distillation.client import SyntheticSet  # noqa: E402
from frd.classification.distillation.server import ServerConfig, finetune, gradient_match, union  # noqa: E402
from frd.classification.methods import GLOBAL, study_config  # noqa: E402
from frd.classification.methods.feddualmatch import DatasetDistillation  # noqa: E402
from frd.classification.runner import run_seed  # noqa: E402
from frd.classification.training import evaluate  # noqa: E402
from frd.payload import Payload  # noqa: E402

RESULTS = Path(__file__).parent / "results"


@dataclass(frozen=True)
class Variant:
    """One setting changed from the default: method options, server or client config fields, and
    whether the server trains on every set received so far instead of this round's only."""

    label: str
    options: Mapping[str, Any] = field(default_factory=dict)
    server: Mapping[str, Any] = field(default_factory=dict)
    client: Mapping[str, Any] = field(default_factory=dict)
    accumulate: bool = False


VARIANTS = {v.label: v for v in (
    Variant("default"),
    Variant("tg5", options={"server_epochs": 5}),
    Variant("tg20", options={"server_epochs": 20}),
    Variant("server_lr_0.001", server={"finetune_lr": 0.001}),
    Variant("fixed_radius_5", server={"radius": 5.0}),
    Variant("radius_steps_50", server={"radius_steps": 50}),
    Variant("image_lr_0.1", client={"image_lr": 0.1}),
    Variant("accumulate", accumulate=True),
)}


PROBE_ROUNDS = (1, 2, 4, 8, 12, 16)
"""Rounds at which a fresh model also trains on the server's set (``probe``)."""


def probe(method: DatasetDistillation, sets: Sequence[SyntheticSet], fresh: torch.nn.Module) -> float:
    """Quality of a round's synthetic sets alone: the run's initial model, trained as the default
    server trains (gradient matching, then T_g = 50 epochs on ∪{S'_k, S_k}, whatever the variant)
    from scratch instead of from the global model, then tested. A generator of its own, so the
    run's draws are untouched."""
    config, generator = ServerConfig.preset("feddualmatch"), torch.Generator().manual_seed(0)
    model = copy.deepcopy(fresh)
    training = list(sets) + gradient_match(model, sets, config.match_iterations, config.match_lr, generator,
                                           config.match_momentum, config.match_model_steps, config.finetune_lr,
                                           config.finetune_batch)
    images, labels = union(training)
    finetune(model, images, labels, config.finetune_epochs, config.finetune_batch, config.finetune_lr, generator,
             config.finetune_momentum, config.finetune_weight_decay)
    model.eval()
    return evaluate(model, method.ctx.data.x_test, method.ctx.data.y_test)[0]


def instrument(variant: Variant, log: list[dict], probe_rounds: Sequence[int]) -> Callable[[Any], Any]:
    """A ``run_seed`` wrap: applies the variant's configs and logs each round's server step."""

    def wrap(method: Any) -> Any:
        assert isinstance(method, DatasetDistillation)
        fresh = copy.deepcopy(method.server)
        method.server_config = replace(method.server_config, **variant.server)
        method.client = replace(method.client, **variant.client)
        if method.server_config.radius is not None:
            method.radius = [method.server_config.radius] * len(method.radius)
        aggregate, kept = method.aggregate, cast(list[Payload], [])

        def logged(uploads: Mapping[int, Payload], participants: Sequence[int]) -> dict[int, Payload]:
            sets = [SyntheticSet.from_payload(u) for u in uploads.values()]
            if variant.accumulate:
                kept.extend(uploads.values())
                uploads = dict(enumerate(kept))
            out = aggregate(uploads, participants)
            images, labels = union(sets)
            with torch.no_grad():
                method.server.eval()
                train_acc = float((method.server(images).argmax(1) == labels).float().mean())
                norm = float(torch.cat([p.detach().reshape(-1) for p in method.server.parameters()]).double().norm())
            fresh_acc = probe(method, sets, fresh) if len(log) + 1 in probe_rounds else float("nan")
            log.append({"fresh_model_accuracy": fresh_acc, "max_pixel": float(images.abs().max()),
                        "rms_pixel": float(images.pow(2).mean().sqrt()),
                        "radius_sent": method.next_radius, "synthetic_train_accuracy": train_acc,
                        "weight_norm": norm, "server_images": sum(SyntheticSet.from_payload(u).images.shape[0]
                                                                  for u in uploads.values())})
            return out

        method.aggregate = logged  # type: ignore[method-assign]
        return method
    return wrap


def run_variant(variant: Variant, seed: int, rounds: int, probe_rounds: Sequence[int] = ()) -> pd.DataFrame:
    """One seed of a variant: per round r ≥ 1 the global accuracy after the download and the log."""
    config = study_config("feddualmatch", dataset="digits", rounds=rounds, seeds=1, first_seed=seed,
                          **variant.options)
    log: list[dict] = []
    started = time.perf_counter()
    tables = run_seed(config, seed, load_dataset("digits"), wrap=instrument(variant, log, probe_rounds))
    seconds = time.perf_counter() - started
    r = tables["rounds"]
    curve = r[(r["device"] == GLOBAL) & (r["phase"] == "exchanged") & (r["round"] >= 1)]
    frame = pd.DataFrame(log).assign(variant=variant.label, seed=seed, round=curve["round"].to_numpy(),
                                     accuracy=curve["accuracy"].to_numpy(), loss=curve["loss"].to_numpy(),
                                     run_seconds=seconds)
    first = ["variant", "seed", "round", "accuracy", "loss"]
    return frame[first + [c for c in frame.columns if c not in first]]


def plot(rows: pd.DataFrame, path: Path) -> None:
    """Per variant, mean over seeds with the seeds' range shaded: (left) the global model's accuracy
    by round; (right) the fresh-model probe of that round's synthetic sets, where it was taken."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5), layout="constrained", sharey=True)
    for i, (label, group) in enumerate(rows.groupby("variant", sort=False)):
        seeds = group["seed"].nunique()
        for ax, column in ((left, "accuracy"), (right, "fresh_model_accuracy")):
            by = group.dropna(subset=[column]).groupby("round")[column]
            if not len(by):
                continue
            mean = by.mean()
            ax.plot(mean.index, 100 * mean, marker="o", markersize=3, color=f"C{i}", label=f"{label} ({seeds} seeds)")
            ax.fill_between(mean.index, 100 * by.min(), 100 * by.max(), color=f"C{i}", alpha=0.12)
    left.set(xlabel="round", ylabel="test accuracy %", title="global model after the round")
    right.set(xlabel="round", title="fresh model trained on that round's sets (T_g = 50)")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("FedDualMatch on IID digits: mean over seeds, band min–max")
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--probe", nargs="*", default=["default"], help="variants whose sets get the fresh-model probe")
    parser.add_argument("--work", type=Path, default=Path("results/feddualmatch_decline"))
    parser.add_argument("--out", type=Path, default=RESULTS / "feddualmatch_decline.csv")
    args = parser.parse_args()
    torch.set_num_threads(1)
    args.work.mkdir(parents=True, exist_ok=True)
    for label in args.variants:
        for seed in args.seeds:
            path = args.work / f"{label}-seed{seed}.csv"
            if path.exists():
                continue
            frame = run_variant(VARIANTS[label], seed, args.rounds, PROBE_ROUNDS if label in args.probe else ())
            frame.to_csv(path, index=False)
            acc = frame["accuracy"].to_numpy()
            print(f"{label:>16} seed {seed}: best {acc.max():.3f} (r{int(np.argmax(acc)) + 1}) last {acc[-1]:.3f} "
                  f"{frame['run_seconds'].iloc[0]:.0f} s", flush=True)
    rows = pd.concat([pd.read_csv(p) for p in sorted(args.work.glob("*-seed*.csv"))], ignore_index=True)
    order = {label: i for i, label in enumerate(VARIANTS)}
    rows = rows.sort_values(["variant", "seed", "round"], key=lambda c: c.map(order) if c.name == "variant" else c)
    rows.to_csv(args.out, index=False)
    plot(rows, args.out.with_suffix(".png"))


if __name__ == "__main__":
    main()

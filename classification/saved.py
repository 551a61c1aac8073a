"""Classification's saved models (``frd.saved``), and ``frd eval``'s test of them.

A run saves ``global``, the server's model, where its method keeps one, else ``device<d>`` for
every device (FD; over Flower only the reference device, the one whose weights the server
holds: ``Method.saved_models``). The metadata names the dataset and its split, the model and its
width, the image shape and the classes, which rebuild each model (``build_model``) and its test
set. ``frd eval`` tests each model as the run did after every round (``training.evaluate``), so a
run's last models score what its ``runs.csv`` says.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd
from torch import nn

from frd.classification.context import RunContext
from frd.classification.data import Dataset, load_dataset
from frd.classification.models import build_model, model_name
from frd.classification.training import evaluate as test
from frd.errors import FrdError
from frd.saved import EvalRequest, SavedModels, models_file


def run_models_file(ctx: RunContext, models: Mapping[str, nn.Module]) -> bytes:
    """A run's saved file: ``models`` by name (``global``, ``device<d>``)."""
    config = ctx.config
    metadata = {"run_id": ctx.run_id, "method": config.method, "seed": ctx.seed, "dataset": config.dataset,
                "data_dir": config.data_dir, "test_fraction": config.test_fraction, "split_seed": config.split_seed,
                "model": model_name(config.model, config.dataset), "width": config.width,
                "image_shape": list(ctx.data.image_shape), "classes": ctx.classes}
    return models_file("cls", metadata, {name: model.state_dict() for name, model in models.items()})


def evaluate(saved: Sequence[SavedModels], request: EvalRequest) -> tuple[pd.DataFrame, str]:
    """Every saved model's accuracy and loss on its run's test set: one row per model."""
    given = [flag for flag, value in (("--episodes", request.episodes), ("--seed", request.seed),
                                      ("--video", request.video)) if value is not None]
    if given:
        raise FrdError(f"{', '.join(given)} play RL agents; a classification folder's models are tested on its test set")
    datasets: dict[tuple, Dataset] = {}
    rows = []
    for run in saved:
        meta = run.metadata
        source = (meta["dataset"], meta["data_dir"], meta["test_fraction"], meta["split_seed"])
        if source not in datasets:
            datasets[source] = load_dataset(meta["dataset"], meta["data_dir"], test_fraction=meta["test_fraction"],
                                            split_seed=meta["split_seed"])
        data = datasets[source]
        for name, state in run.state_dicts.items():
            model = build_model(meta["model"], meta["dataset"], tuple(meta["image_shape"]), meta["classes"], meta["width"])
            model.load_state_dict(state)
            accuracy, loss = test(model, data.x_test, data.y_test)
            rows.append({"run_id": meta["run_id"], "method": meta["method"], "seed": meta["seed"], "model": name,
                         "accuracy": accuracy, "loss": loss})
    frame = pd.DataFrame(rows)
    shown = frame[["run_id", "model"]].assign(accuracy=[f"{a:.2%}" for a in frame["accuracy"]],
                                              loss=[f"{v:.4f}" for v in frame["loss"]])
    return frame, "test-set accuracy and loss of each saved model\n" + shown.to_string(index=False)

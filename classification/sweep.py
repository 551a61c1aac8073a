"""Classification's part of sweep reports (``frd run``, ``frd report``): a cell's numeric summary,
the columns a report shows, and accuracy against cumulative uplink bits."""
from __future__ import annotations

import pandas as pd

from frd.classification.config import ClsConfig
from frd.classification.methods import GLOBAL
from frd.classification.report import summarize
from frd.domains import Curve, Metric
from frd.results import ResultStore, run_id

HEADLINE = (
    Metric("seeds", "seeds", plot=False),
    Metric("accuracy_final", "device acc % [q25–q75]", lo="accuracy_final_q25", hi="accuracy_final_q75", percent=True),
    Metric("accuracy_best", "best device acc %", percent=True),
    Metric("bits_up_per_device_round", "bits up/device/round", log=True),
    Metric("bits_up_total", "bits up total", log=True),
)
"""Job 3's table [issue 41]: accuracy and what it cost on the uplink."""


def summary(config: ClsConfig, store: ResultStore) -> pd.DataFrame:
    """``cls_summary`` of ``config``'s seeds (``summary.csv``, ``accuracy.png``)."""
    return summarize(config, store)


def accuracy_against_uplink(config: ClsConfig, store: ResultStore) -> Curve:
    """Per round ≥ 1: the uplink bits of all devices so far (setup uploads included) and the test
    accuracy after that round's download, of the reference device (of the global model where
    devices keep none: FedDualMatch); medians over seeds, accuracy's 25–75 % as its band."""
    ids = {run_id(config.method, s) for s in range(config.seeds)}
    rounds, ledger = store.read("rounds"), store.read("ledger")
    rounds = rounds[rounds["run_id"].isin(ids) & (rounds["phase"] == "exchanged")]
    has_device = rounds.groupby("run_id")["device"].transform(lambda d: (d != GLOBAL).any())
    rounds = rounds[(rounds["device"] != GLOBAL) | ~has_device]
    up = ledger[ledger["run_id"].isin(ids) & (ledger["direction"] == "up")]
    per_round = up.groupby(["run_id", "round"])["bits"].sum().groupby(level="run_id").cumsum().rename("bits")
    points = rounds.merge(per_round.reset_index(), on=["run_id", "round"], how="left").sort_values(["run_id", "round"])
    points["bits"] = points.groupby("run_id")["bits"].ffill().fillna(0)  # a round without uploads adds none
    points = points[points["round"] >= 1].groupby("round")
    frame = pd.DataFrame({"method": config.method, "x": points["bits"].median(), "y": points["accuracy"].median(),
                          "y_lo": points["accuracy"].quantile(0.25), "y_hi": points["accuracy"].quantile(0.75)})
    return Curve("accuracy-vs-uplink", frame.reset_index(drop=True), "uplink bits so far, all devices (median over seeds)",
                 "test accuracy after the download", xlog=True)

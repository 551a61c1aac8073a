"""Classification's part of sweep reports (``frd run``, ``frd report``): a cell's numeric summary,
the columns a report shows, and accuracy against cumulative uplink bits."""
from __future__ import annotations

import pandas as pd

from frd.classification.config import ClsConfig, run_ids
from frd.classification.report import IMPROVEMENTS, accuracy_vs_bits, summarize
from frd.domains import Comparison, Curve, Metric
from frd.frontier import Frontier
from frd.results import ResultStore
from frd.stats import IQR

HEADLINE = (
    Metric("runs", "runs", plot=False),
    Metric("accuracy_final_median", "device acc", lo="accuracy_final_q25", hi="accuracy_final_q75", percent=True,
           statistic="median", interval=IQR, better="higher"),
    Metric("accuracy_best_median", "best acc", lo="accuracy_best_q25", hi="accuracy_best_q75", percent=True,
           statistic="median", interval=IQR, better="higher"),
    Metric("best_round_median", "best round", plot=False, statistic="median", unit="round"),
    Metric("bits_up_per_device_round", "bits up/device/round", log=True, unit="bits", better="lower"),
    Metric("bits_up_total", "bits up total", log=True, unit="bits", better="lower"),
)
"""Job 3's table [issue 41]: accuracy and what it cost on the uplink."""


FRONTIERS = tuple(Frontier(f"frontier_{which}", f"accuracy_{which}_iqm", f"{which} accuracy (IQM, 95% CI)", "bits_up_total",
                          "uplink bits of a run, all devices", higher_is_better=True, percent=True)
                  for which in ("final", "best"))
"""``frd report``'s frontiers (``frd.frontier``): final and best accuracy against a run's uplink."""


COMPARISON = Comparison(None, IMPROVEMENTS, lower_is_better=False, labels={"accuracy": "higher final acc"})
"""With ``--baseline`` only (no method is every other's baseline): P(a higher final accuracy on
the reference device than the baseline's run)."""


def summary(config: ClsConfig | tuple[ClsConfig, ...], store: ResultStore) -> pd.DataFrame:
    """``cls_summary`` of ``config``'s seeds (``summary.csv``, ``accuracy.png``)."""
    return summarize(config, store)


def accuracy_against_uplink(config: ClsConfig | tuple[ClsConfig, ...], store: ResultStore) -> Curve:
    """``accuracy_vs_bits`` of ``config``'s runs (as ``frd cls`` draws it): per round ≥ 1 the uplink
    bits of all devices so far and the accuracy after that round's download, medians over seeds (as
    the summary's) with their range as the band."""
    ids = run_ids(config)
    runs, rounds, ledger = (frame[frame["run_id"].isin(ids)] for frame in map(store.read, ("runs", "rounds", "ledger")))
    curve = accuracy_vs_bits(runs, rounds, ledger)
    frame = pd.DataFrame({"method": curve["method"], "x": curve["bits_up_cumulative"], "y": curve["accuracy_median"],
                          "y_lo": curve["accuracy_min"], "y_hi": curve["accuracy_max"]})
    return Curve("accuracy-vs-uplink", frame, "uplink bits so far, all devices (median over seeds)",
                 "test accuracy after the download", xlog=True)

"""Classification on the same exchange, ledger and harness as RL.

``run`` is the Python entry point; it imports torch and the methods when called, so that
importing a module of this package (as Ray and Flower workers do) does not import them all."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    import pandas as pd

    from frd.backends import Backend
    from frd.classification.config import ClsConfig

__all__ = ["run"]


def run(configs: ClsConfig | Sequence[ClsConfig], out: str | Path, *, progress: bool = False,
        backend: str | Backend = "local", baseline: str | None = None) -> pd.DataFrame:
    """Run every seed of ``configs`` (one config, or one per method to compare them on the same
    seeds and partitions: ``frd.cls_configs``) not already finished in ``out``; return the numeric
    summary, one row per method in their order.

    Like ``frd cls``: tables (``runs``, ``rounds``, ``ledger``), ``summary.csv``,
    ``accuracy_bits.csv``, config and figures go to ``out``, and calling again with the same configs
    resumes (a different config is refused with ``FrdError``). ``backend`` is ``"local"``,
    ``"ray"`` or a ``frd.backends.Backend``. The columns are described in
    ``frd.classification.report.cls_summary``: accuracies are fractions in [0, 1], medians over
    seeds; ``bits_*_per_device_round`` are one device's payload per round, ``bits_*_total`` all
    devices' over the run; with ``baseline`` (one of the methods), ``p_improvement``: P(a higher
    final accuracy than the baseline's) with its 95 % interval.

    Example::

        import frd
        summary = frd.classification.run(frd.cls_configs("fl,fd", rounds=2, devices=3), out="results/api-cls")
        print(summary[["method", "accuracy_final_median", "bits_up_total"]])
    """
    from frd.backends import Backend
    from frd.classification.config import as_configs
    from frd.classification.experiment import run_experiment
    from frd.classification.report import summarize
    from frd.domains import check_baseline

    if baseline is not None:  # before anything runs
        check_baseline(baseline, [config.method for config in as_configs(configs)])
    where = Backend(backend) if isinstance(backend, str) else backend
    return summarize(configs, run_experiment(configs, out, progress=progress, backend=where), baseline)

"""Federated RL on Gymnasium: the batched runner, the methods (strategies), the experiment driver,
its summaries and plots, and the ``frd rl`` / ``frd compare`` commands.

``run`` is the Python entry point; it imports the engine when called, so that importing a module
of this package (as Ray workers do) does not."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from frd.backends import Backend
    from frd.rl.config import RLConfig

__all__ = ["run"]


def run(config: RLConfig, out: str | Path, *, progress: bool = False, backend: str | Backend = "local",
        single_agent_reference: bool = False, baseline: str | None = None) -> pd.DataFrame:
    """Run every method × seed of ``config`` not already finished in ``out``; return the numeric
    summary, one row per (method, agent count).

    Like ``frd compare``: tables (``runs``, ``episodes``, ``ledger``), ``summary.csv``, config and
    figures go to ``out``, and calling again with the same config resumes (a different config is
    refused with ``FrdError``). ``backend`` is ``"local"``, ``"ray"`` or a ``frd.backends.Backend``
    (e.g. ``Backend("ray", address="auto")``). The columns are described in
    ``frd.rl.summary.rl_summary``: mission episodes are per agent (quartiles, IQM and
    P(improvement) vs ``baseline``, by default independent, with 95 % intervals); ``bits_*_per_agent_round`` are one agent's
    payload per exchange round, ``bits_*_total`` all agents' over the run (medians over seeds).

    Example::

        import frd
        config = frd.rl_config("frd,independent", agents=2, seeds=2, max_episodes=200)
        summary = frd.rl.run(config, out="results/api-rl")
        print(summary[["method", "completed_frac", "mission_episodes_median", "bits_up_total"]])
    """
    from frd.backends import Backend
    from frd.rl.experiment import run_experiment

    where = Backend(backend) if isinstance(backend, str) else backend
    return run_experiment(config, out, progress=progress, single_agent_reference=single_agent_reference, backend=where,
                          baseline=baseline)

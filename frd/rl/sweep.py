"""RL's part of experiment files and sweep reports (``frd run``, ``frd report``): a cell's config
from the flags of ``frd rl``, its numeric summary, and the columns a sweep report shows."""
from __future__ import annotations

import argparse

import pandas as pd

from frd.domains import Comparison, Metric
from frd.errors import FrdError
from frd.frontier import Frontier
from frd.results import ResultStore
from frd.rl import cli
from frd.rl.config import RLConfig
from frd.rl.experiment import report
from frd.rl.summary import BASELINE, IMPROVEMENTS
from frd.stats import CI95

HEADLINE = (
    Metric("runs", "runs", plot=False),
    Metric("completed_frac", "completed", percent=True, better="higher"),
    Metric("mission_episodes_median", "mission episodes", lo="mission_episodes_median_lo",
           hi="mission_episodes_median_hi", statistic="median", interval=CI95, unit="episodes", better="lower"),
    Metric("bits_up_per_agent_round", "bits up/agent/round", log=True, unit="bits", better="lower"),
    Metric("bits_up_total", "bits up until the mission", log=True, unit="bits", better="lower"),
)
"""Job 2's table [issue 41]: per cell, the median mission episodes with its 95 % bootstrap interval,
one agent's uplink per round, and all agents' uplink until the mission."""


FRONTIERS = (Frontier("frontier", "mission_episodes_iqm", "mission episodes (IQM, 95% CI)", "bits_up_total",
                       "uplink bits per agent until the mission", higher_is_better=False, per="agents"),)
"""``frd report``'s frontier (``frd.frontier``): the fewest bits that reach the mission soonest."""


COMPARISON = Comparison(BASELINE, IMPROVEMENTS, lower_is_better=True,
                        labels={"mission_episodes": "fewer episodes", "all_agents_episodes": "fewer episodes until all agents"})
"""P(fewer episodes than the baseline, ``independent`` unless ``--baseline`` names another, until
the first agent's mission, and until every agent's), as ``rl_summary`` gives them within a folder."""


def experiment_config(args: argparse.Namespace) -> RLConfig:
    """The config of ``frd rl``'s flags, validated."""
    if args.single_agent_reference:
        raise FrdError("--single-agent-reference is not run in a sweep: run frd rl for it")
    config = cli.config_from_args(args, (args.method,))
    config.validate()
    return config


def summary(config: RLConfig, store: ResultStore) -> pd.DataFrame:
    """``rl_summary`` of ``config``'s runs (``summary.csv``, ``mission.png``, ``payload.png``)."""
    return report(store, config)

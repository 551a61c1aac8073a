"""The RL summary: completion rate, mission time, env steps, seconds, rounds and payload per method.

Runs that hit the episode cap count at the cap: their mission time is a lower bound, and the
completion rate says how many there are.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from frd.stats import fmt, median_ci, quartiles


def rl_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per method (and agent count) with the figures of SPEC §1."""
    rows = []
    for (method, agents), g in runs.groupby(["method", "n_agents"], sort=False):
        rounds = g["rounds"].replace(0, np.nan)
        lo, hi = median_ci(g["mission_episodes"])
        rows.append({
            "method": method, "agents": agents, "runs": len(g),
            "completed": f"{g['completed'].mean():.0%}",
            "mission episodes": quartiles(g["mission_episodes"]),
            "episodes 95% CI": f"{fmt(lo)}–{fmt(hi)}",
            "env steps": quartiles(g["mission_env_steps"]),
            "seconds": quartiles(g["compute_s"] + g["comm_s"]),
            "comm seconds": quartiles(g["comm_s"]),
            "rounds": quartiles(g["rounds"]),
            "bits up/agent/round": quartiles(g["bits_up"] / rounds / agents),
            "bits down/agent/round": quartiles(g["bits_down"] / rounds / agents),
            "bits up total": quartiles(g["bits_up"]),
            "bits down total": quartiles(g["bits_down"]),
        })
    return pd.DataFrame(rows)

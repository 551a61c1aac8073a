"""The RL summary: completion rate, mission time, env steps, seconds, rounds and payload per method.

Runs that hit the episode cap count at the cap: their mission time is a lower bound, and the
completion rate says how many there are.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from frd.stats import fmt, improvement_ci, iqm_ci, median_ci, quartiles

BASELINE = "independent"
"""The method every other one is compared with (probability of improvement)."""


def rl_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per method (and agent count) with the mission-time and payload figures of [Seo et al. 2022, §4],
    plus the IQM of the mission episodes and, where ``independent`` ran too, the probability that the method needs
    fewer episodes than independent agents, each with a 95 % stratified-bootstrap interval."""
    rows = []
    for (method, agents), g in runs.groupby(["method", "n_agents"], sort=False):
        rounds = g["rounds"].replace(0, np.nan)
        lo, hi = median_ci(g["mission_episodes"])
        mid, iqm_lo, iqm_hi = iqm_ci(g["mission_episodes"])
        base = runs[(runs["method"] == BASELINE) & (runs["n_agents"] == agents)]["mission_episodes"]
        p, p_lo, p_hi = (improvement_ci(g["mission_episodes"], base) if len(base) and method != BASELINE
                         else (np.nan, np.nan, np.nan))
        rows.append({
            "method": method, "agents": agents, "runs": len(g),
            "completed": f"{g['completed'].mean():.0%}",
            "mission episodes": quartiles(g["mission_episodes"]),
            "episodes 95% CI": f"{fmt(lo)}–{fmt(hi)}",
            "episodes IQM [95% CI]": f"{fmt(mid)} [{fmt(iqm_lo)}–{fmt(iqm_hi)}]",
            f"P(fewer episodes than {BASELINE}) [95% CI]": (f"{p:.2f} [{p_lo:.2f}–{p_hi:.2f}]" if np.isfinite(p)
                                                            else "–"),
            "slowest agent episodes": quartiles(g["all_agents_episodes"]),
            "median agent episodes": quartiles(g["median_agent_episodes"]),
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

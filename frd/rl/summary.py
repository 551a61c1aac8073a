"""The RL summary: completion rate, mission time, env steps, seconds, rounds and payload per method.

``rl_summary`` gives numbers (``summary.csv``, the Python API); ``rl_table`` formats them for
people (what ``frd rl`` / ``frd compare`` print). Runs that hit the episode cap count at the cap:
their mission time is a lower bound, and the completion rate says how many there are.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from frd.stats import CI95, IQR, bracketed, fmt, improvement_columns, iqm_ci, median_ci

BASELINE = "independent"
"""The method every other one is compared with (probability of improvement)."""

MEDIANS = {"slowest_agent_episodes": "all_agents_episodes", "median_agent_episodes": "median_agent_episodes",
           "env_steps": "mission_env_steps", "rounds": "rounds"}
"""Summary column → the runs.csv column whose median over runs it is."""
SIM_COLUMN = "mission_sim_s"
"""runs.csv's mission in virtual seconds (``frd.rl.runner.virtual_times``)."""
IMPROVEMENTS = {"mission_episodes": "p_improvement", "all_agents_episodes": "p_improvement_all_agents",
                SIM_COLUMN: "p_improvement_sim_s"}
"""runs.csv column → the summary column of P(fewer than the baseline, ``independent`` unless
``--baseline`` names another) on it."""


def agent_rounds(runs: pd.DataFrame) -> pd.Series:
    """Per run, its rounds × the agents taking part in each: ``agents_per_round`` where runs.csv has
    it (partial participation), else every agent."""
    per_round = runs["agents_per_round"].fillna(runs["n_agents"]) if "agents_per_round" in runs else runs["n_agents"]
    return runs["rounds"] * per_round


def sim_columns(g: pd.DataFrame) -> dict[str, float]:
    """The mission in virtual seconds: median and IQM with their 95 % intervals (NaN without a clock)."""
    sim = g[SIM_COLUMN]
    lo, hi = median_ci(sim) if sim.notna().all() else (np.nan, np.nan)
    iqm = iqm_ci(sim) if sim.notna().all() else (np.nan, np.nan, np.nan)
    return {"mission_sim_s_median": sim.median(), "mission_sim_s_median_lo": lo, "mission_sim_s_median_hi": hi,
            **dict(zip(("mission_sim_s_iqm", "mission_sim_s_iqm_lo", "mission_sim_s_iqm_hi"), iqm))}


def rl_summary(runs: pd.DataFrame, baseline: str = BASELINE) -> pd.DataFrame:
    """One numeric row per (method, agent count) with the mission-time and payload figures of
    [Seo et al. 2022, §4]; medians over runs unless the name says otherwise.

    Columns: ``runs``; ``completed_frac`` (share of runs whose mission completed before the cap);
    ``mission_episodes_median/_q25/_q75`` (episodes per agent until the mission, over runs) and the
    median's 95 % bootstrap interval ``_median_lo/_hi``; ``mission_episodes_iqm`` with its 95 %
    stratified-bootstrap interval ``_iqm_lo/_hi``; ``baseline`` (``independent`` unless given) and
    ``p_improvement`` = P(fewer mission episodes than the baseline with as many agents) with ``_lo/_hi``
    (NaN where the baseline did not run, and in its own row); with ``--until all``,
    ``all_agents_completed_frac``, ``all_agents_episodes_iqm`` (``_lo/_hi``) and
    ``p_improvement_all_agents`` (``_lo/_hi``): the same until every agent's mission (else NaN);
    ``slowest_agent_episodes`` and ``median_agent_episodes`` (``--until all``, else NaN); ``env_steps``
    (all agents together, until the mission); ``mission_sim_s_median`` (``_lo/_hi``) and ``mission_sim_s_iqm``
    (``_lo/_hi``): the mission in virtual seconds (``frd.clock``; NaN in runs saved before it), with
    ``p_improvement_sim_s`` = P(sooner than the baseline in virtual seconds); ``cpu_seconds`` (this machine's
    compute time, kept apart from the virtual clock) and ``comm_seconds`` (the channel's time); ``rounds``;
    ``bits_up_per_agent_round``/``bits_down_per_agent_round`` (one agent's payload per exchange round,
    over the agents that took part), ``bits_up_total``/``bits_down_total`` (all agents and rounds of a
    run) and ``bits_per_agent_total`` (one agent's bits up and down over a run)."""
    if SIM_COLUMN not in runs:  # saved before the clock
        runs = runs.assign(**{SIM_COLUMN: np.nan})
    rows = []
    for (method, agents), g in runs.groupby(["method", "n_agents"], sort=False):
        episodes = g["mission_episodes"]
        agent_round_count = agent_rounds(g).replace(0, np.nan)
        median_lo, median_hi = median_ci(episodes)
        base = runs[(runs["method"] == baseline) & (runs["n_agents"] == agents)] if method != baseline else runs.iloc[:0]
        rows.append({
            "method": method, "agents": int(agents), "runs": len(g), "completed_frac": g["completed"].astype(float).mean(),
            "all_agents_completed_frac": (np.nan if g["all_agents_episodes"].isna().all()  # --until first
                                          else (g["agents_completed"] == agents).astype(float).mean()),
            "mission_episodes_median": episodes.median(), "mission_episodes_q25": episodes.quantile(0.25),
            "mission_episodes_q75": episodes.quantile(0.75), "mission_episodes_median_lo": median_lo,
            "mission_episodes_median_hi": median_hi,
            **dict(zip(("mission_episodes_iqm", "mission_episodes_iqm_lo", "mission_episodes_iqm_hi"), iqm_ci(episodes))),
            "baseline": baseline, **improvement_columns(g, base, IMPROVEMENTS, lower_is_better=True),
            **dict(zip(("all_agents_episodes_iqm", "all_agents_episodes_iqm_lo", "all_agents_episodes_iqm_hi"),
                       iqm_ci(g["all_agents_episodes"]))),
            **{name: g[column].median() for name, column in MEDIANS.items()},
            **sim_columns(g),
            "cpu_seconds": g["compute_s"].median(), "comm_seconds": g["comm_s"].median(),
            "bits_up_per_agent_round": (g["bits_up"] / agent_round_count).median(),
            "bits_down_per_agent_round": (g["bits_down"] / agent_round_count).median(),
            "bits_up_total": g["bits_up"].median(), "bits_down_total": g["bits_down"].median(),
            "bits_per_agent_total": ((g["bits_up"] + g["bits_down"]) / agents).median(),
        })
    return pd.DataFrame(rows)


def rl_table(summary: pd.DataFrame) -> pd.DataFrame:
    """``rl_summary``'s rows as text for people, – for none: each label names its statistic and
    what its brackets hold, the 25–75 % range of the runs (``[IQR]``) or a 95 % interval
    (``[95% CI]``), as ``frd report``'s tables name them."""
    def interval(row: pd.Series, name: str, digits: str = "") -> str:
        show = (lambda x: format(x, digits)) if digits else None
        return bracketed(row[name], row[f"{name}_lo"], row[f"{name}_hi"], show)

    rows = []
    for _, row in summary.iterrows():
        episodes = "mission_episodes_"
        rows.append({
            "method": row["method"], "agents": row["agents"], "runs": row["runs"],
            "completed": f"{row['completed_frac']:.0%}",
            f"mission episodes, median [{IQR}]": bracketed(row[episodes + "median"], row[episodes + "q25"],
                                                           row[episodes + "q75"]),
            f"mission episodes, median [{CI95}]": interval(row, episodes + "median"),
            f"mission episodes, IQM [{CI95}]": interval(row, episodes + "iqm"),
            f"P(fewer episodes than {row['baseline']}) [{CI95}]": interval(row, "p_improvement", digits=".2f"),
            f"mission virtual s, IQM [{CI95}]": interval(row, "mission_sim_s_iqm", digits=".3g"),
            f"P(sooner in virtual s than {row['baseline']}) [{CI95}]": interval(row, "p_improvement_sim_s", digits=".2f"),
            **{name.replace("_", " "): fmt(row[name]) for name in MEDIANS if name != "rounds"},
            "cpu seconds": fmt(row["cpu_seconds"]), "comm seconds": fmt(row["comm_seconds"]), "rounds": fmt(row["rounds"]),
            "bits up/agent/round": fmt(row["bits_up_per_agent_round"]),
            "bits down/agent/round": fmt(row["bits_down_per_agent_round"]),
            "bits up total": fmt(row["bits_up_total"]), "bits down total": fmt(row["bits_down_total"]),
        })
    return pd.DataFrame(rows)

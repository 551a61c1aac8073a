"""RL's TensorBoard series of one run (``frd.tensorboard`` logs them, with the ledger's bits)."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pandas as pd

from frd.rl.episode_end import window_means


def tensorboard_series(tables: Mapping[str, pd.DataFrame], common: Mapping[str, Any]) -> list[tuple[str, pd.Series]]:
    """Per agent its scores and the mission rule's average by episode (``window_means``: the
    floats the rule read), and per distilling agent the cross-entropy to its teacher by round."""
    series: list[tuple[str, pd.Series]] = []
    episodes = tables.get("episodes", pd.DataFrame())
    for agent, rows in (episodes.groupby("agent") if not episodes.empty else []):
        scores = rows.sort_values("episode").set_index("episode")["score"]
        average = pd.Series(window_means(scores.to_numpy(np.float64), int(common["window"])), scores.index)
        series += [(f"score/agent{agent}", scores), (f"mission_average/agent{agent}", average)]
    rounds = tables.get("rounds", pd.DataFrame())
    for agent, rows in (rounds.groupby("agent") if not rounds.empty else []):
        series += [(f"distill/{col}/agent{agent}", rows.set_index("round")[col]) for col in ("loss_before", "loss_after")]
    return series

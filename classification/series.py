"""Classification's TensorBoard series of one run (``frd.tensorboard`` logs them, with the ledger's bits)."""
from __future__ import annotations

from typing import Any, Mapping

import pandas as pd


def tensorboard_series(tables: Mapping[str, pd.DataFrame], common: Mapping[str, Any]) -> list[tuple[str, pd.Series]]:
    """Each evaluated model's test accuracy by round, after local training (``local``) and after
    the download (``exchanged``); device −1 is the global model."""
    rounds = tables.get("rounds", pd.DataFrame())
    return [(f"accuracy/{phase}/{'global' if device < 0 else f'device{device}'}", rows.set_index("round")["accuracy"])
            for (phase, device), rows in (rounds.groupby(["phase", "device"]) if not rounds.empty else [])]

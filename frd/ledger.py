"""The payload ledger: one row per transfer, the single source of every payload figure."""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

LEDGER_COLUMNS = [
    "run_id", "round", "participant", "direction", "kind", "entries", "bits", "latency_s", "delivered", "sim_s", "late",
]
"""``sim_s``: when the transfer arrived on the virtual clock (``frd.clock``; NaN without one); ``late``:
an upload that came after its round's deadline and was left out of the aggregate."""


@dataclass
class Ledger:
    """Rows appended by the exchange round driver; ``frame()`` gives the tidy table."""

    rows: list[dict] = field(default_factory=list)

    def record(self, run_id: str, round_: int, participant: int, direction: str, kind: str,
               entries: int, bits: int, latency_s: float = 0.0, delivered: bool = True, *,
               sim_s: float = float("nan"), late: bool = False) -> None:
        self.rows.append(dict(run_id=run_id, round=round_, participant=participant,
                              direction=direction, kind=kind, entries=int(entries), bits=int(bits),
                              latency_s=float(latency_s), delivered=bool(delivered), sim_s=float(sim_s),
                              late=bool(late)))

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=LEDGER_COLUMNS)

    def totals(self, run_id: str | None = None) -> dict[str, int]:
        """Bits sent up and down (delivered or not: a failed transfer still used the channel)."""
        up = down = 0
        for r in self.rows:
            if run_id is None or r["run_id"] == run_id:
                if r["direction"] == "up":
                    up += r["bits"]
                else:
                    down += r["bits"]
        return {"bits_up": up, "bits_down": down}

"""``frd report --table latex|markdown``: the printed table as a paper's table. booktabs LaTeX or a
Markdown pipe table, with the units under (LaTeX) or beside (Markdown) each heading, what each value
and its brackets are in the caption, and the best value of a column in bold where its interval
is disjoint from every other row's (``best_row``): a difference the intervals carry, not one
within them."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from frd.errors import FrdError

FORMATS = {"latex": ".tex", "markdown": ".md"}
"""``--table`` format → the suffix of ``R/summary<suffix>``."""

LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "–": "--"}


@dataclass(frozen=True)
class Column:
    """One column of a paper's table: its heading, unit, the cells as printed, and the rows to bold."""

    heading: str
    cells: Sequence[str]
    unit: str = ""
    numeric: bool = False
    """Right-aligned (a metric), else left (names and sweep values)."""
    bold: frozenset[int] = field(default_factory=frozenset)


def table_format(name: str) -> str:
    """``name`` if it is a format of ``--table``, else one line naming those there are."""
    if name not in FORMATS:
        raise FrdError(f"--table {name}: unknown format; choose {' or '.join(FORMATS)}")
    return name


def best_row(values: Sequence[float], lo: Sequence[float], hi: Sequence[float], lower_is_better: bool) -> int | None:
    """The row of the best value, if its interval lies wholly beyond every other row's (a row
    without an interval: its value alone) [our choice: overlapping intervals leave a column
    unmarked]; None where it does not, where the best has no interval or is tied, or where
    there is only one row to compare."""
    v, low, high = (np.asarray(x, float) for x in (values, lo, hi))
    rows = np.flatnonzero(np.isfinite(v))
    if len(rows) < 2:
        return None
    sign = 1 if lower_is_better else -1
    best = rows[np.argmin(sign * v[rows])]
    if not (np.isfinite(low[best]) and np.isfinite(high[best])) or np.sum(v[rows] == v[best]) > 1:
        return None
    others = [r for r in rows if r != best]
    their_lo = np.where(np.isfinite(low[others]), low[others], v[others])
    their_hi = np.where(np.isfinite(high[others]), high[others], v[others])
    separate = high[best] < their_lo.min() if lower_is_better else low[best] > their_hi.max()
    return int(best) if separate else None


def _latex_text(text: str) -> str:
    return "".join(LATEX_SPECIAL.get(c, c) for c in text)


def latex(columns: Sequence[Column], caption: str, label: str = "tab:frd-report") -> str:
    """A booktabs ``table`` (needs ``\\usepackage{booktabs}``): headings, a row of units in
    parentheses where any column has one, the rows, the caption above."""
    def row(cells: Sequence[str]) -> str:
        return " & ".join(cells) + r" \\"

    body = [row([_latex_text(c.heading) for c in columns])]
    if any(c.unit for c in columns):
        body.append(row([f"({_latex_text(c.unit)})" if c.unit else "" for c in columns]))
    body.append(r"\midrule")
    for i in range(len(columns[0].cells)):
        body.append(row([rf"\textbf{{{_latex_text(c.cells[i])}}}" if i in c.bold else _latex_text(c.cells[i])
                         for c in columns]))
    align = "".join("r" if c.numeric else "l" for c in columns)
    return "\n".join([r"% frd report --table latex; needs \usepackage{booktabs}", r"\begin{table}[t]", r"\centering",
                      rf"\caption{{{_latex_text(caption)}}}", rf"\label{{{label}}}", rf"\begin{{tabular}}{{{align}}}",
                      r"\toprule", *body, r"\bottomrule", r"\end{tabular}", r"\end{table}", ""])


def markdown(columns: Sequence[Column], caption: str) -> str:
    """A pipe table (headings with their units in parentheses, bold as ``**…**``), then its caption
    as pandoc's ``Table:`` line."""
    def row(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cell.replace("|", r"\|") for cell in cells) + " |"

    lines = [row([f"{c.heading} ({c.unit})" if c.unit else c.heading for c in columns]),
             row(["---:" if c.numeric else "---" for c in columns])]
    lines += [row([f"**{c.cells[i]}**" if i in c.bold else c.cells[i] for c in columns])
              for i in range(len(columns[0].cells))]
    return "\n".join([*lines, "", f"Table: {caption}", ""])


def render(form: str, columns: Sequence[Column], caption: str) -> str:
    """The table in ``form`` (``FORMATS``)."""
    return latex(columns, caption) if table_format(form) == "latex" else markdown(columns, caption)

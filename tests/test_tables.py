"""Tables a paper can use (issue 61, item 4): ``frd report --table latex|markdown`` writes the printed
table as booktabs LaTeX or Markdown, units under the headings, the intervals named in the caption, and
a column's best in bold only where its interval overlaps no other row's. By hand, then end to end."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from frd.cli import main
from frd.errors import FrdError
from frd.report import paper_table, report
from frd.rl.sweep import HEADLINE
from frd.tables import Column, best_row, latex, markdown
from tests.blank_figures import blank_rl_figures

NAN = np.nan


@pytest.mark.parametrize("values, lo, hi, lower, expected", [
    ([10, 20, 30], [8, 18, 25], [12, 22, 35], True, 0),  # 12 < 18: apart from every other
    ([10, 20, 30], [8, 17, 25], [19, 22, 35], True, None),  # 19 reaches into 17–22
    ([0.5, 0.9], [0.4, 0.85], [0.6, 0.95], False, 1),  # higher is better: 0.85 > 0.6
    ([10, 15], [8, NAN], [12, NAN], True, 0),  # a row without an interval is its value: 12 < 15
    ([10, 11], [8, NAN], [12, NAN], True, None),  # 11 lies inside 8–12
    ([10, 20], [NAN, 18], [NAN, 22], True, None),  # the best has no interval: nothing to separate
    ([10, 10, 30], [9, 9, 25], [9.5, 9.5, 35], True, None),  # a tie for the best
    ([10, NAN], [8, NAN], [12, NAN], True, None),  # one row to compare: nothing is marked
])
def test_the_best_is_marked_only_where_its_interval_separates_it(values, lo, hi, lower, expected):
    assert best_row(values, lo, hi, lower) == expected


COLUMNS = [Column("method", ["frd_s5", "pd"]), Column("completed", ["100", "50"], "%", numeric=True),
           Column("mission episodes", ["230 [192–250]", "350 [310–411]"], "episodes", numeric=True, bold=frozenset({0}))]


def test_latex_is_booktabs_with_units_escapes_and_bold():
    text = latex(COLUMNS, "Each row over its runs: mission episodes, median [95% CI].")
    assert text.splitlines() == [
        r"% frd report --table latex; needs \usepackage{booktabs}", r"\begin{table}[t]", r"\centering",
        r"\caption{Each row over its runs: mission episodes, median [95\% CI].}", r"\label{tab:frd-report}",
        r"\begin{tabular}{lrr}", r"\toprule",
        r"method & completed & mission episodes \\", r" & (\%) & (episodes) \\", r"\midrule",
        r"frd\_s5 & 100 & \textbf{230 [192--250]} \\", r"pd & 50 & 350 [310--411] \\",
        r"\bottomrule", r"\end{tabular}", r"\end{table}"]


def test_markdown_has_units_in_the_headings_bold_and_a_caption():
    assert markdown(COLUMNS, "Bold: the best.").splitlines() == [
        "| method | completed (%) | mission episodes (episodes) |", "| --- | ---: | ---: |",
        "| frd_s5 | 100 | **230 [192–250]** |", "| pd | 50 | 350 [310–411] |", "", "Table: Bold: the best."]


def test_a_summary_becomes_the_paper_table_of_the_printed_one():
    summary = pd.DataFrame({"grid": [5, 30], "method": "frd", "runs": 20, "completed_frac": [1.0, 0.95],
                            "mission_episodes_median": [230.0, 350.0], "mission_episodes_median_lo": [192.0, 310.0],
                            "mission_episodes_median_hi": [250.0, 411.0], "bits_up_per_agent_round": [8816.0, 289648.0],
                            "bits_up_total": [149856.0, 7.24e6]})
    text = paper_table(summary, ["grid"], list(HEADLINE), "latex")
    assert r"grid & method & runs & completed & mission episodes & bits up/agent/round & bits up until the mission \\" in text
    assert r" &  &  & (\%) & (episodes) & (bits) & (bits) \\" in text
    # S = 5's interval (192–250) lies below S = 30's (310–411): bold; completed and bits have no interval: never
    assert r"5 & frd & 20 & 100 & \textbf{230 [192--250]} & 8816 & 149856 \\" in text
    assert r"30 & frd & 20 & 95 & 350 [310--411] & 289648 & 7.24e+06 \\" in text
    assert (r"\caption{Each row over its runs: mission episodes, median [95\% CI]. [95\% CI]: a 95 \% bootstrap "
            r"interval. Bold: the best of its column (lower mission episodes), where its interval overlaps no other "
            r"row's.}") in text
    overlapping = summary.assign(mission_episodes_median_hi=[320.0, 411.0])
    assert r"\textbf" not in paper_table(overlapping, ["grid"], list(HEADLINE), "latex")


def test_report_writes_the_table_it_is_asked_for_and_refuses_an_unknown_format(tmp_path, capsys, monkeypatch):
    blank_rl_figures(monkeypatch)
    folder = tmp_path / "frd"
    assert main(["rl", "--method", "frd", "--seeds", "2", "--max-episodes", "6", "--period", "2", "--hidden", "8",
                 "--no-progress", "--out", str(folder)]) == 0
    capsys.readouterr()
    assert main(["report", str(folder), "--table", "markdown", "--out", str(tmp_path / "R")]) == 0
    assert capsys.readouterr().out.endswith(f"summary.csv and summary.md in {tmp_path / 'R'}/\n")
    lines = (tmp_path / "R" / "summary.md").read_text().splitlines()
    assert lines[0] == ("| method | runs | completed (%) | mission episodes (episodes) | bits up/agent/round (bits) | "
                        "bits up until the mission (bits) |")
    assert lines[2].startswith("| frd | 2 | ") and lines[-1].startswith("Table: Each row over its runs: mission episodes")
    assert main(["report", str(folder), "--table", "html", "--out", str(tmp_path / "R2")]) == 2
    err = capsys.readouterr().err
    assert err == "frd: error: --table html: unknown format; choose latex or markdown\n"
    assert not (tmp_path / "R2").exists()
    with pytest.raises(FrdError, match="^--table tex: unknown format; choose latex or markdown$"):
        report([folder], tmp_path / "R3", table_form="tex")
    assert not (tmp_path / "R3").exists()

"""The documents stay true: links resolve, every report is one click from the README, the README
keeps to a user guide, and its headline numbers are those of the committed CSVs."""
import re
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
PACKAGE_READMES = [REPO / "frd" / "README.md", REPO / "frd" / "rl" / "README.md", REPO / "frd" / "flower" / "README.md",
                   REPO / "agents" / "README.md", REPO / "classification" / "README.md"]
DOCUMENTS = [REPO / "README.md", *PACKAGE_READMES, *sorted((REPO / "benchmarks" / "reports").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def readme() -> str:
    return (REPO / "README.md").read_text()


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(document):
    targets = [t for t in LINK.findall(document.read_text()) if "://" not in t]
    missing = [t for t in targets if not (document.parent / t).exists()]
    assert not missing, f"{document.name} links to missing files: {missing}"


def test_every_report_is_one_click_from_the_readme():
    linked = {(REPO / t).resolve() for t in LINK.findall(readme())}
    reports = set((REPO / "benchmarks" / "reports").glob("*.md"))
    assert reports and reports <= linked, f"not linked from README.md: {sorted(p.name for p in reports - linked)}"


def test_the_readme_is_a_guide_without_dates_hashes_or_outside_paths():
    text = readme()
    lines = text.splitlines()
    assert len(lines) <= 300
    head = "\n".join(lines[:150])
    assert "frd compare --methods" in head and "frd rl --method frd --grid" in head and "frd cls --method" in head
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), "a date"
    assert not re.search(r"`[0-9a-f]{7,40}`", text), "a commit hash"
    assert not re.search(r"\.\./shared|SPEC\s§", text), "a path or section outside the repository"
    assert not re.search(r"\[(seed|ours|inferred)\b", text), "an undefined tag"


@pytest.mark.parametrize("document", PACKAGE_READMES, ids=lambda p: str(p.relative_to(REPO)))
def test_a_package_readme_s_module_table_lists_every_module_beside_it(document):
    """The first column of its table rows names modules (``a.py``, or several: ``a.py``, ``b.py``)."""
    listed = {name for line in document.read_text().splitlines() if line.startswith("| `")
              for name in re.findall(r"`([\w]+\.py)`", line.split("|")[1])}
    present = {p.name for p in document.parent.glob("*.py") if p.name not in ("__init__.py", "__main__.py")}
    assert listed == present, f"missing: {sorted(present - listed)}, gone: {sorted(listed - present)}"


def _q(x: float) -> str:
    return f"{x:,.0f}"


def test_the_readme_headlines_equal_the_csvs():
    text = readme()
    agents = pd.read_csv(RESULTS / "seed_study_agents.csv").set_index(["method", "agents"])
    two = agents.xs(2, level="agents")
    frd_up, pd_up = two.loc["frd", "bits_up_per_agent_round"], two.loc["pd", "bits_up_per_agent_round"]
    assert f"{frd_up / pd_up:.0%}".replace("%", " %") in text
    assert f"({_q(frd_up)} vs {_q(pd_up)} bits)" in text
    episodes = {m: round(two.loc[m, "mission_episodes_median"]) for m in ("frd", "pd", "independent")}
    assert f"({episodes['frd']} vs {episodes['pd']} episodes)" in text and f"faster still ({episodes['independent']})" in text
    grid = pd.read_csv(RESULTS / "seed_study_grid.csv").set_index("grid")
    up5, up50 = grid.loc[5, "bits_up_per_agent_round"], grid.loc[50, "bits_up_per_agent_round"]
    assert f"falls {up50 / up5:.0f}× ({_q(up50)} → {_q(up5)} bits)" in text
    mission = grid["mission_episodes_median"].round().astype(int)
    assert f"({mission[50]} → {mission[5]} episodes)" in text
    mix = pd.read_csv(RESULTS / "mix2fld_summary.csv")
    cell = mix[(mix["partition"] == "non-IID") & (mix["channel"] == "asym. FDMA")].set_index("label")
    best = cell.loc["Mix2FLD (50,100)"]
    assert f"reaches {100 * best['local_accuracy']:.1f} %" in text
    assert f"FL's {100 * cell.loc['FL', 'local_accuracy']:.1f} %" in text
    assert f"{best['uplink_ratio_vs_fl']:.1f}× less uplink" in text
    distill = pd.read_csv(RESULTS / "distill_summary.csv").query("alpha == 0.01").set_index("method")["last5_acc"]
    assert (f"FedDualMatch holds {100 * distill['feddualmatch']:.1f} %" in text
            and f"FedAvg falls to {100 * distill['fl']:.1f} % and FedDM to {100 * distill['feddm']:.1f} %" in text)
    throughput = pd.read_csv(RESULTS / "throughput.csv").query("variant == 'borrowed' and runner == 'frd population'")
    ratios = throughput[throughput["lanes"].isin([64, 256])]["ratio_cpu"]
    assert f"{ratios.min():.0f}–{ratios.max():.0f}× more CartPole env steps" in text
    mission = pd.read_csv(RESULTS / "mission_cli.csv")["ratio_cpu"]
    assert f"{mission.min():.0f}–{mission.max():.0f}× less CPU time" in text


def test_the_sb3_report_table_equals_the_csv():
    text = (REPO / "benchmarks" / "reports" / "throughput-sb3.md").read_text()
    rows = pd.read_csv(RESULTS / "throughput.csv").query("variant == 'borrowed'")
    for runner, lanes in (("SB3 A2C (8 envs)", 8), ("frd population", 8), ("frd population", 64), ("frd population", 256)):
        cell = rows[(rows["runner"] == runner) & (rows["lanes"] == lanes)]
        rates = f"{_q(cell['steps_per_cpu_s'].min())}–{_q(cell['steps_per_cpu_s'].max())}"
        assert f"| {runner} | {lanes} | {rates} |" in text
        if runner != "SB3 A2C (8 envs)":
            assert f"{cell['ratio_cpu'].min():.1f}–{cell['ratio_cpu'].max():.1f}×" in text

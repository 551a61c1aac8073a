"""benchmarks.sharing_replication on hand-made summaries: which verdicts held, and what each became."""
import pandas as pd
import pytest

from benchmarks import sharing_replication


def summary(rows: list[tuple[str, tuple[float, float, float], tuple[float, float, float]]]) -> pd.DataFrame:
    """A sharing_summary.csv of one cell: (variant, first agent P/lo/hi, every agent P/lo/hi) per row,
    after the baseline's row (which has no P)."""
    frame = [dict(env="acrobot", agents=2, population="homogeneous", variant="independent")]
    for variant, first, every in rows:
        row = dict(env="acrobot", agents=2, population="homogeneous", variant=variant)
        for name, (p, lo, hi) in (("first agent", first), ("every agent", every)):
            row |= {f"{name} P(better)": p, f"{name} P lo": lo, f"{name} P hi": hi}
        frame.append(row)
    return pd.DataFrame(frame)


ORIGINAL = summary([("frl", (0.5, 0.3, 0.7), (0.75, 0.58, 0.90)),
                    ("pd", (0.2, 0.05, 0.35), (0.40, 0.20, 0.60)),
                    ("frd", (0.6, 0.4, 0.8), (0.6, 0.4, 0.8))])
REPLICATION = summary([("frl", (0.5, 0.3, 0.7), (0.58, 0.40, 0.77)),   # every agent: helps -> –
                       ("pd", (0.25, 0.1, 0.45), (0.30, 0.10, 0.49)),  # first held (hurts); every: – -> hurts
                       ("mixfrd", (0.1, 0.0, 0.2), (0.1, 0.0, 0.2))])  # only here: not compared


def test_verdicts_are_compared_per_variant_and_measure_and_the_fates_counted():
    pairs = sharing_replication.compare(ORIGINAL, REPLICATION)
    assert len(pairs) == 4  # frl and pd, two measures each; the baseline and the unshared rows left out
    fate = {(r["variant"], r["measure"]): (r["verdict original"], r["verdict replication"]) for _, r in pairs.iterrows()}
    assert fate == {("frl", "first agent"): ("–", "–"), ("frl", "every agent"): ("helps", "–"),
                    ("pd", "first agent"): ("hurts", "hurts"), ("pd", "every agent"): ("–", "hurts")}
    text = sharing_replication.report(pairs)
    assert text.startswith("2 of 4 verdicts the same.")
    assert "| helps | – | 1 |" in text and "| – | hurts | 1 |" in text and "| hurts | hurts | 1 |" in text
    assert "| acrobot | 2 | homogeneous | frl | every agent | 0.75 [0.58–0.90] helps | 0.58 [0.40–0.77] – |" in text
    # frl's helps (P 0.75) and pd's hurts (P 0.2) are both 0.25-0.3 from no effect; one held
    assert "| P ≤ 0.15 or ≥ 0.85 | 0 | 0 |\n| P 0.15–0.3 or 0.7–0.85 | 2 | 1 |\n| P 0.3–0.7 | 0 | 0 |" in text


def test_the_command_writes_table_report_and_figure_into_the_replication_folder(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ORIGINAL.to_csv(tmp_path / "a" / "sharing_summary.csv", index=False)
    REPLICATION.to_csv(tmp_path / "b" / "sharing_summary.csv", index=False)
    sharing_replication.main(["--original", str(tmp_path / "a"), "--replication", str(tmp_path / "b")])
    assert len(pd.read_csv(tmp_path / "b" / "replication.csv")) == 4
    assert (tmp_path / "b" / "replication.md").read_text().startswith("2 of 4")
    assert (tmp_path / "b" / "replication.png").stat().st_size > 0
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["sharing_summary.csv"]


def test_a_missing_summary_is_named(tmp_path):
    with pytest.raises(SystemExit, match="no .*sharing_summary.csv"):
        sharing_replication.main(["--original", str(tmp_path), "--replication", str(tmp_path)])


def test_summaries_of_different_cells_are_refused(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ORIGINAL.to_csv(tmp_path / "a" / "sharing_summary.csv", index=False)
    REPLICATION.assign(env="cartpole").to_csv(tmp_path / "b" / "sharing_summary.csv", index=False)
    with pytest.raises(SystemExit, match="share no cell"):
        sharing_replication.main(["--original", str(tmp_path / "a"), "--replication", str(tmp_path / "b")])
    assert not (tmp_path / "b" / "replication.csv").exists()

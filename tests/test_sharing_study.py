"""benchmarks.sharing_study at a tiny budget: one cell runs every variant, and ``--report-only``
tabulates what is finished without running or creating anything."""
import sys

import pandas as pd
import pytest

from benchmarks import sharing_study


def study(monkeypatch, tmp_path, *flags: str) -> None:
    argv = ["sharing_study", "--seeds", "2", "--envs", "cartpole", "--agents", "2", "--max-episodes", "3",
            "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out"), "--no-progress", *flags]
    monkeypatch.setattr(sys, "argv", argv)
    sharing_study.main()


def test_a_cell_runs_every_variant_a_chunk_of_seeds_at_a_time_and_report_only_leaves_unfinished_cells_out(
        monkeypatch, tmp_path):
    batches = []
    run_experiment = sharing_study.run_experiment

    def spy(config, out, **kwargs):
        batches.append((out.name, config.seeds))
        return run_experiment(config, out, **kwargs)

    monkeypatch.setattr(sharing_study, "run_experiment", spy)
    study(monkeypatch, tmp_path, "--populations", "homogeneous", "--chunk", "1")
    assert batches == [(folder, seeds) for folder in ("default", "steps", "better", "steps+better") for seeds in (1, 2)]
    table = pd.read_csv(tmp_path / "out" / "sharing_summary.csv")
    assert table["variant"].tolist() == sharing_study.ORDER
    assert (table["runs"] == 2).all() and table["first agent IQM"].between(1, 3).all()
    assert (tmp_path / "out" / "sharing.png").exists()
    assert not (tmp_path / "out" / "sharing_cost.png").exists()  # 3 episodes: no round, nothing sent

    (tmp_path / "out" / "sharing_summary.csv").unlink()
    study(monkeypatch, tmp_path, "--populations", "homogeneous", "rlcode", "--report-only")
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "out" / "sharing_summary.csv"), table)
    assert not (tmp_path / "work" / "cartpole-2agents-rlcode").exists()


def test_the_wire_column_is_the_median_runs_megabytes_per_agent(tmp_path):
    runs = pd.DataFrame(dict(
        env="cartpole", agents=2, population="homogeneous", variant=["independent"] * 3 + ["pd"] * 3,
        agents_completed=2, mission_episodes=[10, 20, 30, 5, 15, 25], all_agents_episodes=[40, 50, 60, 30, 40, 50],
        bits_up=[0, 0, 0, 8e6, 16e6, 40e6], bits_down=[0, 0, 0, 8e6, 16e6, 8e6]))
    table = sharing_study.summarise(runs).set_index("variant")
    # per agent: (8+8)/2 = 8 Mbit = 1 MB, (16+16)/2 = 2 MB, (40+8)/2 = 3 MB -> median 2 MB
    assert table.loc["pd", "wire_mb_per_agent"] == 2.0 and table.loc["independent", "wire_mb_per_agent"] == 0.0
    assert sharing_study.markdown(table.reset_index()).splitlines()[-1].endswith("| – / – | 2 |")
    sharing_study.plot_cost(table.reset_index(), tmp_path / "cost.png")
    assert (tmp_path / "cost.png").stat().st_size > 0


def test_report_only_without_a_finished_cell_says_so(monkeypatch, tmp_path):
    with pytest.raises(SystemExit, match="no finished cell to report"):
        study(monkeypatch, tmp_path, "--populations", "widths", "--report-only")


def test_a_chunk_below_one_is_refused_before_anything_runs(monkeypatch, tmp_path, capsys):
    with pytest.raises(SystemExit):
        study(monkeypatch, tmp_path, "--chunk", "0")
    assert "--chunk must be at least 1, got 0" in capsys.readouterr().err
    assert not (tmp_path / "work").exists()

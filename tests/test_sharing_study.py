"""benchmarks.sharing_study at a tiny budget: one cell runs every variant into the record, a
fresh checkout (the record without the raw runs) goes on where it stopped, and ``--report-only``
tabulates what is finished without running or creating anything."""
import shutil
import sys
import threading

import pandas as pd
import pytest

from benchmarks import sharing_study


def study(monkeypatch, tmp_path, *flags: str) -> None:
    argv = ["sharing_study", "--seeds", "2", "--envs", "cartpole", "--agents", "2", "--max-episodes", "3",
            "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out"), "--no-progress", *flags]
    monkeypatch.setattr(sys, "argv", argv)
    sharing_study.main()


def spy_on_batches(monkeypatch) -> list[tuple[str, int, int]]:
    """(folder, first seed, seeds) of every batch run_experiment is asked for."""
    batches = []
    run_experiment = sharing_study.run_experiment

    def spy(config, out, **kwargs):
        batches.append((out.parent.name, config.first_seed, config.seeds))
        return run_experiment(config, out, **kwargs)

    monkeypatch.setattr(sharing_study, "run_experiment", spy)
    return batches


def test_a_cell_runs_every_variant_a_chunk_of_seeds_at_a_time_into_the_record_which_a_fresh_checkout_resumes(
        monkeypatch, tmp_path):
    batches = spy_on_batches(monkeypatch)
    study(monkeypatch, tmp_path, "--populations", "homogeneous", "--chunk", "1")
    assert batches == [(folder, seed, 1) for folder in sharing_study.FOLDERS for seed in (0, 1)]
    table = pd.read_csv(tmp_path / "out" / "sharing_summary.csv")
    assert table["variant"].tolist() == sharing_study.ORDER
    assert (table["runs"] == 2).all() and table["first agent IQM"].between(1, 3).all()
    assert (tmp_path / "out" / "sharing.png").exists()
    assert not (tmp_path / "out" / "sharing_cost.png").exists()  # 3 episodes: no round, nothing sent
    record = pd.read_csv(tmp_path / "out" / "sharing_runs.csv")
    assert len(record) == 2 * len(sharing_study.ORDER) and (record["max_episodes"] == 3).all()
    assert record["code"].str.fullmatch("[0-9a-f]{16}").all() and record["torch"].notna().all()  # where it ran

    # a fresh checkout: the record committed, the raw runs gone; nothing runs again, same report
    shutil.rmtree(tmp_path / "work")
    (tmp_path / "out" / "sharing_summary.csv").unlink()
    batches.clear()
    study(monkeypatch, tmp_path, "--populations", "homogeneous", "--chunk", "5")
    assert batches == [] and not (tmp_path / "work").exists()
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "out" / "sharing_summary.csv"), table)
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "out" / "sharing_runs.csv"), record)


def test_only_the_seeds_the_record_lacks_run_in_the_chosen_folders_and_a_partial_cell_is_left_out(
        monkeypatch, tmp_path, capsys):
    batches = spy_on_batches(monkeypatch)
    with pytest.raises(SystemExit, match="no finished cell to report"):
        study(monkeypatch, tmp_path, "--populations", "rlcode", "--variants", "steps")
    assert batches == [("steps", 0, 2)]
    record = pd.read_csv(tmp_path / "out" / "sharing_runs.csv")
    record = record[record["seed"] == 1]
    record.to_csv(tmp_path / "out" / "sharing_runs.csv", index=False)  # seed 0 lost
    shutil.rmtree(tmp_path / "work")
    with pytest.raises(SystemExit, match="no finished cell to report"):
        study(monkeypatch, tmp_path, "--populations", "rlcode", "--variants", "steps", "better", "--chunk", "1")
    assert batches[1:] == [("steps", 0, 1), ("better", 0, 1), ("better", 1, 1)]
    assert "cartpole-2agents-rlcode: 8 of 22 runs, left out" in capsys.readouterr().out
    merged = pd.read_csv(tmp_path / "out" / "sharing_runs.csv")
    assert sorted(zip(merged["variant"], merged["seed"])) == [
        (f"{m} {k}", s) for m in ("frd", "pd") for k in ("better", "steps") for s in (0, 1)]
    # the rows already recorded stay as they were
    pd.testing.assert_frame_equal(merged[merged["seed"] == 1].iloc[:2].reset_index(drop=True),
                                  record.reset_index(drop=True))


def test_a_cell_with_its_independent_runs_done_is_reported_with_the_variants_that_are_done(
        monkeypatch, tmp_path, capsys):
    study(monkeypatch, tmp_path, "--populations", "widths", "--variants", "default")
    table = pd.read_csv(tmp_path / "out" / "sharing_summary.csv")
    assert table["variant"].tolist() == ["independent", "pd", "frd", "mixfrd"]  # widths: no FRL
    assert ("cartpole-2agents-widths: pd steps, frd steps, pd better, frd better, pd steps+better, "
            "frd steps+better unfinished, left out") in capsys.readouterr().out


def test_a_batch_another_process_holds_is_left_to_it(monkeypatch, tmp_path):
    batches = spy_on_batches(monkeypatch)
    held = tmp_path / "work" / "cartpole-2agents-rlcode" / "steps" / "seeds0-0"
    with sharing_study.locked(held, wait=False) as mine:
        assert mine
        with sharing_study.locked(held, wait=False) as theirs:
            assert not theirs
        with pytest.raises(SystemExit, match="no finished cell to report"):
            study(monkeypatch, tmp_path, "--populations", "rlcode", "--variants", "steps", "--chunk", "1")
    assert batches == [("steps", 1, 1)]
    assert sorted(set(pd.read_csv(tmp_path / "out" / "sharing_runs.csv")["seed"])) == [1]


def test_consecutive_seeds_are_batched_up_to_the_chunk():
    assert sharing_study.consecutive([0, 1, 2, 3, 5, 6, 9], 3) == [range(0, 3), range(3, 4), range(5, 7), range(9, 10)]
    assert sharing_study.consecutive([], 5) == []


def test_merging_into_the_record_from_two_threads_loses_no_run(tmp_path):
    path = tmp_path / "sharing_runs.csv"
    rows = [pd.DataFrame(dict(env="acrobot", agents=8, population="rlcode", variant="pd", seed=[s], max_episodes=1000))
            for s in range(40)]
    threads = [threading.Thread(target=lambda part=part: [sharing_study.merge_into_record(path, r) for r in part])
               for part in (rows[::2], rows[1::2])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(pd.read_csv(path)["seed"]) == list(range(40))


def test_a_record_of_another_episode_cap_is_refused_before_anything_runs(monkeypatch, tmp_path):
    (tmp_path / "out").mkdir()
    pd.DataFrame(dict(env="cartpole", agents=2, population="rlcode", variant="pd", seed=[0], max_episodes=1000)).to_csv(
        tmp_path / "out" / "sharing_runs.csv", index=False)
    with pytest.raises(SystemExit, match="records runs capped at 1000 episodes, not 3; use another --out"):
        study(monkeypatch, tmp_path, "--populations", "rlcode")
    assert not (tmp_path / "work").exists()


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

"""``frd cls``: bad input is one clear line (exit 2); good input a table, tables and a plot."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from frd.classification import data as data_module
from frd.cli import main

TINY = ["--seeds", "1", "--rounds", "2", "--iterations", "2", "--devices", "3", "--no-progress"]


@pytest.mark.parametrize("args, message", [
    (["--dataset", "mnist", "--data-dir", "{tmp}/none"], "MNIST files not found in"),
    (["--partition", "dirichlet", "--alpha", "0"], "--alpha must be > 0"),
    (["--partition", "dirichlet", "--alpha", "-0.5"], "--alpha must be > 0"),
    (["--devices", "5000"], "cannot give 5000 devices"),
    (["--samples-per-device", "500"], "needs 150 samples of label"),
    (["--model", "cnn"], "too small for the cnn model"),
    (["--reference-device", "3"], "--reference-device must be a device index in 0..2"),
    (["--rounds", "0"], "--rounds must be at least 1"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path, capsys):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert main(["cls", *TINY, *args, "--out", str(tmp_path / "out")]) == 2  # later flags win
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize("args, message", [
    (["--dataset", "imagenet"], "invalid choice: 'imagenet'"),
    (["--alpha", "half"], "invalid float value"),
    (["--channel-opt", "p_up_dbm"], "expected NAME=VALUE"),
])
def test_unknown_names_are_refused_by_the_parser_in_one_line(args, message, capsys):
    assert main(["cls", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_download_without_network_is_one_clean_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(data_module, "MNIST_MIRRORS", ("http://127.0.0.1:9/",))
    assert main(["cls", "--dataset", "mnist", "--download", "--data-dir", str(tmp_path), *TINY,
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "could not download t10k-images-idx3-ubyte.gz" in err and err.count("\n") == 1


def test_a_run_prints_the_summary_and_saves_tables_config_and_plot(tmp_path, capsys):
    out = tmp_path / "fd"
    assert main(["cls", "--method", "fd", *TINY, "--seeds", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "up bits/dev/round" in printed and "3200" in printed
    for name in ("runs.csv", "rounds.csv", "ledger.csv", "config.json", "accuracy.png"):
        assert (out / name).stat().st_size > 0
    rounds = pd.read_csv(out / "rounds.csv")
    assert list(rounds.columns) == ["run_id", "seed", "round", "phase", "device", "iteration", "accuracy", "loss",
                                    "compute_s", "comm_s", "sim_s"]
    assert sorted(rounds["seed"].unique()) == [0, 1] and len(rounds) == 2 * (1 + 2 * 2)
    phases = rounds[rounds["seed"] == 0][["round", "phase"]].values.tolist()
    assert phases == [[0, "exchanged"], [1, "local"], [1, "exchanged"], [2, "local"], [2, "exchanged"]]
    runs = pd.read_csv(out / "runs.csv")
    last = rounds[(rounds["round"] == 2) & (rounds["seed"] == 0)].set_index("phase")["accuracy"]
    assert runs.loc[0, "local_accuracy"] == last["local"] and runs.loc[0, "accuracy"] == last["exchanged"]
    assert json.loads((out / "config.json").read_text())["config"]["method"] == "fd"
    # resuming: the same command reruns nothing and keeps the rows
    assert main(["cls", "--method", "fd", *TINY, "--seeds", "2", "--out", str(out)]) == 0
    assert pd.read_csv(out / "rounds.csv").equals(rounds)


def test_paper_flag_starts_from_the_paper_values(tmp_path):
    from frd.classification.cli import config_from_args
    from frd.cli import build_parser

    args = build_parser().parse_args(["cls", "--paper", "--rounds", "3", "--out", str(tmp_path)])
    config = config_from_args(args)
    assert (config.dataset, config.samples_per_device, config.iterations_per_round, config.rounds) == ("mnist", 500, 400, 3)

"""TensorBoard events (frd.tensorboard), read back with TensorBoard's own reader and held to the CSVs."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tensorboard.backend.event_processing import event_accumulator  # the extra: make test installs it
from tensorboard.plugins.hparams import plugin_data_pb2

from frd.cli import main
from frd.errors import FrdError
from frd.tensorboard import export, live_logger
from tests.test_architecture import CLS_TINY, RL_TINY


def _events(folder: Path) -> dict[str, dict]:
    """One TensorBoard run as read back: {scalar tag: {step: value}}, ``text``: {step: the config text},
    ``hparams``: {name: value}."""
    reader = event_accumulator.EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    reader.Reload()
    events: dict[str, dict] = {tag: {e.step: e.value for e in reader.Scalars(tag)} for tag in reader.Tags()["scalars"]}
    events["text"] = {e.step: e.tensor_proto.string_val[0].decode() for e in reader.Tensors("config/text_summary")}
    start = plugin_data_pb2.HParamsPluginData.FromString(reader.PluginTagToContent("hparams")["_hparams_/session_start_info"])
    events["hparams"] = {name: getattr(v, v.WhichOneof("kind")) for name, v in start.session_start_info.hparams.items()}
    return events


def _as_logged(values: pd.Series) -> dict[int, float]:
    """What TensorBoard stores of a series: float32 per step."""
    return {int(step): float(np.float32(v)) for step, v in values.items()}


def _bits(ledger: pd.DataFrame, direction: str) -> dict[int, float]:
    """Bits of one direction per round that has any transfer (0 where none went that way)."""
    mine = ledger[ledger["direction"] == direction].groupby("round")["bits"].sum()
    return _as_logged(mine.reindex(sorted(ledger["round"].unique()), fill_value=0))


@pytest.fixture(scope="module")
def rl(tmp_path_factory):
    """One FRD run (episodes, distillation rounds, ledger), logged live and exported afterwards."""
    tmp = tmp_path_factory.mktemp("rl")
    assert main(["rl", "--method", "frd", *RL_TINY, "--out", str(tmp / "out"), "--tensorboard", str(tmp / "live")]) == 0
    assert main(["export", "tensorboard", str(tmp / "out")]) == 0
    return tmp


@pytest.fixture(scope="module")
def cls(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cls")
    assert main(["cls", "--method", "fd", *CLS_TINY, "--out", str(tmp / "out"), "--tensorboard", str(tmp / "live")]) == 0
    assert main(["export", "tensorboard", str(tmp / "out"), "--logdir", str(tmp / "exported")]) == 0
    return tmp


def test_rl_events_hold_the_scores_mission_average_and_bits_of_the_csvs(rl):
    events = _events(rl / "out" / "tensorboard" / "frd" / "seed0")
    episodes, ledger = pd.read_csv(rl / "out" / "episodes.csv"), pd.read_csv(rl / "out" / "ledger.csv")
    for agent, rows in episodes.groupby("agent"):
        scores = rows.sort_values("episode").set_index("episode")["score"]
        assert events[f"score/agent{agent}"] == _as_logged(scores)
        assert events[f"mission_average/agent{agent}"] == _as_logged(scores.rolling(10, min_periods=1).mean())
    assert events["bits/up"] == _bits(ledger, "up") and events["bits/down"] == _bits(ledger, "down")
    runs = pd.read_csv(rl / "out" / "runs.csv")
    assert sum(events["bits/up"].values()) == runs["bits_up"].iloc[0] > 0
    assert events["run/mission_episodes"] == {0: 8.0}
    rounds = pd.read_csv(rl / "out" / "rounds.csv")
    assert events["distill/loss_after/agent0"] == _as_logged(rounds[rounds["agent"] == 0].set_index("round")["loss_after"])
    assert '"grid": 30' in events["text"][0] and "frd, seed 0" in events["text"][0]
    assert events["hparams"]["method"] == "frd" and events["hparams"]["seed"] == 0 and events["hparams"]["option.grid"] == 30


def test_classification_events_hold_accuracy_per_round_and_phase_and_bits(cls):
    events = _events(cls / "exported" / "fd" / "seed0")
    rounds, ledger = pd.read_csv(cls / "out" / "rounds.csv"), pd.read_csv(cls / "out" / "ledger.csv")
    for phase in ("local", "exchanged"):
        device0 = rounds[(rounds["phase"] == phase) & (rounds["device"] == 0)].set_index("round")["accuracy"]
        assert events[f"accuracy/{phase}/device0"] == _as_logged(device0)
    assert sorted(events["accuracy/exchanged/device0"]) == [0, 1, 2] and sorted(events["accuracy/local/device0"]) == [1, 2]
    assert events["bits/up"] == _bits(ledger, "up") and events["bits/down"] == _bits(ledger, "down")
    assert '"beta": 0.01' in events["text"][0]
    assert events["hparams"]["method"] == "fd" and events["hparams"]["option.beta"] == 0.01


@pytest.mark.parametrize("domain", ["rl", "cls"])
def test_live_logging_writes_what_the_export_writes(domain, request):
    tmp = request.getfixturevalue(domain)
    exported = tmp / "out" / "tensorboard" if domain == "rl" else tmp / "exported"
    folders = sorted(p.relative_to(tmp / "live") for p in (tmp / "live").glob("*/*"))
    assert folders == sorted(p.relative_to(exported) for p in exported.glob("*/*")) and folders
    for folder in folders:
        assert _events(tmp / "live" / folder) == _events(exported / folder)


def test_an_experiment_record_exports_each_cell_as_its_sweep_logs_it_live(tmp_path, capsys):
    record = tmp_path / "sweep"
    assert main(["rl", "--method", "frd", "--grid", "5,10", *RL_TINY, "--out", str(record),
                 "--tensorboard", str(tmp_path / "live")]) == 0
    capsys.readouterr()
    assert main(["export", "tensorboard", str(record), "--logdir", str(tmp_path / "exported")]) == 0
    assert capsys.readouterr().out.startswith("2 runs written to ")
    folders = sorted(p.relative_to(tmp_path / "live") for p in (tmp_path / "live").glob("*/*/*"))
    assert [str(f) for f in folders] == ["grid=10/frd/seed0", "grid=5/frd/seed0"]
    assert sorted(p.relative_to(tmp_path / "exported") for p in (tmp_path / "exported").glob("*/*/*")) == folders
    for folder in folders:
        assert _events(tmp_path / "live" / folder) == _events(tmp_path / "exported" / folder)


def test_a_second_export_replaces_the_events(cls):
    assert main(["export", "tensorboard", str(cls / "out"), "--logdir", str(cls / "exported")]) == 0
    assert len(list((cls / "exported" / "fd" / "seed0").glob("events.out.tfevents.*"))) == 1


def test_without_the_extra_both_ways_in_stop_before_writing(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # find_spec then reports it missing
    with pytest.raises(FrdError, match=r"install frd\[tensorboard\]"):
        live_logger(tmp_path / "tb", lambda tables, common: [])
    with pytest.raises(FrdError, match=r"install frd\[tensorboard\]"):
        export(tmp_path)
    out = tmp_path / "out"
    for command in (["cls", "--method", "fd", *CLS_TINY], ["rl", "--method", "frd", *RL_TINY]):
        assert main([*command, "--out", str(out), "--tensorboard", str(tmp_path / "tb")]) == 2
        assert "install frd[tensorboard]" in capsys.readouterr().err
        assert not out.exists() and not (tmp_path / "tb").exists()


def test_exporting_a_folder_that_is_not_a_results_folder_is_one_line(tmp_path, capsys):
    assert main(["export", "tensorboard", str(tmp_path)]) == 2
    assert "holds neither an experiment (experiment.toml) nor results (config.json)" in capsys.readouterr().err
    assert not (tmp_path / "tensorboard").exists()

"""The architecture's promises: a method is one file plus one registry line, its options are
its own flags and part of the resume key, strategies keep state across rounds, and nothing is
written before the input is checked."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from plugin_methods import KeepShareFL, PartialFRL

from frd.classification.methods import CLS_METHODS
from frd.cli import main
from frd.rl.config import rl_config
from frd.rl.methods import RL_METHODS
from frd.rl.runner import RLBatch

RL_TINY = ["--agents", "2", "--seeds", "1", "--max-episodes", "8", "--period", "2", "--hidden", "8", "--no-progress"]
CLS_TINY = ["--seeds", "1", "--rounds", "2", "--iterations", "2", "--devices", "3", "--no-progress"]


@pytest.fixture
def plugins(monkeypatch):
    monkeypatch.setitem(RL_METHODS, "frl-partial", PartialFRL)  # the one registry line of each
    monkeypatch.setitem(CLS_METHODS, "fl-keep", KeepShareFL)


def _saved(out: Path) -> dict:
    return json.loads((out / "config.json").read_text())


def test_a_new_rl_method_runs_through_the_cli_with_its_flag(plugins, tmp_path, capsys):
    out = tmp_path / "rl"
    assert main(["rl", "--method", "frl-partial", "--partial-mix", "0.25", *RL_TINY, "--out", str(out)]) == 0
    saved = _saved(out)
    assert saved["config"]["options"]["frl-partial"] == {"critic": False, "partial_mix": 0.25}
    assert saved["resume_key"]["methods"]["frl-partial"] == {"critic": False, "partial_mix": 0.25}
    assert pd.read_csv(out / "runs.csv")["rounds"].iloc[0] == 3  # after episodes 2, 4, 6; 8 is the cap
    capsys.readouterr()
    assert main(["rl", "--method", "frl-partial", "--partial-mix", "0.5", *RL_TINY, "--out", str(out)]) == 2
    assert "different experiment" in capsys.readouterr().err


def test_a_new_classification_method_runs_through_the_cli_with_its_flag(plugins, tmp_path, capsys):
    out = tmp_path / "cls"
    assert main(["cls", "--method", "fl-keep", "--keep-share", "0.5", *CLS_TINY, "--out", str(out)]) == 0
    saved = _saved(out)
    assert saved["config"]["options"] == {"keep_share": 0.5}
    assert saved["resume_key"]["methods"] == {"fl-keep": {"keep_share": 0.5}}
    assert main(["cls", "--method", "fl-keep", "--keep-share", "1.5", *CLS_TINY, "--out", str(tmp_path / "x")]) == 2
    assert "--keep-share must lie in [0, 1), got 1.5" in capsys.readouterr().err
    assert not (tmp_path / "x").exists(), "bad input writes nothing"


@pytest.mark.parametrize("args, message", [
    (["rl", "--method", "pd", "--proxy-layout", "compact"], "--proxy-layout is an option of frd, mixfrd, not of pd"),
    (["compare", "--methods", "independent,frl", "--distill-lr", "0.1"],
     "--distill-lr is an option of pd, frd, mixfrd, not of independent, frl"),
    (["cls", "--method", "fl", "--beta", "0.1"], "--beta is an option of fd, not of fl"),
    (["cls", "--method", "fd", "--gamma", "0.3"], "--gamma is an option of mixfld, mix2fld, not of fd"),
])
def test_a_flag_of_another_method_is_a_clear_error(args, message, tmp_path, capsys):
    assert main([*args, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_an_rl_strategy_keeps_state_across_rounds(plugins):
    batch = RLBatch(rl_config("frl-partial", agents=2, max_episodes=9, period=3, hidden=8, target=1e9),
                    [("frl-partial", 0)])
    list(batch.run())
    run = batch.runs[0]
    assert run.strategy.rounds_seen == run.rounds == 2  # after episodes 3 and 6; 9 is the cap
    steps = batch.env_steps[run.lanes]
    assert run.strategy.updates_seen >= max(steps) // 8, "the learner hook sees every update"


def test_a_missing_dataset_leaves_nothing_that_blocks_the_fixed_rerun(mnist_dir, tmp_path, capsys):
    out = str(tmp_path / "fd")
    base = ["cls", "--method", "fd", "--dataset", "mnist", "--seeds", "1", *CLS_TINY, "--out", out]
    assert main([*base, "--data-dir", str(tmp_path / "nowhere")]) == 2
    assert "MNIST files not found" in capsys.readouterr().err
    assert not Path(out).exists()
    assert main([*base, "--data-dir", str(mnist_dir)]) == 0
    first = pd.read_csv(Path(out) / "rounds.csv")
    assert pd.read_csv(Path(out) / "runs.csv")["samples"].iloc[0] == 300, "the 300 training images the fixture wrote"
    assert main(base) == 0, "the default path to the same files resumes the same experiment"
    pd.testing.assert_frame_equal(pd.read_csv(Path(out) / "rounds.csv"), first)


def test_study_grids_build_a_config_for_every_method():
    """The studies give one set of values to every method; each keeps the options it has."""
    from frd.classification.methods import study_config

    scaled = dict(dataset="mnist", partition="dirichlet", devices=10, width=16, iterations_per_round=50,
                  distill_iterations=20, server_epochs=5)  # values some methods have no option for
    for method in CLS_METHODS:
        assert study_config(method, alpha=0.1, **scaled).method == method
    assert study_config("feddm", alpha=0.1, **scaled, init="noise").options.init == "noise"


def test_help_shows_each_option_with_its_docstring_and_methods(capsys):
    assert main(["rl", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "[frd, mixfrd] S: intervals per observation dimension [Seo et al. 2022, §4: 30]. (default 30)" in text
    assert "--frl-critic [yes|no]" in text and "[pd, frd, mixfrd] Exactly this many minibatches" in text

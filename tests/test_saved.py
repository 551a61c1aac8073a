"""Saved agents and models (issue 41, point 6): each run's final networks in OUT/models, bit for bit
those in memory when it ended, the same after a resume, and ``frd eval``, which plays or tests
them again (tiny budgets)."""
from __future__ import annotations

import math
import re
import shutil
import sys
import types
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
import torch

import frd.rl.experiment as experiment
from frd.classification.methods import cls_config
from frd.classification.remote import run_remote
from frd.classification.runner import run_seed
from frd.cli import main
from frd.errors import FrdError
from frd.results import MODELS
from frd.rl.checkpoint import BatchCheckpoint
from frd.rl.config import rl_config
from frd.rl.runner import RLBatch, iter_simulate
from frd.rl.saved import MISSING_VIDEO, _sample, network, play
from frd.saved import EvalRequest, evaluate, read_models
from frd.seeding import Stream, derive_seed
from tests.test_checkpoint import CASES, CUTS, CutOff, Interrupted
from tests.test_remote import Loopback

TINY = dict(agents=2, hidden=8, activation="relu", max_episodes=40, target=35.0, window=3, period=5)
"""Short episodes, some missions completed: the fused path's settings of test_fused."""
RL = ["rl", "--method", "frd", "--agents", "2", "--max-episodes", "12", "--period", "4", "--hidden", "8",
      "--no-progress"]
CLS = ["cls", "--dataset", "digits", "--rounds", "2", "--iterations", "5", "--devices", "3", "--no-progress"]


@pytest.fixture(autouse=True)
def no_figures(monkeypatch):
    """These tests read tables and models; the figures (tested elsewhere) would cost seconds."""
    for target in ("plot_mission", "plot_payload"):
        monkeypatch.setattr(experiment, target, lambda *args, **kwargs: None)
    monkeypatch.setattr("frd.classification.report.plot_accuracy", lambda *args, **kwargs: None)


def _read(data: bytes, tmp_path: Path, name: str = "run.pt"):
    path = tmp_path / name
    path.write_bytes(data)
    return read_models(path)


def _plain(value) -> bool:
    """Only what ``weights_only`` loads without pickled objects: containers of str, numbers, tensors."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(map(_plain, value))
    return value is None or isinstance(value, (str, int, float, bool, torch.Tensor))


# ---- RL: what a run saves ----

def test_saved_agents_are_the_final_weights_in_memory_bit_for_bit(tmp_path):
    config = rl_config("frd", **{**TINY, "agent_spec": "h=8;h=16"})  # two learner groups: the grouped population
    batch = RLBatch(config, [("frd", 0)])
    (tables,) = batch.run()
    saved = _read(tables[MODELS], tmp_path)
    assert _plain(torch.load(saved.path, weights_only=True))
    assert saved.metadata == {"domain": "rl", "run_id": "frd-seed0", "method": "frd", "seed": 0, "env_id": "CartPole-v1",
                              "agents": [0, 1], "networks": {
                                  "agent0.actor": {"sizes": [4, 8, 8, 2], "activation": "relu"},
                                  "agent0.critic": {"sizes": [4, 8, 8, 1], "activation": "relu"},
                                  "agent1.actor": {"sizes": [4, 16, 16, 2], "activation": "relu"},
                                  "agent1.critic": {"sizes": [4, 16, 16, 1], "activation": "relu"}}}
    initial = RLBatch(config, [("frd", 0)]).pop
    for agent in (0, 1):  # one run alone: population row = agent, never compacted
        for role, final, start in (("actor", batch.pop.actor_state(agent), initial.actor_state(agent)),
                                   ("critic", batch.pop.critic_state(agent), initial.critic_state(agent))):
            state = saved.state_dicts[f"agent{agent}.{role}"]
            assert list(state) == ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"]
            for layer in range(3):  # the engine keeps x @ W + b, W [in, out]; nn.Linear W [out, in]
                np.testing.assert_array_equal(state[f"{2 * layer}.weight"].numpy().T, final[f"layer{layer}.weight"])
                np.testing.assert_array_equal(state[f"{2 * layer}.bias"].numpy(), final[f"layer{layer}.bias"][0])
            assert not np.array_equal(final["layer0.weight"], start["layer0.weight"]), "it trained"
    states = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
    rebuilt = torch.softmax(network(saved, "agent1.actor")(torch.from_numpy(states)), -1).detach().numpy()
    np.testing.assert_allclose(rebuilt, batch.pop.policy(1, states), rtol=1e-6)


RUNS = [(method, seed) for seed in range(3) for method in ("independent", "frl", "pd", "frd")]


def _models(config, runs, fused: bool = True) -> dict[str, bytes]:
    batch = RLBatch(config, runs)
    batch.fused = batch.fused and fused
    return {t["runs"]["run_id"].iloc[0]: t[MODELS] for t in batch.run()}


@pytest.mark.parametrize("until", ["first", "all"])
def test_the_final_weights_do_not_depend_on_how_the_lanes_step_or_on_batch_mates(until):
    """A run ends mid-rollout; its weights are those after the update that closes it, whether the
    batch steps a period per call (fused) or a step (lockstep), and whether the run is the last of
    its batch (its lanes then step idle to that update) or shares it."""
    config = rl_config(("independent", "frl", "pd", "frd"), **TINY, until=until)
    fused = _models(config, RUNS)
    assert fused == _models(config, RUNS, fused=False)
    assert len(set(fused.values())) == len(RUNS)
    for run in (("pd", 1), ("frd", 2)):
        assert _models(config, [run], fused=False) == {f"{run[0]}-seed{run[1]}": fused[f"{run[0]}-seed{run[1]}"]}


@pytest.mark.parametrize("case", ["cartpole", "widths"])
def test_a_batch_cut_off_and_resumed_saves_the_uninterrupted_weights(case, tmp_path):
    """test_checkpoint's cut (runs finish before the save, between it and the cut, and after)."""
    values = dict(CASES[case])
    methods = values.pop("methods")
    config = rl_config(methods, agents=2, **values)
    runs = [(m, s) for s in range(3) for m in methods]
    expected = {t["runs"]["run_id"].iloc[0]: t[MODELS] for t in iter_simulate(config, runs)}
    path, before = tmp_path / "checkpoint.pkl", {}
    with pytest.raises(Interrupted):
        for tables in iter_simulate(config, runs, checkpoint=CutOff(path, config, *CUTS[case])):
            before[tables["runs"]["run_id"].iloc[0]] = tables[MODELS]
    todo = [(m, s) for m, s in runs if f"{m}-seed{s}" not in before]
    resumed = iter_simulate(config, todo, checkpoint=BatchCheckpoint(path, config))
    after = {t["runs"]["run_id"].iloc[0]: t[MODELS] for t in resumed}
    assert before and after and {**before, **after} == expected


def test_an_experiment_killed_mid_batch_resumes_to_the_same_model_files(tmp_path, monkeypatch):
    config = rl_config(("independent", "pd"), seeds=3, **TINY, until="all")
    experiment.run_experiment(config, tmp_path / "whole", progress=False)
    monkeypatch.setattr("frd.rl.checkpoint.EVERY", 0.0)
    step, steps = RLBatch.step, []

    def killed_at_its_6th_step(self):
        steps.append(1)
        if len(steps) == 6:
            raise KeyboardInterrupt
        step(self)

    monkeypatch.setattr(RLBatch, "step", killed_at_its_6th_step)
    with pytest.raises(KeyboardInterrupt):
        experiment.run_experiment(config, tmp_path / "cut", progress=False)
    assert (tmp_path / "cut" / "checkpoint.pkl").exists()
    cut_short = sorted(p.name for p in (tmp_path / "cut" / "models").glob("*.pt"))
    experiment.run_experiment(config, tmp_path / "cut", progress=False)
    files = sorted(p.name for p in (tmp_path / "whole" / "models").glob("*.pt"))
    assert len(cut_short) < len(files) == 6
    for name in files:
        assert (tmp_path / "cut" / "models" / name).read_bytes() == (tmp_path / "whole" / "models" / name).read_bytes()


# ---- RL: frd eval ----

def test_eval_with_the_same_seed_gives_the_same_returns(tmp_path, capsys):
    out = tmp_path / "rl"
    assert main([*RL, "--seeds", "2", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["eval", str(out), "--episodes", "4", "--seed", "3"]) == 0
    first = (out / "eval.csv").read_bytes()
    printed = capsys.readouterr().out
    assert "return over 4 episodes (mean ± std), seed 3" in printed and "frd-seed1      1" in printed
    assert main(["eval", str(out), "--episodes", "4", "--seed", "3"]) == 0
    assert (out / "eval.csv").read_bytes() == first
    table = pd.read_csv(out / "eval.csv")
    assert list(table.columns) == ["run_id", "method", "seed", "agent", "episodes", "eval_seed", "greedy_mean",
                                   "greedy_std", "sampled_mean", "sampled_std"]
    assert table[["run_id", "agent"]].values.tolist() == [["frd-seed0", 0], ["frd-seed0", 1], ["frd-seed1", 0],
                                                          ["frd-seed1", 1]]
    assert main(["eval", str(out), "--episodes", "4", "--seed", "4"]) == 0
    other = pd.read_csv(out / "eval.csv")
    assert not other[["greedy_mean", "sampled_mean"]].equals(table[["greedy_mean", "sampled_mean"]])


class Push(torch.nn.Module):
    """An actor that always prefers action 1 (push right), two to one."""

    def forward(self, x):
        return torch.tensor([0.0, math.log(2.0)]).expand(len(x), 2)


def test_episodes_start_from_their_seeded_states_and_play_as_written_by_hand():
    expected = []
    for k in range(3):  # greedy: always action 1, on the episode's own first state
        env = gym.make("CartPole-v1")
        env.reset(seed=derive_seed(5, k, Stream.RL_EVAL_STATES))
        total, over = 0.0, False
        while not over:
            _, reward, terminated, truncated, _ = env.step(1)
            total, over = total + reward, terminated or truncated
        expected.append(total)
    assert play("CartPole-v1", Push(), 3, 5, greedy=True).tolist() == expected
    assert len(set(expected)) > 1, "different first states"
    logits = np.array([0.0, math.log(3.0)])  # probabilities 1/4, 3/4
    assert [_sample(logits, u) for u in (0.0, 0.2, 0.2499, 0.2501, 0.9, 0.999999)] == [0, 0, 0, 1, 1, 1]
    sampled = play("CartPole-v1", Push(), 3, 5, greedy=False)
    assert sampled.tolist() == play("CartPole-v1", Push(), 3, 5, greedy=False).tolist()


def test_an_agent_trained_until_it_completed_the_mission_scores_at_least_475_greedy(tmp_path, capsys):
    """One agent, seed 1: the mission (mean of its latest 10 training episodes ≥ 490) at episode
    269. Not every completing agent plays this well greedily (README: 16 of 19 measured)."""
    out = tmp_path / "trained"
    assert main(["rl", "--method", "independent", "--agents", "1", "--seeds", "1", "--first-seed", "1",
                 "--max-episodes", "600", "--no-progress", "--out", str(out)]) == 0
    run = pd.read_csv(out / "runs.csv").iloc[0]
    assert run["completed"] and run["mission_episodes"] < 600
    assert main(["eval", str(out), "--episodes", "20"]) == 0
    scores = pd.read_csv(out / "eval.csv").iloc[0]
    assert scores["greedy_mean"] >= 475 and scores["sampled_mean"] >= 475, scores


class FakeClip:
    """moviepy's ``ImageSequenceClip`` as RecordVideo uses it: the file holds the frames' count and shape."""

    def __init__(self, frames, fps):
        self.frames = frames

    def write_videofile(self, path, logger=None):
        Path(path).write_text(f"{len(self.frames)} frames of {self.frames[0].shape}")


def test_video_records_each_agents_first_greedy_episode(tmp_path, monkeypatch, capsys):
    pytest.importorskip("pygame")  # CartPole's renderer
    clip = types.ModuleType("moviepy.video.io.ImageSequenceClip")
    clip.ImageSequenceClip = FakeClip  # type: ignore[attr-defined]
    for name in ("moviepy", "moviepy.video", "moviepy.video.io"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, clip.__name__, clip)
    out, videos = tmp_path / "rl", tmp_path / "videos"
    assert main([*RL, "--seeds", "1", "--out", str(out)]) == 0
    assert main(["eval", str(out), "--episodes", "2", "--video", str(videos)]) == 0
    assert sorted(p.name for p in videos.iterdir()) == ["frd-seed0-agent0-episode-0.mp4", "frd-seed0-agent1-episode-0.mp4"]
    without = pd.read_csv(out / "eval.csv")
    assert main(["eval", str(out), "--episodes", "2"]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(out / "eval.csv"), without)  # recording changes no return
    first = EvalRequest(episodes=1)  # the recorded episode: its steps, plus the first state
    steps = int(evaluate(out, first)[0]["greedy_mean"].iloc[0])
    assert (videos / "frd-seed0-agent0-episode-0.mp4").read_text() == f"{steps + 1} frames of (400, 600, 3)"


# ---- classification ----

def test_classification_saves_the_global_model_and_eval_scores_what_runs_csv_says(tmp_path, made):
    built = made("fl")
    out = tmp_path / "fl"
    assert main([*CLS, "--method", "fl", "--seeds", "2", "--out", str(out)]) == 0
    ran = {method.ctx.seed: method for method in built}  # the last of each seed: built[0] only checked the config
    assert sorted(ran) == [0, 1]
    for method in ran.values():  # the server's model in memory at the run's end, bit for bit
        saved = read_models(out / "models" / f"fl-seed{method.ctx.seed}.pt")
        assert list(saved.state_dicts) == ["global"] and saved.metadata["model"] == "mlp"
        for name, tensor in method.server.state_dict().items():
            assert torch.equal(saved.state_dicts["global"][name], tensor)
    frame, table = evaluate(out, EvalRequest())
    runs = pd.read_csv(out / "runs.csv")
    assert frame["model"].tolist() == ["global", "global"]
    assert frame["accuracy"].tolist() == runs["global_accuracy"].tolist()  # the same test, the same weights
    assert pd.read_csv(out / "eval.csv")["accuracy"].tolist() == runs["global_accuracy"].tolist()
    assert f"fl-seed1 global   {runs['global_accuracy'].iloc[1]:.2%}" in table


def test_fd_saves_every_device_and_over_a_link_only_the_reference_device(tmp_path, digits, made):
    built = made("fd")
    out = tmp_path / "fd"
    assert main([*CLS, "--method", "fd", "--seeds", "1", "--out", str(out)]) == 0
    frame, _ = evaluate(out, EvalRequest())
    assert frame["model"].tolist() == ["device0", "device1", "device2"]
    assert frame["accuracy"].iloc[0] == pd.read_csv(out / "runs.csv")["accuracy"].iloc[0]  # the reference device
    devices = built[-1].ctx.devices  # built[0] only checked the config
    saved = read_models(out / "models" / "fd-seed0.pt")
    for device in range(3):
        vector = torch.cat([t.reshape(-1) for t in saved.state_dicts[f"device{device}"].values()]).numpy()
        np.testing.assert_array_equal(vector, devices.flat(device))
    config = cls_config("fd", rounds=2, iterations_per_round=5, devices=3)
    remote = _read(run_remote(config, 0, digits, Loopback(config, digits))[MODELS], tmp_path)
    local = _read(run_seed(config, 0, digits)[MODELS], tmp_path, "local.pt")
    assert list(remote.state_dicts) == ["device0"]
    for name, tensor in local.state_dicts["device0"].items():
        np.testing.assert_allclose(remote.state_dicts["device0"][name].numpy(), tensor.numpy(), rtol=1e-5, atol=1e-7)


def test_eval_of_an_experiment_record_scores_every_cell(tmp_path, capsys):
    record = tmp_path / "sweep"
    assert main([*RL, "--grid", "5,10", "--seeds", "1", "--out", str(record)]) == 0
    capsys.readouterr()
    assert main(["eval", str(record), "--episodes", "2"]) == 0
    printed = capsys.readouterr().out
    assert "== grid=5 ==" in printed and "== grid=10 ==" in printed and f"eval.csv in {record}/" in printed
    combined = pd.read_csv(record / "eval.csv")
    assert combined["grid"].tolist() == [5, 5, 10, 10]  # two agents a cell
    for grid, rows in combined.groupby("grid"):
        pd.testing.assert_frame_equal(rows.drop(columns="grid").reset_index(drop=True),
                                      pd.read_csv(record / "cells" / f"grid={grid}" / "eval.csv"))
    shutil.rmtree(record / "cells" / "grid=10" / MODELS)
    (record / "eval.csv").unlink()
    assert main(["eval", str(record)]) == 2  # a cell without models: one line, nothing written
    assert "grid=10 holds no saved models of finished runs" in capsys.readouterr().err
    assert not (record / "eval.csv").exists()


# ---- errors ----

def test_eval_errors_are_one_line(tmp_path, capsys, monkeypatch):
    rl, cls = tmp_path / "rl", tmp_path / "cls"
    assert main([*RL, "--seeds", "2", "--out", str(rl)]) == 0
    assert main([*CLS, "--method", "fl", "--seeds", "1", "--out", str(cls)]) == 0
    with pytest.raises(FrdError, match=r"is not a results folder of frd \(it has no config.json\)"):
        evaluate(tmp_path / "nothing", EvalRequest())
    with pytest.raises(FrdError, match=r"--episodes, --video play RL agents; a classification folder's models are "
                                       r"tested on its test set"):
        evaluate(cls, EvalRequest(episodes=3, video=tmp_path / "videos"))
    monkeypatch.setitem(sys.modules, "moviepy", None)  # as if not installed
    with pytest.raises(FrdError, match=f"^{re.escape(MISSING_VIDEO)}$"):
        evaluate(rl, EvalRequest(video=tmp_path / "videos"))
    assert not (tmp_path / "videos").exists()
    capsys.readouterr()
    assert main(["eval", str(rl), "--episodes", "0"]) == 2
    assert capsys.readouterr().err == "frd: error: --episodes must be at least 1, got 0\n"

    damaged = rl / "models" / "frd-seed0.pt"
    damaged.write_bytes(damaged.read_bytes()[:100])
    frame, _ = evaluate(rl, EvalRequest(episodes=2))
    assert frame["run_id"].unique().tolist() == ["frd-seed1"]
    assert capsys.readouterr().err == ("frd: frd-seed0 is left out: models/frd-seed0.pt is truncated or altered "
                                       "(its sha256 differs from its manifest's)\n")
    with pytest.raises(FrdError, match=r"frd-seed0.pt cannot be read \(.*\); rerun the command that made its folder"):
        read_models(damaged)
    torch.save({"weights": torch.zeros(2)}, tmp_path / "foreign.pt")
    with pytest.raises(FrdError, match=r"foreign.pt is not a saved-models file of this frd \(format frd-models/1\)"):
        read_models(tmp_path / "foreign.pt")
    for path in (rl / "models").glob("*.pt"):
        path.unlink()
    with pytest.raises(FrdError, match=r"holds no saved models of finished runs \(models/<run_id>.pt\)"):
        evaluate(rl, EvalRequest())


def test_a_lane_module_for_a_saved_agent_leaves_torchs_global_generator_as_it_was():
    """Building the plain module a saved agent loads into (its initial draws from a forked
    generator) leaves the global one as it was: a run's later draws are the same with or without
    a save."""
    from frd.agents.stacked import sequential
    torch.manual_seed(3)
    expected = torch.rand(4)
    torch.manual_seed(3)
    module = sequential([4, 8, 2], "tanh")
    assert torch.equal(torch.rand(4), expected)
    assert [type(m).__name__ for m in module] == ["Linear", "Tanh", "Linear"] and module[2].weight.shape == (2, 8)

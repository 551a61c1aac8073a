"""The studies as experiment files (benchmarks/experiments/): each checks whole, and each cell's
config is the one its study's script builds (so a rerun from the file gives the study's runs)."""
import re
from dataclasses import replace
from pathlib import Path

import pytest
from mnist_files import tiny_mnist

import frd.classification.data as data_module
from frd.cli import main
from frd.domains import get_domain
from frd.experiment_file import read_file, resolve
from frd.sweep import claim, command

EXPERIMENTS = Path(__file__).parent.parent / "benchmarks" / "experiments"


@pytest.fixture
def mnist(tmp_path_factory, monkeypatch):
    """A made-up MNIST large enough for the studies' partitions (10 devices × 500 samples)."""
    cache = tmp_path_factory.mktemp("cache")
    tiny_mnist(cache / "mnist", train=8000, test=1000)
    monkeypatch.setattr(data_module, "USER_CACHE", cache)


def _configs(name: str, out: Path) -> dict:
    domain, settings, axes = read_file(EXPERIMENTS / name)
    experiment = resolve(command(get_domain(domain)), settings, axes, "")
    return {tuple(cell.values.values()): config for cell, (_, config) in zip(experiment.cells(), claim(experiment, out))}


@pytest.mark.parametrize("path", sorted(EXPERIMENTS.glob("*.toml")), ids=lambda p: p.name)
def test_every_study_file_checks_whole(path, mnist, tmp_path, capsys):
    assert main(["run", str(path), "--print", "--out", str(tmp_path / "out")]) == 0
    assert re.fullmatch(r"\d+ cells, \d+ runs, into .*/", capsys.readouterr().out.splitlines()[-1])


DISTILL_SCALED = dict(dataset="mnist", partition="dirichlet", devices=10, samples_per_device=500, model="convnet",
                      width=16, iterations_per_round=50, distill_iterations=20, server_epochs=5)
"""The distillation study's CPU scaling, as its report states it."""


def test_the_distillation_file_builds_the_studys_configs_with_its_one_seed(mnist, tmp_path):
    from frd.classification.methods import study_config

    labels = {"fl": ("fl", {}), "fd": ("fd", {}), "feddm": ("feddm", {}), "feddm-noise": ("feddm", {"init": "noise"}),
              "feddualmatch": ("feddualmatch", {})}
    configs = _configs("distill.toml", tmp_path)
    assert len(configs) == 4 * len(labels)
    for (alpha, label), config in configs.items():
        name, options = labels[label]
        assert config == replace(study_config(name, alpha=alpha, rounds=20, **DISTILL_SCALED, **options), seeds=1)


def test_the_sharing_and_seed_files_build_the_studys_configs(tmp_path):
    from frd.rl.config import RLConfig, rl_config
    from frd.rl.methods.frd import FRDOptions

    sharing = _configs("sharing.toml", tmp_path / "sharing")
    assert len(sharing) == 128
    assert sharing[("acrobot", 8, "widths", "pd steps+better")] == rl_config(
        ("pd",), env_id="Acrobot-v1", agents=8, seeds=20, until="all", max_episodes=1000, agent_spec="h=32;h=64;h=128",
        distill_steps=20, distill_target="better")
    assert sharing[("cartpole", 2, "rlcode", "mixfrd")] == rl_config(
        ("mixfrd",), agents=2, seeds=20, until="all", max_episodes=1000, recipe="rlcode")
    grid = _configs("seed_grid.toml", tmp_path / "grid")
    assert grid[(30,)] == replace(RLConfig(seeds=20), methods=("frd",), options={"frd": FRDOptions(grid=30)})


MIX2FLD_LABELS = {"FL": ("fl", {}), "FD": ("fd", {}), "FLD": ("fld", {}), "MixFLD (10)": ("mixfld", dict(n_mix=10)),
                  "MixFLD (50)": ("mixfld", dict(n_mix=50)), **{f"Mix2FLD ({m},{i})": ("mix2fld", dict(n_mix=m, n_inv=i))
                                                            for m, i in ((10, 10), (10, 20), (50, 50), (50, 100))}}
MIX2FLD_CHANNELS = {"asym. FDMA": ("wireless-asymmetric", {}), "sym. FDMA": ("wireless-symmetric", {}),
                    "asym. TDMA": ("wireless-asymmetric", {"access": "tdma"}),
                    "sym. TDMA": ("wireless-symmetric", {"access": "tdma"})}
"""The Mix2FLD study's part a as its report states it: every method in the asymmetric FDMA cell,
FL and Mix2FLD (50, 100) in the other three, at ``frd cls``'s paper-faithful CPU scale."""


def test_the_mix2fld_file_builds_the_studys_part_a_configs(mnist, tmp_path):
    from frd.classification.methods import study_config

    configs = _configs("mix2fld.toml", tmp_path)
    expected = {}
    for cell, (channel, channel_options) in MIX2FLD_CHANNELS.items():
        for partition in ("iid", "mix2fld"):
            for label, (name, options) in MIX2FLD_LABELS.items():
                if cell == "asym. FDMA" or label in ("FL", "Mix2FLD (50,100)"):
                    expected[(cell, partition, label)] = study_config(
                        name, True, partition=partition, channel=channel, channel_options=channel_options, seeds=3,
                        data_dir=None, rounds=16, iterations_per_round=100, server_iterations=800, **options)
    assert configs == expected and len(configs) == 30

"""Methods from outside the repository (``frd.plugins``): the worked example package
(``tests/plugin_package``) is pip-installed into a folder of its own, and ``frd`` run with it on
its path runs its methods in both domains with their options as flags, carries their code in
the provenance hash, and refuses, in one line, a plug-in named like a built-in method."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from frd import results
from frd.errors import FrdError

pytestmark = pytest.mark.processes  # every test here starts processes (pytest -m 'not processes' skips them)

PACKAGE = Path(__file__).parent / "plugin_package"
RL_TINY = ["--agents", "4", "--seeds", "1", "--hidden", "8", "--max-episodes", "6", "--period", "2", "--target", "1e9"]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The example package, installed as a user would (``pip install``), into a folder of its own:
    a copy of its source is built, so the checkout stays clean."""
    tmp = tmp_path_factory.mktemp("plugin")
    shutil.copytree(PACKAGE, tmp / "source")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-index", "--target", str(tmp / "site"), str(tmp / "source")], check=True)
    return tmp / "site"


def start(args: list[str], *path: Path) -> subprocess.Popen:
    """``frd *args`` in a process whose Python path holds ``path`` (the installed plug-ins)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, path))}
    return subprocess.Popen([sys.executable, "-m", "frd", *args, "--no-progress"], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finished(process: subprocess.Popen) -> tuple[int, str]:
    """Its exit code and stderr, once it ends."""
    _, stderr = process.communicate(timeout=300)
    return process.returncode, stderr


def test_installed_methods_run_in_both_domains_and_one_named_like_a_built_in_is_refused(site, tmp_path):
    """Their options are flags and in config.json, their code is in the provenance hash; a plug-in
    named ``fl`` (a second package, declared by its metadata alone) is one line, exit 2, nothing
    written. The three commands run at once."""
    clash = tmp_path / "clash"
    info = clash / "clash-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: clash\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[frd.cls_methods]\nfl = frd_trimmed.cls:TrimmedFedAvg\n")
    commands = [start(["rl", "--method", "trimmed-frl", "--trim", "0.25", *RL_TINY, "--out", str(tmp_path / "rl")], site),
                start(["cls", "--method", "trimmed-fl", "--trim", "0.2", "--dataset", "digits", "--devices", "3",
                       "--rounds", "1", "--iterations", "2", "--seeds", "1", "--out", str(tmp_path / "cls")], site),
                start(["cls", "--method", "fl", "--out", str(tmp_path / "clashed")], site, clash)]
    (rl, rl_err), (cls, cls_err), (refused, said) = map(finished, commands)
    assert rl == 0 and cls == 0, rl_err + cls_err
    for folder, method, trim in (("rl", "trimmed-frl", 0.25), ("cls", "trimmed-fl", 0.2)):
        assert pd.read_csv(tmp_path / folder / "runs.csv")["method"].tolist() == [method]
        assert f'"trim": {trim}' in (tmp_path / folder / "config.json").read_text()
        code = pd.read_csv(tmp_path / folder / "provenance.csv", dtype=str)["code"].iloc[0]
        assert code != results.code_hash()  # this process loaded no plug-in: frd's sources alone
    assert refused == 2 and said.count("\n") == 1 and not (tmp_path / "clashed").exists()
    assert "clash declares a method 'fl' under frd.cls_methods, the name of a built-in method" in said


def test_the_example_trims_by_hand_and_refuses_a_trim_out_of_range(site, monkeypatch):
    monkeypatch.syspath_prepend(str(site))
    from frd_trimmed import TrimOptions, trimmed_mean

    values = [np.array([1.0, -5.0]), np.array([2.0, 0.0]), np.array([3.0, 1.0]), np.array([100.0, 2.0])]
    assert trimmed_mean(values, 0.25).tolist() == [2.5, 0.5]  # drops 1 and 100, -5 and 2
    with pytest.raises(FrdError, match=r"--trim must lie in \[0, 0.5\), got 0.7"):
        TrimOptions(trim=0.7)

"""One installed namespace: the wheel holds ``frd`` and nothing else at its top level, with the
domains as ``frd.envs``, ``frd.agents`` and ``frd.classification`` (issue 39)."""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "frd", "agents", "envs", "classification")


def test_the_wheel_installs_only_frd(tmp_path):
    tree = tmp_path / "tree"
    for name in SOURCES:  # a copy, so that setuptools' build/ folder lands there, not in the checkout
        source, target = REPO / name, tree / name
        if source.is_dir():
            shutil.copytree(source, target, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, target)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path / "dist"), str(tree)], check=True, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("frd-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if ".dist-info/" not in name}
    assert top == {"frd"}
    for module in ("frd/agents/kernel.py", "frd/envs/lanes.py", "frd/classification/methods/fd.py", "frd/rl/fused.py"):
        assert module in names

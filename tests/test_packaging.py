"""One installed namespace: the wheel holds ``frd`` and nothing else at its top level, with the
domains as ``frd.envs``, ``frd.agents`` and ``frd.classification`` (issue 39)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "frd", "agents", "envs", "classification")


@pytest.mark.processes
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
    sources = {str(path.relative_to(REPO)) for path in _python_files(REPO / "frd")}
    assert "frd/agents/kernel.py" in sources and "frd/codecs/quantize.py" in sources
    assert sources <= set(names), f"left out of the wheel: {sorted(sources - set(names))}"


def _python_files(folder: Path) -> list[Path]:
    """The modules below ``folder``, through the checkout's links (``os.walk`` as setuptools walks)."""
    return [Path(top) / name for top, dirs, files in os.walk(folder, followlinks=True) if "__pycache__" not in top
            for name in files if name.endswith(".py")]


def test_no_tracked_or_staged_path_lies_under_a_link():
    """git refuses paths through a link (a change there was lost once): every file git knows is
    reached through real folders (``frd/agents`` is a link to ``agents/``: its files are git's as
    ``agents/…``)."""
    listed = subprocess.run(["git", "ls-files", "--cached", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    paths = [Path(p) for p in listed.decode().split("\0") if p]
    under = [str(p) for p in paths if any((REPO / parent).is_symlink() for parent in p.parents if parent != Path("."))]
    assert paths and not under, f"under a link: {under[:5]}"

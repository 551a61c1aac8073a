"""Damaged results are found and redone, damaged metadata is one line, and a full disk leaves
the folder as it was (issue 40: verified parts, config.json, the differing settings, ENOSPC)."""
from __future__ import annotations

import builtins
import errno
import io
import json
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

import frd.rl.experiment as experiment
from frd.cli import main
from frd.errors import FrdError
from frd.results import ResultStore, ResumeKey
from frd.rl import checkpoint as checkpoint_module
from tests.blank_figures import blank_rl_figures

RL = ["rl", "--method", "independent", "--agents", "2", "--max-episodes", "8", "--period", "2", "--hidden", "8",
      "--target", "1e9", "--no-progress"]
"""The issue's step 1 with tiny budgets (``RL_TINY`` of test_architecture)."""
CLS = ["cls", "--method", "fl", "--dataset", "digits", "--rounds", "2", "--iterations", "2", "--devices", "3",
       "--seeds", "2", "--no-progress"]
TIMINGS = ("compute_s", "comm_s")
"""Wall-clock columns: the only ones a rerun may change."""


@pytest.fixture(autouse=True)
def blank_figures(monkeypatch):
    """RL figures drawn blank but written as usual (the sites of a full disk are found with the real ones)."""
    blank_rl_figures(monkeypatch)


def _run(args: list[str], out: Path, capsys) -> tuple[int, list[str]]:
    """Exit code and stderr lines of one ``frd`` command into ``out``."""
    capsys.readouterr()
    code = main([*args, "--out", str(out)])
    return code, capsys.readouterr().err.strip().splitlines()


def _table(out: Path, name: str) -> pd.DataFrame:
    frame = pd.read_csv(out / f"{name}.csv")
    return frame.drop(columns=[c for c in TIMINGS if c in frame.columns])


def _truncate(path: Path) -> None:
    os.truncate(path, path.stat().st_size * 2 // 3)


def _alter(path: Path) -> None:
    """One digit changed, the size kept: what only a content hash sees."""
    text = path.read_text()
    at = text.rindex("1")
    path.write_text(text[:at] + "2" + text[at + 1:])


PART = "parts/episodes/independent-seed0.csv"
CHANGED = "is truncated or altered (its sha256 differs from its manifest's)"
DAMAGES = {"truncated": (PART, _truncate, CHANGED), "altered": (PART, _alter, CHANGED),
           "missing": (PART, Path.unlink, "is missing"),
           "manifest": ("parts/manifest/independent-seed0.json", _truncate, "is damaged"),
           "models": ("models/independent-seed0.pt", _truncate, CHANGED)}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_rl_part_is_named_and_its_run_redone_to_the_same_tables(damage, tmp_path, capsys):
    args = [*RL, "--seeds", "3"]
    assert _run(args, tmp_path, capsys) == (0, [])
    episodes, runs = (tmp_path / "episodes.csv").read_bytes(), _table(tmp_path, "runs")
    models = (tmp_path / "models" / "independent-seed0.pt").read_bytes()
    where, damage_file, notice = DAMAGES[damage]
    damage_file(tmp_path / where)
    code, err = _run(args, tmp_path, capsys)
    assert code == 0 and err == [f"frd: independent-seed0 is run again: {where} {notice}"]
    assert (tmp_path / "episodes.csv").read_bytes() == episodes  # 721 rows of ints in the issue, not 643 of floats
    assert (tmp_path / "models" / "independent-seed0.pt").read_bytes() == models
    pd.testing.assert_frame_equal(_table(tmp_path, "runs"), runs)
    assert _run(args, tmp_path, capsys) == (0, []), "verified again: nothing left to redo"


def test_no_table_is_built_from_an_unverified_part(tmp_path, capsys, monkeypatch):
    args = [*RL, "--seeds", "2"]
    assert _run(args, tmp_path, capsys)[0] == 0
    _truncate(tmp_path / "parts" / "ledger" / "independent-seed1.csv")

    def interrupted(*args, **kwargs):  # Ctrl-C before the damaged run is redone
        raise KeyboardInterrupt
    monkeypatch.setattr(experiment, "simulate", interrupted)
    code, err = _run(args, tmp_path, capsys)
    assert code == 130 and err[0] == ("frd: independent-seed1 is run again: parts/ledger/independent-seed1.csv is "
                                      "truncated or altered (its sha256 differs from its manifest's)")
    assert set(pd.read_csv(tmp_path / "runs.csv")["run_id"]) == {"independent-seed0"}
    assert set(pd.read_csv(tmp_path / "episodes.csv")["run_id"]) == {"independent-seed0"}


def test_a_damaged_classification_part_is_redone_to_the_same_tables(tmp_path, capsys):
    assert _run(CLS, tmp_path, capsys)[0] == 0
    rounds, runs, ledger = (_table(tmp_path, t) for t in ("rounds", "runs", "ledger"))
    _truncate(tmp_path / "parts" / "rounds" / "fl-seed1.csv")
    code, err = _run(CLS, tmp_path, capsys)
    assert code == 0 and err[0] == ("frd: fl-seed1 is run again: parts/rounds/fl-seed1.csv is truncated or altered "
                                    "(its sha256 differs from its manifest's)")
    for name, before in (("rounds", rounds), ("runs", runs), ("ledger", ledger)):
        pd.testing.assert_frame_equal(_table(tmp_path, name), before)


def _zero_fill(path: Path) -> None:
    """The last blocks zeroed, as a crash before the data reached the disk leaves them."""
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2] + bytes(len(data) - len(data) // 2))


@pytest.mark.parametrize("damage", [_truncate, _zero_fill])
def test_a_folder_from_before_manifests_is_verified_by_its_parts(damage, tmp_path, capsys):
    args = [*RL, "--seeds", "2"]
    assert _run(args, tmp_path, capsys)[0] == 0
    episodes = (tmp_path / "episodes.csv").read_bytes()
    shutil.rmtree(tmp_path / "parts" / "manifest")  # as an older frd left it
    mtime = (tmp_path / "parts" / "runs" / "independent-seed0.csv").stat().st_mtime_ns
    damage(tmp_path / "parts" / "episodes" / "independent-seed1.csv")
    code, err = _run(args, tmp_path, capsys)
    assert code == 0 and err == ["frd: independent-seed1 is run again: parts/episodes/independent-seed1.csv is "
                                 "truncated or altered (written before manifests)"]
    assert (tmp_path / "parts" / "runs" / "independent-seed0.csv").stat().st_mtime_ns == mtime, "whole: kept"
    assert (tmp_path / "episodes.csv").read_bytes() == episodes
    manifest = json.loads((tmp_path / "parts" / "manifest" / "independent-seed0.json").read_text())
    assert manifest["tables"]["episodes"]["rows"] == 16 and manifest["tables"]["runs"]["rows"] == 1
    assert (tmp_path / "parts" / "manifest" / "independent-seed1.json").exists()


def test_a_damaged_checkpoint_is_named_and_the_batch_redone_to_the_same_tables(tmp_path, capsys):
    args = [*RL, "--seeds", "2"]
    assert _run(args, tmp_path / "clean", capsys)[0] == 0
    (tmp_path / "damaged").mkdir()
    (tmp_path / "damaged" / "checkpoint.pkl").write_bytes(b"cut off")
    code, err = _run(args, tmp_path / "damaged", capsys)
    assert code == 0 and err == [f"frd: {tmp_path / 'damaged' / 'checkpoint.pkl'} is damaged (UnpicklingError); "
                                 "the batch starts again from its first episode"]
    assert (tmp_path / "damaged" / "episodes.csv").read_bytes() == (tmp_path / "clean" / "episodes.csv").read_bytes()
    assert not (tmp_path / "damaged" / "checkpoint.pkl").exists(), "cleared with its batch"


@pytest.mark.parametrize("text, message", [
    ('{"config": {"methods": ["indep', r"config.json cannot be read \(Unterminated string .*\): if .* holds this very "
                                       r"experiment, move config.json aside and rerun .*; else use another --out"),
    ("\xff\xfe", r"config.json cannot be read \(.*can't decode byte.*\)"),
    ('["a list"]', r"config.json was not written by frd; move it aside or use another --out"),
    ('{"name": "another tool"}', r"config.json was not written by frd; move it aside or use another --out"),
])
def test_a_damaged_or_foreign_config_json_is_one_line_and_kept(text, message, tmp_path, capsys):
    (tmp_path / "config.json").write_text(text, encoding="latin-1")
    code, err = _run([*RL, "--seeds", "1"], tmp_path, capsys)
    assert code == 2 and len(err) == 1 and err[0].startswith(f"frd: error: {tmp_path / 'config.json'}")
    with pytest.raises(FrdError, match=message):
        ResultStore(tmp_path, {}, ResumeKey({}, {}))
    assert (tmp_path / "config.json").read_text(encoding="latin-1") == text and not (tmp_path / "parts").exists()


def test_the_refusal_to_mix_experiments_names_what_differs(tmp_path):
    common = {"env_id": "CartPole-v1", "max_episodes": 120, "period": 25, "hidden": 64, "target": 490.0, "window": 10}
    ResultStore(tmp_path, {}, ResumeKey(common, {"frd": {"distill_lr": 0.001, "codec": "paper"}}))
    other = ResumeKey({**common, "max_episodes": 200}, {"frd": {"distill_lr": 0.01, "codec": "paper"}, "pd": {}})
    with pytest.raises(FrdError, match=r"holds results of a different experiment \(max_episodes: 120 → 200, "
                                       r"frd.distill_lr: 0.001 → 0.01\); use another --out or delete that folder$"):
        ResultStore(tmp_path, {}, other)
    many = ResumeKey({**common, "max_episodes": 200, "period": 5, "hidden": 8, "window": 3, "channel": "rayleigh"},
                     {"frd": {"distill_lr": 0.001, "codec": "paper"}})
    with pytest.raises(FrdError, match=r"\(max_episodes: 120 → 200, period: 25 → 5, hidden: 64 → 8, …\); use another"):
        ResultStore(tmp_path, {}, many)
    with pytest.raises(FrdError, match=r'\(channel: unset → "rayleigh"\)'):
        ResultStore(tmp_path, {}, ResumeKey({**common, "channel": "rayleigh"}, {}))


# ---- a full disk at every write site ----

WRITE_SITES = ("checkpoint.pkl", "config.json", "episodes.csv", "ledger.csv", "mission.pdf", "mission.png", "models",
               "parts/episodes", "parts/ledger", "parts/manifest", "parts/provenance", "parts/rounds", "parts/runs",
               "payload.pdf", "payload.png", "provenance.csv", "rounds.csv", "runs.csv", "summary.csv")
"""Where ``frd rl`` writes when it adds a run to a folder (``config.json``: its seeds grew)."""
GROWN = ["rl", "--method", "frd", "--agents", "2", "--max-episodes", "8", "--period", "2", "--hidden", "8",
         "--no-progress"]


def _site(path: Path, out: Path) -> str:
    """The write site of a temporary file: its folder under ``parts``, ``models``, or its name."""
    relative = path.relative_to(out)
    return str(relative.parent) if relative.parts[0] in ("parts", "models") else re.sub(r"\.\d+\.tmp$", "", relative.name)


class FullDisk:
    """``open`` for writing under ``out`` records its site, and at the first open of ``site``
    leaves a partial file and raises ENOSPC (or ``error``), as a full disk does."""

    def __init__(self, out: Path, site: str | None, error: int = errno.ENOSPC) -> None:
        self.out, self.site, self.error, self.seen, self.failed = out, site, error, [], False
        self.real = builtins.open

    def __call__(self, file, mode="r", *args, **kwargs):
        path = Path(os.fspath(file)) if isinstance(file, (str, os.PathLike)) else None
        if path is not None and any(c in mode for c in "wax+") and path.is_relative_to(self.out):
            site = _site(path, self.out)
            self.seen.append(site)
            if site == self.site and not self.failed:
                self.failed = True
                with self.real(path, "wb") as partial:
                    partial.write(b"run_id,")
                raise OSError(self.error, os.strerror(self.error), str(path))
        return self.real(file, mode, *args, **kwargs)


@pytest.fixture(scope="module")
def grown(tmp_path_factory):
    """A folder with one finished run (the previous state), what adding a second gives, and the
    sites that wrote (a checkpoint at every safe point: one more site)."""
    before, after = tmp_path_factory.mktemp("before"), tmp_path_factory.mktemp("after")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(checkpoint_module, "EVERY", 0.0)
        assert main([*GROWN, "--seeds", "1", "--out", str(before)]) == 0
        shutil.copytree(before, after, dirs_exist_ok=True)
        spy = FullDisk(after, None)
        patch.setattr(builtins, "open", spy)
        patch.setattr(io, "open", spy)
        assert main([*GROWN, "--seeds", "2", "--out", str(after)]) == 0
    return before, after, sorted(set(spy.seen))


def test_the_write_sites_are_all_tested(grown):
    assert tuple(grown[2]) == WRITE_SITES, "a new write site: add it to WRITE_SITES"


@pytest.mark.parametrize("site", WRITE_SITES)
def test_a_full_disk_at_any_write_site_leaves_a_consistent_folder_and_one_line(site, grown, tmp_path, capsys,
                                                                                 monkeypatch):
    before, after, _ = grown
    out = tmp_path / "full"
    shutil.copytree(before, out)
    monkeypatch.setattr(checkpoint_module, "EVERY", 0.0)
    disk = FullDisk(out, site)
    monkeypatch.setattr(builtins, "open", disk)
    monkeypatch.setattr(io, "open", disk)
    code, err = _run([*GROWN, "--seeds", "2"], out, capsys)
    monkeypatch.setattr(builtins, "open", disk.real)
    monkeypatch.setattr(io, "open", disk.real)
    assert disk.failed and code == 2 and len(err) == 1, err
    assert err[0].startswith(f"frd: error: cannot write {out}/")
    assert err[0].endswith("No space left on device; the finished runs are kept: free some space and rerun the same command")
    assert not list(out.rglob("*.tmp")), "no partial file is left behind"
    assert (out / "config.json").read_bytes() in {(f / "config.json").read_bytes() for f in (before, after)}
    for name in ("episodes", "ledger", "runs", "provenance", "rounds"):  # each table as it was, or as it becomes
        assert any(_table(out, name).equals(_table(folder, name)) for folder in (before, after)), name
    finished = set(pd.read_csv(out / "runs.csv")["run_id"])
    assert set(pd.read_csv(out / "episodes.csv")["run_id"]) == finished, "the tables agree with each other"
    key = json.loads((out / "config.json").read_text())["resume_key"]
    assert set(ResultStore(out, {}, ResumeKey(**key)).finished()) >= finished
    assert _run([*GROWN, "--seeds", "2"], out, capsys) == (0, [])  # the same command completes it
    for name in ("episodes", "ledger", "rounds", "runs"):
        pd.testing.assert_frame_equal(_table(out, name), _table(after, name))


def test_a_full_disk_on_a_new_folder_a_classification_plot_or_another_error_is_one_line(tmp_path, capsys, monkeypatch):
    for site, error, args, out in (("config.json", errno.ENOSPC, [*GROWN, "--seeds", "1"], tmp_path / "new"),
                                   ("accuracy.png", errno.ENOSPC, CLS, tmp_path / "cls"),
                                   ("parts/runs", errno.EIO, [*GROWN, "--seeds", "1"], tmp_path / "io")):
        disk = FullDisk(out, site, error)
        monkeypatch.setattr(builtins, "open", disk)
        monkeypatch.setattr(io, "open", disk)
        code, err = _run(args, out, capsys)
        monkeypatch.setattr(builtins, "open", disk.real)
        monkeypatch.setattr(io, "open", disk.real)
        assert disk.failed and code == 2 and len(err) == 1 and os.strerror(error) in err[0], err
        assert not list(out.rglob("*.tmp"))
    assert not (tmp_path / "new" / "config.json").exists()
    assert set(pd.read_csv(tmp_path / "cls" / "runs.csv")["run_id"]) == {"fl-seed0", "fl-seed1"}
    assert not (tmp_path / "cls" / "accuracy.png").exists()
    assert err[0].endswith("Input/output error; the finished runs are kept: fix that (or choose another --out) and rerun "
                           "the same command")
    assert not (tmp_path / "io" / "runs.csv").exists() and not (tmp_path / "io" / "parts" / "manifest").exists()

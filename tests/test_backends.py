"""The Ray backend: same tables as a local run, resume across backends, a real multi-process
cluster, classification through the same seam, and one-line errors (tiny budgets throughout)."""
from __future__ import annotations

import builtins
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from functools import partial
from pathlib import Path

import pandas as pd
import pytest

import frd.results as results
import frd.rl.experiment as experiment
from frd import reaper
from frd.backends import MISSING_RAY, Backend, RaySession, group_runs, import_ray
from frd.cli import main
from frd.domains import REGISTRY
from frd.errors import FrdError
from frd.results import ResultStore
from frd.rl.config import RLConfig
from tests.processes import command_line, kill_9, left_after, running, start_frd, wait_for

pytestmark = pytest.mark.processes  # every test here starts processes (pytest -m 'not processes' skips them)

ROOT = Path(__file__).resolve().parents[1]
TIMING = ["compute_s"]  # a share of a batch's compute: differs with the batch; comm_s does not
TINY = ["--agents", "2", "--hidden", "8", "--max-episodes", "6", "--period", "2", "--target", "1e9",
        "--no-progress"]
TINY_CONFIG = dict(agents=2, hidden=8, max_episodes=6, period=2, target=1e9)


@pytest.fixture(autouse=True)
def no_figures(monkeypatch):
    """These tests compare tables; the figures (tested elsewhere) would cost seconds per sweep."""
    for target in ("frd.rl.experiment.plot_mission", "frd.rl.experiment.plot_payload",
                   "frd.classification.report.plot_accuracy", "frd.classification.report.plot_accuracy_bits"):
        monkeypatch.setattr(target, lambda *args, **kwargs: None)


def _tables(folder: Path) -> dict[str, pd.DataFrame]:
    return {t: pd.read_csv(folder / f"{t}.csv").drop(columns=TIMING, errors="ignore")
            for t in ("episodes", "ledger", "runs")}


def _assert_same_tables(a: Path, b: Path) -> None:
    """The same tables (but timings) and the same saved models, bit for bit."""
    for name, frame in _tables(a).items():
        pd.testing.assert_frame_equal(frame, _tables(b)[name], obj=name)
    models = {p.name: p.read_bytes() for p in (a / "models").glob("*.pt")}
    assert models and models == {p.name: p.read_bytes() for p in (b / "models").glob("*.pt")}


# -- no Ray needed ------------------------------------------------------------------------------
@pytest.mark.parametrize("args, message", [
    (["--backend", "ray", "--groups", "0"], "--groups must be at least 1, got 0"),
    (["--backend", "ray", "--cpus", "-1"], "--cpus must be at least 1"),
    (["--backend", "ray", "--address", "nonsense:port"], "--address is local, auto or HOST:PORT"),
    (["--backend", "ray", "--address", "10.0.0.5"], "--address is local, auto or HOST:PORT"),
    (["--backend", "ray", "--address", "auto", "--cpus", "2"], "--cpus sizes a Ray started here"),
    (["--groups", "2"], "--address, --groups and --cpus need --backend ray"),
])
def test_bad_backend_options_are_one_line_and_exit_2(args, message, tmp_path, capsys):
    for command in (["rl", *TINY], ["cls", "--seeds", "1", "--rounds", "1", "--no-progress"]):
        assert main([*command, *args, "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()  # refused before anything ran


def test_unknown_backend_is_refused_by_the_parser(capsys):
    assert main(["rl", "--backend", "spark", "--out", "x"]) == 2
    assert "invalid choice: 'spark'" in capsys.readouterr().err


def test_missing_ray_names_the_extra(monkeypatch, tmp_path, capsys):
    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ModuleNotFoundError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(FrdError, match=r"pip install 'frd\[ray\]'"):
        import_ray()
    assert main(["rl", *TINY, "--seeds", "1", "--backend", "ray", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"frd: error: {MISSING_RAY}\n"


def test_an_absent_head_is_one_line_not_endless_retries(tmp_path, capsys):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["rl", *TINY, "--seeds", "1", "--backend", "ray", "--address", f"127.0.0.1:{port}",
                 "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"no Ray head answers at --address 127.0.0.1:{port}" in err and err.count("\n") == 1


def test_a_loopback_head_stays_on_loopback_when_ray_was_imported_first():
    """Ray reads RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER once, at its import. Imported before frd set it,
    Ray sent a driver joining 127.0.0.1:PORT to this machine's LAN address, where no GCS listens; it
    retried for minutes (a cluster test's 300 s timeout, when an earlier test in its xdist worker
    had imported Ray). A fresh process: Ray first, then frd's session with a loopback address."""
    code = """if True:
        import ray
        from ray._private import ray_constants
        from ray._private.services import canonicalize_bootstrap_address
        from frd.backends import Backend, RaySession
        from frd.errors import FrdError
        print(ray_constants.ENABLE_RAY_CLUSTER)
        try:
            RaySession(Backend("ray", address="127.0.0.1:1")).__enter__()  # nothing listens: refused after
        except FrdError as exc:
            print(str(exc).startswith("no Ray head answers"))
        print(canonicalize_bootstrap_address("127.0.0.1:6379"))"""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["True", "True", "127.0.0.1:6379"]  # read as a cluster at import; kept on loopback


def test_groups_deal_runs_round_robin_so_every_group_mixes_methods():
    runs = [(m, s) for m in ("frd", "pd", "frl", "independent") for s in range(8)]
    groups = group_runs(runs, 3)
    assert sorted(r for g in groups for r in g) == sorted(runs) and [len(g) for g in groups] == [11, 11, 10]
    assert all(len({m for m, _ in g}) == 4 for g in groups)
    assert group_runs(runs[:2], 5) == [[runs[0]], [runs[1]]]  # never an empty group


# -- Ray started by frd on this machine ----------------------------------------------------------
def test_a_ray_started_here_is_killed_like_a_local_run_and_resumes_locally(tmp_path, monkeypatch):
    """``--address local`` (the default): frd starts Ray (loopback, capped store, short temp dir).
    ``kill`` (SIGTERM) after two runs streamed back stops the sweep like Ctrl-C (exit 130, Ray
    stopped, its temp dir gone); the local backend then finishes it: the tables of a local run."""
    import ray

    import frd.cli as cli

    rl = ["rl", "--method", "frd", "--seeds", "4", *TINY]
    made, real_mkdtemp = [], tempfile.mkdtemp

    def mkdtemp(*args, **kwargs):  # the temp dirs this process makes (another test's may come and go)
        made.append(real_mkdtemp(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    previous = signal.getsignal(signal.SIGTERM)
    real_save, saved = ResultStore.save_run, []

    def save_then_kill(self, tables):
        real_save(self, tables)
        saved.append(tables)
        if len(saved) == 2:
            signal.raise_signal(signal.SIGTERM)  # what `kill` sends, mid-sweep

    try:
        assert main([*rl, "--out", str(tmp_path / "local")]) == 0
        monkeypatch.setattr(ResultStore, "save_run", save_then_kill)
        assert main([*rl, "--backend", "ray", "--cpus", "1", "--out", str(tmp_path / "ray")]) == 130
        assert signal.getsignal(signal.SIGTERM) is cli._stop  # frd's handler, not the one ray.init sets
    finally:
        signal.signal(signal.SIGTERM, previous)
    ray_dirs = [d for d in made if Path(d).name.startswith("frdray")]
    assert not ray.is_initialized() and ray_dirs and not any(map(os.path.exists, ray_dirs))  # stopped, temp dir gone
    assert len(pd.read_csv(tmp_path / "ray" / "runs.csv")) == 2
    monkeypatch.setattr(ResultStore, "save_run", real_save)
    assert main([*rl, "--out", str(tmp_path / "ray")]) == 0
    _assert_same_tables(tmp_path / "local", tmp_path / "ray")


def test_a_worker_killed_mid_task_has_its_runs_redone_with_the_same_tables(tmp_path):
    """One group of six runs on a Ray started here; the worker running it is killed mid-task
    (stopped first, and killed only if it is still in the task). Ray runs the group again: every
    run saved once, the tables of a local run."""
    sweep = ["compare", "--methods", "frd,pd", "--seeds", "3", *TINY, "--max-episodes", "30"]
    assert main([*sweep, "--out", str(tmp_path / "local")]) == 0
    killed: list[int] = []
    done = threading.Event()

    def kill_the_first_worker_in_the_task():
        while not killed and not done.wait(0.05):
            for pid in running(os.getpid(), "ray::_group"):
                os.kill(pid, signal.SIGSTOP)
                if pid in running(os.getpid(), "ray::_group"):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                else:
                    os.kill(pid, signal.SIGCONT)

    killer = threading.Thread(target=kill_the_first_worker_in_the_task)
    killer.start()
    try:
        assert main([*sweep, "--backend", "ray", "--cpus", "1", "--groups", "1", "--out", str(tmp_path / "ray")]) == 0
    finally:
        done.set()
        killer.join()
    assert len(killed) == 1
    _assert_same_tables(tmp_path / "local", tmp_path / "ray")
    assert len(pd.read_csv(tmp_path / "ray" / "runs.csv")) == 6


def test_a_ray_started_here_ends_when_frd_is_killed_9(tmp_path):
    """``kill -9`` of an ``frd rl --backend ray`` whose group is running: every process below it
    (Ray's and frd's reaper) ends, and Ray's temp dir is removed. The worker is known by its title,
    so it must not inherit ``RAY_CLIENT_MODE``: 1 start in ~80 kept its command line as title
    (``frd.backends._let_workers_set_their_title``)."""
    log = tmp_path / "frd.log"
    sweep = start_frd(["rl", "--method", "frd", "--seeds", "1", *TINY, "--max-episodes", "1000000", "--backend", "ray",
                 "--cpus", "1", "--out", str(tmp_path / "out")], log)
    wait_for(lambda: running(sweep.pid, "ray::_group"), sweep, log, "a Ray worker running the group")
    inherited = [pid for pid in running(sweep.pid, "ray::_group")
                 if b"RAY_CLIENT_MODE=" in Path(f"/proc/{pid}/environ").read_bytes()]
    temp_dir = _removed_by_reaper(sweep.pid)
    assert temp_dir.name.startswith("frdray") and temp_dir.exists()
    below = kill_9(sweep)
    assert not left_after(below)
    assert not temp_dir.exists()
    assert not inherited


def _removed_by_reaper(root: int) -> Path:
    """The folder the reaper below ``root`` is to remove (its ``--remove``): this frd's Ray temp dir,
    not another test's."""
    for pid, _ in reaper.descendants(root):
        args = command_line(pid)
        if "frd.reaper" in args and "--remove" in args:
            return Path(args[args.index("--remove") + 1])
    raise AssertionError("no reaper with a folder to remove below frd")


# -- a real multi-process cluster: ray start --head, frd as its driver ---------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _group_members(pgid: int) -> list[str]:
    return subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True).stdout.split()


def _stop_group(process: subprocess.Popen) -> list[str]:
    """SIGTERM, then SIGKILL, to the process group of ``process`` (the processes ``ray start``
    started, nothing else); returns the members still there after both."""
    for sig, wait in ((signal.SIGTERM, 1), (signal.SIGKILL, 5)):  # a short grace: only this head's state is lost
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return []
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if process.poll() is not None and not _group_members(process.pid):
                return []
            time.sleep(0.2)
    return _group_members(process.pid)


HEAD_TRIES = 3
"""``ray start`` attempts before the fixture gives up: a port is free when chosen, but another
process (a Ray or Flower in the other xdist worker) may take it before the head binds it."""


def _settled(head: subprocess.Popen, log: Path) -> bool:
    """Whether ``head`` has started (Ray said so) or exited."""
    return head.poll() is not None or "Ray runtime started." in log.read_text()


def _start_head(temp_dir: str, log: Path, env: dict[str, str]) -> tuple[subprocess.Popen, int]:
    """A ``ray start --head`` whose GCS is up on a port of its own, and that port.

    Ready means Ray said "Ray runtime started.", not that the port answers: a head whose GCS lost
    its port to another process runs on for ~35 s while that process answers there (measured with a
    listener on the port), and a driver would join that process instead."""
    for _ in range(HEAD_TRIES):
        port = _free_port()
        head = subprocess.Popen(
            [str(Path(sys.executable).with_name("ray")), "start", "--head", "--block", "--port", str(port),
             "--node-ip-address", "127.0.0.1", "--temp-dir", temp_dir, "--num-cpus", "2",
             "--include-dashboard=false", "--disable-usage-stats", "--object-store-memory", str(200 * 1024 ** 2),
             "--include-log-monitor=false", "--dashboard-port", str(_free_port()),
             "--dashboard-agent-listen-port", str(_free_port()), "--ray-client-server-port", str(_free_port())],
            env=env, start_new_session=True, stdout=open(log, "w"), stderr=subprocess.STDOUT)
        try:
            wait_for(partial(_settled, head, log), head, log, "ray start --head", timeout_s=120)
        except BaseException:
            _stop_group(head)
            raise
        if head.poll() is None:
            return head, port
        assert not _stop_group(head), "processes of a failed head left"
    raise AssertionError(f"ray start failed {HEAD_TRIES} times; the last: " + log.read_text()[-2000:])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A one-machine Ray cluster started as ``ray start --head`` would be on a real head (its own
    processes, loopback, free ports); this test process connects once as the driver so that the
    tests below share its workers. Yields the head address."""
    temp_dir = tempfile.mkdtemp(prefix="frdhead", dir="/tmp")  # short: Unix socket paths
    log = tmp_path_factory.mktemp("head") / "head.log"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}  # toy_domain
    head = None
    guard = reaper.start(remove=(temp_dir,))  # this worker killed (a timeout, Ctrl-C twice): no head outlives it
    try:
        head, port = _start_head(temp_dir, log, env)
        address = f"127.0.0.1:{port}"
        with RaySession(Backend("ray", address=address)) as session:  # the HOST:PORT path of the CLI
            assert session.cpus == 2 and session.connected and not session.started  # joined, not frd's to stop
            yield address
            assert head.poll() is None  # frd left the cluster it joined running
        session.ray.shutdown()  # disconnect this driver
    finally:
        leftovers = _stop_group(head) if head is not None else []
        for _ in range(10):  # the last exits may still write logs
            shutil.rmtree(temp_dir, ignore_errors=True)
            if not os.path.exists(temp_dir):
                break
            time.sleep(0.2)
        reaper.stop(guard)
    assert not leftovers, f"processes of the head left: {leftovers}"


def test_rl_on_the_cluster_gives_the_tables_of_a_local_run(tmp_path, cluster, monkeypatch):
    """frd compare on the ray start cluster (3 groups) = one local batch; the backend is recorded,
    not in the resume key; each run's provenance comes from the worker that ran it."""
    sweep = ["compare", "--methods", "frd,pd,frl,independent", "--seeds", "8", *TINY]
    assert main([*sweep, "--out", str(tmp_path / "local")]) == 0

    def not_on_the_driver():
        raise AssertionError("the driver described a run that a worker computed")
    monkeypatch.setattr(results, "machine_provenance", not_on_the_driver)
    assert main([*sweep, "--backend", "ray", "--address", cluster, "--groups", "3",
                 "--out", str(tmp_path / "ray")]) == 0
    _assert_same_tables(tmp_path / "local", tmp_path / "ray")
    local, on_ray = (pd.read_csv(tmp_path / d / "provenance.csv", dtype=str).drop(columns="command")
                     for d in ("local", "ray"))
    pd.testing.assert_frame_equal(local, on_ray)  # one machine: the same versions, code and cpu
    assert len(pd.read_csv(tmp_path / "ray" / "runs.csv")) == 32
    saved = [json.loads((tmp_path / d / "config.json").read_text()) for d in ("local", "ray")]
    assert saved[1]["config"]["backend"] == {"name": "ray", "address": cluster, "groups": 3, "cpus": None,
                                               "workers": 1}
    assert saved[0]["config"]["backend"]["name"] == "local" and saved[0]["resume_key"] == saved[1]["resume_key"]


def test_partial_participation_and_codecs_on_the_cluster_give_the_tables_of_a_local_run(tmp_path, cluster):
    """Each run draws its round's participants and its codecs' rounding from its own streams, and
    keeps its own references and residuals, so Ray's groups draw as one batch."""
    sweep = ["compare", "--methods", "frd,pd,frl", "--seeds", "3", *TINY, "--agents", "4", "--agents-per-round", "2",
             "--codec-up", "topk:0.2+q8", "--error-feedback", "--codec-down", "q4"]
    assert main([*sweep, "--out", str(tmp_path / "local")]) == 0
    assert main([*sweep, "--backend", "ray", "--address", cluster, "--groups", "2", "--out", str(tmp_path / "ray")]) == 0
    _assert_same_tables(tmp_path / "local", tmp_path / "ray")
    assert (pd.read_csv(tmp_path / "ray" / "runs.csv")["agents_per_round"] == 2).all()


def _saving(monkeypatch, stop_after: int | None = None) -> list:
    """The tables of every run saved from now on; with ``stop_after``, a KeyboardInterrupt (as
    Ctrl-C would raise) once that many are saved."""
    real_save, saved = ResultStore.save_run, []

    def save(self, tables):
        real_save(self, tables)
        saved.append(tables)
        if len(saved) == stop_after:
            raise KeyboardInterrupt
    monkeypatch.setattr(ResultStore, "save_run", save)
    return saved


@pytest.mark.parametrize("first, then", [("ray", "local"), ("local", "ray")])
def test_a_sweep_interrupted_on_one_backend_resumes_on_the_other(first, then, tmp_path, monkeypatch, cluster):
    config = RLConfig(methods=("pd", "frd", "independent"), seeds=3, **TINY_CONFIG)
    backends = {"local": Backend(), "ray": Backend("ray", address=cluster, groups=2)}
    experiment.run_experiment(config, tmp_path / "full", progress=False)

    _saving(monkeypatch, stop_after=4)
    with pytest.raises(KeyboardInterrupt):
        experiment.run_experiment(config, tmp_path / "resumed", progress=False, backend=backends[first])
    saved = pd.read_csv(tmp_path / "resumed" / "runs.csv")
    assert len(saved) == 4

    asked: list = []  # the runs given to the engine: the local batch, or the Ray backend
    if then == "local":
        real_simulate = experiment.simulate
        monkeypatch.setattr(experiment, "simulate", lambda config, runs, *a, **k:
                            asked.extend(runs) or real_simulate(config, runs, *a, **k))
    else:
        real_execute = Backend.execute
        monkeypatch.setattr(Backend, "execute", lambda self, runs, shared, items, *a, **k:
                            asked.extend(items) or real_execute(self, runs, shared, items, *a, **k))
    executed = _saving(monkeypatch)
    experiment.run_experiment(config, tmp_path / "resumed", progress=False, backend=backends[then])
    missing = {(m, s) for m in config.methods for s in range(3)} - set(zip(saved.method, saved.seed))
    assert sorted(asked) == sorted(missing) and len(executed) == len(missing) == 5  # nothing finished redone
    _assert_same_tables(tmp_path / "full", tmp_path / "resumed")


def test_classification_on_the_cluster_matches_local(tmp_path, cluster):
    tiny = ["cls", "--method", "fl", "--dataset", "digits", "--rounds", "2", "--iterations", "2",
            "--devices", "3", "--seeds", "3", "--codec-up", "q4", "--codec-down", "fp16", "--no-progress"]
    assert main([*tiny, "--out", str(tmp_path / "local")]) == 0
    assert main([*tiny, "--backend", "ray", "--address", cluster, "--groups", "2", "--out", str(tmp_path / "ray")]) == 0
    for table, timing in (("runs", ["compute_s"]), ("rounds", ["compute_s"]), ("ledger", [])):
        local, on_ray = (pd.read_csv(tmp_path / d / f"{table}.csv").drop(columns=timing) for d in ("local", "ray"))
        pd.testing.assert_frame_equal(local, on_ray, obj=table)
    assert len(pd.read_csv(tmp_path / "ray" / "runs.csv")) == 3


def test_a_toy_domain_runs_on_the_cluster_as_locally(tmp_path, cluster, monkeypatch):
    """A domain the core has never heard of (``toy_domain``, registered by one line) runs its
    groups as Ray tasks through the same ``Backend.execute``: the tables of a local run."""
    import toy_domain

    monkeypatch.setitem(REGISTRY, "mean", toy_domain.DOMAIN)
    mean = ["mean", "--participants", "3", "--seeds", "4"]
    assert main([*mean, "--out", str(tmp_path / "local")]) == 0
    assert main([*mean, "--backend", "ray", "--address", cluster, "--groups", "2", "--out", str(tmp_path / "ray")]) == 0
    for table in ("runs", "ledger"):
        local, on_ray = (pd.read_csv(tmp_path / d / f"{table}.csv") for d in ("local", "ray"))
        pd.testing.assert_frame_equal(local, on_ray, obj=table)
    assert len(pd.read_csv(tmp_path / "ray" / "runs.csv")) == 4

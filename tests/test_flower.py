"""frd over real Flower processes on loopback: a deployment (a SuperLink and two SuperNodes as
subprocesses, ``frd flower run``) and ``frd flower sim`` give the tables of ``frd cls`` and
``frd rl`` / ``frd compare``.

Budgets are the smallest that still cross every path: every message costs a deployed node up to
3 s of Flower's polling, so a deployment runs two FRL rounds (three messages, served by the warm
runners of ``frd.flower.warm``), and one started as a user starts it runs two Mix2FLD rounds of
two seeds (outputs and mixed seeds up, weights down; the seed exchange adds a stage, and the seed
shortfall is counted on the devices), losing a participant on the way and resuming; the
simulation (its own simulation SuperLink and Ray: a deployment's SuperLink cannot serve it) runs
FRL, PD and FRD in one experiment under ``--until all`` (an agent retires, and the server then
asks only the other). The simulation and the deployment differ only in how Flower carries the
messages, not in what a domain sends, so one simulation (RL's) covers that path [our choice: a
simulation starts Ray, about 21 s].

compute_s is wall-clock time and left out of the comparison. RL tables are identical; in
classification the ledger is identical, accuracy and loss equal to test_remote.RTOL (per-device
training on a node may differ from the vmapped stack in the last bits, see test_remote.py)."""
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

import frd.flower
from frd.cli import main
from frd.flower.launch import LOOPBACK, free_port, start, start_deployment, stop, warm_command
from tests.processes import kill_9, kill_all, left_after, start_frd, wait_for
from tests.test_remote import RTOL

pytestmark = pytest.mark.processes  # every test here starts processes (pytest -m 'not processes' skips them)

TABLES = ("runs", "rounds", "ledger")


def cls_tables(out: Path) -> dict[str, pd.DataFrame]:
    return {t: pd.read_csv(out / f"{t}.csv").drop(columns=["compute_s"], errors="ignore") for t in TABLES}


def assert_as_in_process(tmp_path: Path, out: Path, flags: list[str]) -> None:
    assert main(["cls", *flags, "--out", str(tmp_path / "in-process"), "--no-progress"]) == 0
    local, remote = cls_tables(tmp_path / "in-process"), cls_tables(out)
    for table in TABLES:
        pd.testing.assert_frame_equal(remote[table], local[table], check_exact=table == "ledger", rtol=RTOL)
    transport = pd.read_csv(out / "transport.csv")
    charged = local["ledger"][["round", "participant", "direction", "kind", "bits"]]
    pd.testing.assert_frame_equal(transport[charged.columns], charged)
    assert (transport["wire_bytes"] * 8 >= transport["bits"]).all() and (transport["seconds"] >= 0).all()


def assert_rl_as_in_process(tmp_path: Path, out: Path, methods: str, flags: list[str], rounds: int) -> None:
    """``frd compare`` of the same flags in process wrote the same tables, bit for bit."""
    assert main(["compare", "--methods", methods, *flags, "--out", str(tmp_path / "in-process"), "--no-progress"]) == 0
    for table in ("episodes", "ledger", "runs"):
        local, remote = (pd.read_csv(folder / f"{table}.csv").drop(columns=["compute_s"], errors="ignore")
                         for folder in (tmp_path / "in-process", out))
        pd.testing.assert_frame_equal(remote, local, check_exact=True)
    runs, transport = pd.read_csv(out / "runs.csv"), pd.read_csv(out / "transport.csv")
    assert (runs["rounds"] == rounds).all() and (transport["wire_bytes"] * 8 >= transport["bits"]).all()



RL_FLAGS = ["--agents", "2", "--seeds", "1", "--hidden", "8", "--period", "10", "--max-episodes", "25"]
"""Rounds at episodes 10 and 20, the cap at 25: three messages per node."""


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    """A SuperLink and two nodes (participants 0 and 1 of 2), each with its warm runner, on free
    loopback ports; each process stopped by its PID afterwards. (Experiments go to it one
    at a time: a node serves one message at a time and polls every 3 s; two experiments at once,
    even on two deployments, took longer than one after the other.)"""
    processes: list = []
    try:
        folder = tmp_path_factory.mktemp("deployment")
        yield start_deployment(2, folder, processes), folder
    finally:
        stop(*processes)
        assert all(process.poll() is not None for process in processes)


def deployed(deployment: tuple[str, Path], flags: list[str], out: Path) -> None:
    """``frd flower run`` on the deployment; failing (or stopped by the test's time limit), the
    tail of each of the deployment's logs is printed into the test's report first."""
    address, folder = deployment
    try:
        assert main(["flower", "run", "--superlink", address, *flags, "--out", str(out), "--no-progress"]) == 0
    except BaseException:
        for log in sorted(folder.glob("*.log")):
            print(f"---- {log.name}\n{''.join(log.read_text().splitlines(keepends=True)[-40:])}")
        raise


def test_encoded_frl_rounds_cross_a_deployment_as_the_ledger_charges_them(deployment, tmp_path):
    """Two FRL rounds over a deployment give the in-process tables, bit for bit, with codecs: each
    node encodes its upload (top-k with error feedback) and decodes its q4 download, so the wire
    carries the parts (transport.csv's bits are read back from the bytes that crossed) and they are
    the ledger's, far below the floats' (130 actor weights: 4,160 bits). The sim test below and the
    lost-participant test cross at fp32."""
    flags = [*RL_FLAGS, "--codec-up", "topk:0.1+q8", "--error-feedback", "--codec-down", "q4"]
    deployed(deployment, ["--method", "frl", *flags], tmp_path / "flower")
    assert_rl_as_in_process(tmp_path, tmp_path / "flower", "frl", flags, rounds=2)
    transport, ledger = (pd.read_csv(tmp_path / "flower" / f"{t}.csv") for t in ("transport", "ledger"))
    pd.testing.assert_frame_equal(transport[["round", "participant", "direction", "bits"]],
                                  ledger[["round", "participant", "direction", "bits"]])
    assert (transport["bits"] < 4160 / 4).all()


def test_flower_sim_of_frl_pd_and_frd_gives_the_compare_tables(tmp_path, monkeypatch):
    # every agent runs to the mission (an easy one) or the cap: in each run one agent retires early
    # and the rounds go on with the other alone
    flags = ["--agents", "2", "--seeds", "1", "--first-seed", "5", "--hidden", "8", "--period", "5",
             "--max-episodes", "25", "--until", "all", "--target", "30"]
    system_tmp = Path(tempfile.mkdtemp(prefix="frdt", dir="/tmp"))  # where a simulation's Ray puts its session
    monkeypatch.setenv("TMPDIR", str(system_tmp))                     # by default (short: Unix socket paths)
    try:
        assert main(["flower", "sim", "--method", "frl,pd,frd", *flags, "--out", str(tmp_path / "flower"),
                     "--no-progress"]) == 0
        assert list(system_tmp.iterdir()) == []  # Ray's session was in the Flower home, removed with it
    finally:
        shutil.rmtree(system_tmp)
    assert_rl_as_in_process(tmp_path, tmp_path / "flower", "frl,pd,frd", flags, rounds=4)
    ledger = pd.read_csv(tmp_path / "flower" / "ledger.csv")
    uploads = ledger[ledger["direction"] == "up"].groupby(["run_id", "round"])["participant"].nunique()
    assert (uploads.groupby("run_id").min() == 1).all()


def test_a_lost_participant_ends_the_run_in_one_line_and_the_rerun_runs_only_what_is_missing(tmp_path):
    """A deployment started as a user starts it: ``frd flower link`` and two ``frd flower node``,
    each a command of its own. Once the first of two seeds is saved, participant 1's ``frd flower
    node`` is killed with ``kill -9``: nothing it started lives on (its SuperNode leaves the
    SuperLink as it goes), and the run ends with one line naming the participant and the seed
    missing; the seed saved stays. With the node back, the same command runs that seed alone, and
    the tables are those of ``frd cls`` in process (400 mixes ask more of each device's ~720
    samples than they hold: the shortfall is the devices' count). Then ``kill -9`` of the link and both nodes
    leaves nothing of theirs running."""
    superlink, logs, out = f"{LOOPBACK}:{free_port()}", tmp_path / "logs", tmp_path / "out"
    logs.mkdir()

    def started(args: list[str], name: str, says: str):
        log = logs / f"{name}.log"
        process = start_frd(["flower", *args], log)
        commands.append(process)
        return process, log, says

    def node(k: int, name: str):
        return started(["node", "--superlink", superlink, "--participant", str(k), "--participants", "2"], name,
                       f"participant {k} of 2 connected")

    def ready(process, log, says):
        wait_for(lambda: says in log.read_text(), process, log, says)
        return process

    commands: list = []
    flags = ["--method", "mix2fld", "--dataset", "digits", "--devices", "2", "--rounds", "2", "--iterations", "3",
             "--n-mix", "400", "--server-iterations", "5", "--seeds", "2"]
    run = ["run", "--superlink", superlink, *flags, "--out", str(out), "--no-progress"]  # a stage: a message each way, 3-6 s
    try:
        link, *nodes = [ready(*p) for p in (started(["link", "--port", superlink.rpartition(":")[2]], "link",
                                                    "SuperLink on"), node(0, "node0"), node(1, "node1"))]
        submitted, log, _ = started(run, "run", "")
        seed0 = out / "parts" / "runs" / "mix2fld-seed0.csv"
        wait_for(seed0.exists, submitted, log, "seed 0 saved")
        below = kill_9(nodes[1])
        assert submitted.wait(timeout=180) == 2
        assert not left_after(below)
        said = log.read_text()
        assert said.count("\n") == 1 and "Traceback" not in said, said
        assert "ended without mix2fld-seed1" in said and "participant 1 (Flower node" in said, said
        kept = {p: p.stat().st_mtime_ns for p in (out / "parts").glob("*/mix2fld-seed0.csv")}
        assert {p.name for p in (out / "parts" / "runs").glob("*.csv")} == {"mix2fld-seed0.csv"} and len(kept) > 1

        nodes[1] = ready(*node(1, "node1-again"))
        assert main(["flower", *run]) == 0
        assert {p: p.stat().st_mtime_ns for p in kept} == kept  # seed 0 was not run again
        runs = pd.read_csv(out / "runs.csv")
        assert list(runs["seed"]) == [0, 1] and (runs["seed_shortfall"] > 0).all()
        assert_as_in_process(tmp_path, out, flags)

        below = set().union(*(kill_9(p) for p in (link, *nodes)))
        assert not left_after(below)
    finally:
        kill_all(*commands)


def test_stop_ends_processes_together_and_kills_one_that_ignores_sigterm(tmp_path):
    stubborn = start(["sh", "-c", "trap '' TERM; echo ready; exec sleep 60"], tmp_path, tmp_path / "stubborn.log")
    polite = start(["sleep", "60"], tmp_path, tmp_path / "polite.log")
    while "ready" not in (tmp_path / "stubborn.log").read_text():
        assert stubborn.poll() is None
        time.sleep(0.05)
    stop(stubborn, polite, grace_s=0.5)
    assert (stubborn.returncode, polite.returncode) == (-signal.SIGKILL, -signal.SIGTERM)


def test_without_flwr_the_error_names_the_extra(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(frd.flower.util, "find_spec", lambda name: None)
    assert main(["flower", "sim", "--out", str(tmp_path / "x")]) == 2
    assert "pip install 'frd[flower]'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("argv, match", [
    (["node", "--superlink", "nowhere", "--participant", "0", "--participants", "2"], "--superlink is HOST:PORT"),
    (["node", "--superlink", "127.0.0.1:1", "--participant", "2", "--participants", "2"], "--participant must lie in 0..1"),
    (["run", "--superlink", "127.0.0.1:99999", "--out", "never"], "--superlink is HOST:PORT"),
    (["sim", "--method", "mixfrd", "--out", "never"], "mixfrd draws its uploads from the round's generator"),
    (["sim", "--method", "fl,fd", "--out", "never"], "frd flower runs one classification method at a time"),
    (["sim", "--method", "frl", "--agents", "2", "--agent-spec", "h=8;h=16", "--out", "never"], "frl averages weights"),
])
def test_bad_flower_flags_are_one_line(argv, match, capsys):
    assert main(["flower", *argv]) == 2
    err = capsys.readouterr().err
    assert match in err and err.count("\n") == 1


@pytest.mark.parametrize("fab_id, app, status, reply", [
    ("frd/frd-app", lambda message, context: f"reply to {message}", "completed", "reply to message"),
    ("frd/frd-app", lambda message, context: 1 / 0, "failed", "error: <class 'ZeroDivisionError'>:<'division by zero'>"),
    ("someone/else", lambda message, context: "never", "failed",
     "error: <class 'ValueError'>:<'this runner serves frd's app (frd/frd-app), not 'someone/else''>"),
])
def test_the_warm_runner_pushes_the_reply_or_the_error_then_the_status(monkeypatch, fab_id, app, status, reply):
    """``run_task``'s bookkeeping around frd's ClientApp, with the Runtime API calls recorded: the
    heartbeat stops before the status voids the task's token."""
    import frd.flower.warm as warm

    pushed: list = []

    class Quiet:
        def __init__(self, *args):
            pass

        start = close = lambda self: None

    class Heartbeat(Quiet):
        def stop(self):
            pushed.append("heartbeat stopped")

    run = type("Run", (), {"fab_id": fab_id})()
    monkeypatch.setattr(warm, "_runtime_client", lambda *args: Quiet())
    monkeypatch.setattr(warm, "HeartbeatSender", Heartbeat)
    monkeypatch.setattr(warm, "make_task_heartbeat_fn_http", lambda client: None)
    monkeypatch.setattr(warm, "pull_task_input", lambda client: ("message", "context", run, "fab"))
    monkeypatch.setattr(warm, "frd_client", app)
    monkeypatch.setattr(warm, "Error", lambda code, reason: f"error: {reason}")
    monkeypatch.setattr(warm, "Message", lambda content, reply_to: content)
    monkeypatch.setattr(warm, "push_message", lambda client, message, context: pushed.append(("message", message)))
    monkeypatch.setattr(warm, "push_task_output", lambda client, context, sub_status, details:
                        pushed.append(("output", context, sub_status)))
    warm.run_task("127.0.0.1:1", "token")
    assert pushed == [("message", reply), "heartbeat stopped", ("output", "context", status)]


def test_a_warm_runner_ignores_sigint_while_its_parent_lives_and_ends_with_it(tmp_path):
    """Flower's HTTP retry answers a refused task token with a SIGINT to its own process; a warm
    runner lives on (its node would otherwise serve nothing, and the next run wait for ever), and
    still ends once its SuperNode (here a ``sleep``) is gone."""
    parent = start(["sleep", "600"], tmp_path, tmp_path / "parent.log")
    runner = start(warm_command("client", free_port(), parent.pid), tmp_path, tmp_path / "runner.log")
    try:
        wait_for(lambda: "ready" in (tmp_path / "runner.log").read_text(), runner, tmp_path / "runner.log", "runner")
        runner.send_signal(signal.SIGINT)
        wait_for(lambda: "SIGINT ignored" in (tmp_path / "runner.log").read_text(), runner, tmp_path / "runner.log",
                 "the runner's note of the SIGINT")
        assert runner.poll() is None
        stop(parent)
        runner.wait(timeout=30)
    finally:
        stop(runner, parent)


def test_a_node_started_for_another_number_of_participants_says_so(monkeypatch):
    from flwr.app import Context, Message, RecordDict
    from flwr.supercore.task_identity import TaskIdentity

    from frd.classification.methods import cls_config
    from frd.domains import get_domain
    from frd.flower.apps import step
    from frd.flower.spec import RUN_CONFIG_KEY, spec

    context = Context(run_id=1, node_id=7, node_config={"partition-id": 1, "num-partitions": 2}, state=RecordDict(),
                      run_config={RUN_CONFIG_KEY: spec(get_domain("cls"), cls_config("fd", devices=1), "out")})
    for name in ("_task_id", "_run_id", "_node_id"):  # a message is made inside a task, which Flower identifies
        monkeypatch.setattr(TaskIdentity, name, 1)
    with pytest.raises(frd.errors.FrdError, match="this node was started for 2 participants, the run has 1"):
        step(Message(RecordDict(), dst_node_id=7, message_type="train"), context)


def test_a_task_that_fails_outside_the_app_does_not_end_the_runner(monkeypatch):
    """``serve`` goes on to the next task when one raises (a push that failed, say)."""
    import frd.flower.warm as warm

    tasks = iter(["first", "second", "stop"])
    ran: list = []

    class Acquired:
        def __init__(self):
            self.token = next(tasks)

        def HasField(self, name):
            return True

    class SuperExec:
        def AcquireTask(self, request):
            return Acquired()

    def run(address, token):
        if token == "stop":
            raise KeyboardInterrupt
        ran.append(token)
        if token == "first":
            raise ConnectionError("push failed")

    monkeypatch.setattr(warm, "_runtime_client", lambda *args: SuperExec())
    with pytest.raises(KeyboardInterrupt):
        warm.serve("127.0.0.1:1", "flwr-clientapp", run)
    assert ran == ["first", "second"]

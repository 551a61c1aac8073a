"""The processes of a Flower deployment, started with network hygiene set in code.

Every Flower process gets telemetry and update checks off, a private ``FLWR_HOME`` whose
``config.toml`` names only our SuperLink (without one the CLI writes a default pointing at a
remote service), app dependencies never installed at run time, and this checkout first on
``PYTHONPATH`` so its children import the same frd. Each process leads its own process group and
is stopped through its PID.

No orphans, however frd ends (``kill -9`` included): on Linux every process started here asks the
kernel for SIGTERM when its parent, the frd process, dies (``PR_SET_PDEATHSIG``, set between fork
and exec; the kernel sends it when the *thread* that started the process ends, so start them from
one that lives as long as they should). SIGTERM rather than SIGKILL so that a SuperNode still
leaves its SuperLink (the run then learns at once that the participant is gone, not after the
missed heartbeats). What SIGTERM does not end in time (a SuperLink waits for open connections)
and what these processes start in sessions of their own (a simulation and its Ray) are left to
the reaper each command runs (``frd.reaper``): SIGKILL after its grace. A warm runner also
watches its SuperNode or SuperLink (``frd.flower.warm``). [our choice] Elsewhere than Linux only
the runner's watch remains.
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from frd.errors import FrdError
from frd.flower.spec import RUN_CONFIG_KEY
from frd.workers import PR_SET_PDEATHSIG

ROOT = Path(__file__).resolve().parents[2]
HYGIENE = {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1", "RAY_USAGE_STATS_ENABLED": "0",
           "FLWR_SUPEREXEC_TASK_POLL_INTERVAL": "0.1", "RAY_worker_niceness": "0"}
"""No telemetry, update checks or usage statistics; a node's app runner looks for work every 0.1 s
(Flower's default 1 s adds up to a second to every message); a simulation's Ray workers at the
usual priority (Ray's default, nice 15, starves them beside any other job, as in ``frd.backends``)."""
LOOPBACK = "127.0.0.1"
READY_S = 60.0
"""How long a SuperLink may take to listen."""
APP_TOML = """[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "frd-app"
version = "1.0.0"
description = "frd's exchange over Flower; the components are the installed frd"
license = "MIT"
dependencies = []

[tool.flwr.app]
publisher = "frd"

[tool.flwr.app.components]
serverapp = "frd.flower.apps:server"
clientapp = "frd.flower.apps:client"

[tool.flwr.app.config]
{key} = {spec}
"""


def flower_env(home: Path) -> dict[str, str]:
    """This process's environment with the hygiene above and ``home`` as FLWR_HOME; Flower finds
    its other tools (flower-superexec) on PATH, so this environment's scripts come first. A
    simulation's Ray keeps its session in ``home`` too (RAY_TMPDIR), removed with it: in /tmp/ray,
    where Ray puts it by default, every ``frd flower sim`` left one (~200 KB)."""
    python_path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    path = os.pathsep.join(p for p in (str(Path(sys.executable).parent), os.environ.get("PATH", "")) if p)
    return {**os.environ, **HYGIENE, "FLWR_HOME": str(home), "RAY_TMPDIR": str(home), "PYTHONPATH": python_path,
            "PATH": path}


def write_home(home: Path, superlink: str) -> None:
    """A private FLWR_HOME whose only connection (the default) is ``superlink``, insecure."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f'[superlink]\ndefault = "frd"\n\n[superlink.frd]\naddress = "{superlink}"\n'
                                      "insecure = true\n")


def write_app(folder: Path, spec: str) -> Path:
    """A Flower app that is only a pyproject.toml: its components are the installed frd, its run
    config the experiment (``spec``)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(APP_TOML.format(key=RUN_CONFIG_KEY, spec=json.dumps(spec)))
    return folder


def free_port(host: str = LOOPBACK) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _tool(name: str) -> str:
    """A Flower console script of this interpreter's environment."""
    return str(Path(sys.executable).parent / name)


def superlink_command(host: str, port: int, simulation: bool) -> list[str]:
    """A SuperLink on ``host:port``; a simulation's runs its own simulation processes, a
    deployment's leaves its runs to a process of ours (``--isolation process``, see ``start_link``)."""
    return [_tool("flower-superlink"), "--insecure", "--host", host, "--port", str(port),
            "--disable-runtime-dependency-installation", *(["--simulation"] if simulation else ["--isolation", "process"])]


def supernode_command(superlink: str, participant: int, participants: int, port: int) -> list[str]:
    """A SuperNode that leaves its ClientApp tasks to a process of ours (``--isolation process``),
    served on the loopback Runtime API at ``port``."""
    return [_tool("flower-supernode"), "--insecure", "--superlink", superlink, "--host", LOOPBACK, "--port", str(port),
            "--isolation", "process", "--node-config", f"partition-id={participant} num-partitions={participants}"]


def warm_command(app: str, port: int, parent_pid: int) -> list[str]:
    """frd's warm runner (``frd.flower.warm``) of ``app`` (client or server) for the SuperNode or
    SuperLink whose Runtime API is on loopback at ``port``."""
    return [sys.executable, "-m", "frd.flower.warm", app, "--runtime-api-address", f"{LOOPBACK}:{port}",
            "--parent-pid", str(parent_pid)]




def end_with_parent() -> Callable[[], None] | None:
    """A function for Popen's ``preexec_fn`` (it runs in the child between fork and exec) that
    makes the child receive SIGTERM when this process dies; None where prctl is not available."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here: the child only calls it
    parent = os.getpid()

    def in_child() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the request: nobody will send it
            os._exit(1)
    return in_child


def start(command: Sequence[str], home: Path, log: Path) -> subprocess.Popen:
    """``command`` in its own process group, output to ``log``, ended when this process ends."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        return subprocess.Popen(list(command), env=flower_env(home), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=end_with_parent())


def _kill_group(process: subprocess.Popen, sig: signal.Signals) -> None:
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop(*processes: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM to each process's group (its PID), all at once so that a deployment shuts down in
    one grace period rather than one per process; SIGKILL to any still running after ``grace_s``
    and to children left in each group (a ServerApp or ClientApp in flight)."""
    for process in processes:
        if process.poll() is None:
            _kill_group(process, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for process in processes:
        try:
            process.wait(max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            _kill_group(process, signal.SIGKILL)
            process.wait()
        _kill_group(process, signal.SIGKILL)


def tail(log: Path, lines: int = 5) -> str:
    text = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
    return " | ".join(text[-lines:])


def _wait_until(ready: Callable[[], bool], process: subprocess.Popen, name: str, log: Path, timeout: str) -> None:
    """Until ``ready()``; ``process`` (called ``name``) exiting first, or ``READY_S`` passing, is an FrdError."""
    deadline = time.monotonic() + READY_S
    while not ready():
        if process.poll() is not None:
            raise FrdError(f"{name} exited ({process.returncode}): {tail(log)}")
        if time.monotonic() > deadline:
            raise FrdError(f"{timeout} after {READY_S:.0f} s; see {log}")
        time.sleep(0.1)


def wait_listening(process: subprocess.Popen, port: int, log: Path, host: str = LOOPBACK) -> None:
    """Until ``process`` accepts connections on ``port``; an exit or a timeout is an FrdError."""
    def listening() -> bool:
        with socket.socket() as s:
            return s.connect_ex((host, port)) == 0

    _wait_until(listening, process, Path(str(process.args[0])).name, log,  # type: ignore[index]
                f"nothing listens on {host}:{port}")


def ready_line(app: str, port: int) -> str:
    """What a warm runner prints once it has imported frd and serves the Runtime API at ``port``."""
    return f"frd warm {app} runner ready for {LOOPBACK}:{port}"


@dataclass
class _Runner:
    app: str
    port: int
    log: Path
    process: subprocess.Popen

    def wait_ready(self) -> None:
        """Until the runner says it is ready in its log; an exit or a timeout is an FrdError."""
        def said() -> bool:
            return self.log.exists() and ready_line(self.app, self.port) in self.log.read_text(errors="replace")

        _wait_until(said, self.process, f"frd's warm {self.app} runner", self.log,
                    f"frd's warm {self.app} runner not ready")


def _start_runner(app: str, parent: subprocess.Popen, port: int, home: Path, log: Path,
                  processes: list[subprocess.Popen]) -> _Runner:
    """Once ``parent`` (a SuperLink or SuperNode) listens on ``port``, its warm runner."""
    wait_listening(parent, port, log)
    processes.append(start(warm_command(app, port, parent.pid), home, log))
    return _Runner(app, port, log, processes[-1])


def start_link(host: str, port: int, home: Path, log: Path, processes: list[subprocess.Popen]) -> None:
    """A deployment's SuperLink and the warm runner that runs its ServerApps, until the runner is
    ready; each process appended to ``processes`` as it starts, for the caller to stop."""
    processes.append(start(superlink_command(host, port, simulation=False), home, log))
    _start_runner("server", processes[-1], port, home, log, processes).wait_ready()


def start_node(superlink: str, participant: int, participants: int, port: int, home: Path, log: Path,
               processes: list[subprocess.Popen]) -> None:
    """One participant's node: a SuperNode and the warm runner that serves its ClientApp tasks,
    until the runner is ready; each appended to ``processes`` as it starts, for the caller to stop."""
    processes.append(start(supernode_command(superlink, participant, participants, port), home, log))
    _start_runner("client", processes[-1], port, home, log, processes).wait_ready()


def start_deployment(participants: int, folder: Path, processes: list[subprocess.Popen]) -> str:
    """A SuperLink and one node per participant on free loopback ports, logs and homes in
    ``folder``, ready to serve; each process appended to ``processes`` as it starts. Returns the
    SuperLink's address. Everything starts at once (a SuperNode retries until the SuperLink
    listens): each process spends seconds importing."""
    port = free_port()
    address = f"{LOOPBACK}:{port}"
    processes.append(start(superlink_command(LOOPBACK, port, simulation=False), folder / "link", folder / "link.log"))
    link = processes[-1]
    nodes = []
    for k in range(participants):
        node_port, home, log = free_port(), folder / f"node{k}", folder / f"node{k}.log"
        processes.append(start(supernode_command(address, k, participants, node_port), home, log))
        nodes.append((processes[-1], node_port, home, log))
    runners = [_start_runner("server", link, port, folder / "link", folder / "link.log", processes)]
    runners += [_start_runner("client", *node, processes) for node in nodes]
    for runner in runners:
        runner.wait_ready()
    return address


def flwr_run(app: Path, home: Path, log: Path, supernodes: int | None = None) -> None:
    """``flwr run`` of ``app`` on the home's SuperLink, until the run ends (``--stream``);
    ``supernodes``: the size of a simulated federation."""
    command = [_tool("flwr"), "run", str(app), "frd", "--stream"]
    if supernodes is not None:
        command += ["--federation-config", f"num-supernodes={supernodes}"]
    process = start(command, home, log)
    try:
        process.wait()
    finally:  # also on Ctrl-C or kill: no flwr left behind
        stop(process)
    if process.returncode != 0:
        raise FrdError(f"flwr run failed ({process.returncode}): {tail(log)}")

"""``frd flower``: an experiment over Flower, simulated here or across machines, with one node
per participant: a classification device, or an RL agent.

``sim`` starts its own simulation SuperLink on a free loopback port, runs the app and stops it.
``sim``, ``link`` and ``node`` each run a reaper (``frd.reaper``): killed in any way, they leave
no process behind, Flower's simulation and its Ray included.
A deployment is ``link`` on one machine, ``node`` once per participant (anywhere that reaches
the link: a SuperNode and frd's warm ClientApp runner, ``frd.flower.warm``), and ``run`` to
submit an experiment; the tables are written by the ServerApp, on the link's machine, into
``--out``. ``sim`` and ``run`` take ``frd cls``'s flags, or with an RL method (``--method frl``,
or several: ``--method frd,pd``) ``frd rl``'s.
"""
from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from frd import reaper
from frd.domains import Domain, domains, get_domain
from frd.errors import FrdError
from frd.flower import require_flwr
from frd.flower.launch import (
    LOOPBACK,
    flwr_run,
    free_port,
    start,
    start_link,
    start_node,
    stop,
    superlink_command,
    tail,
    wait_listening,
    write_app,
    write_home,
)
from frd.flower.spec import spec
from frd.results import ResultStore

DEFAULT_DOMAIN = "cls"
"""The domain of ``sim`` and ``run`` when no ``--method`` names another's method."""


def _methods(args: list[str]) -> list[str]:
    """The value of ``--method`` in ``args``, split at commas (empty when not given)."""
    method = argparse.ArgumentParser(add_help=False, allow_abbrev=False)  # `--meth` is no `--method`
    method.add_argument("--method", default="")
    return method.parse_known_args(args)[0].method.split(",")


def _domain(methods: list[str]) -> Domain:
    """The domain one of whose methods ``methods`` names (else ``DEFAULT_DOMAIN``)."""
    named = {m.strip() for m in methods}
    return next((d for d in domains().values() if named & set(d.methods)), None) or get_domain(DEFAULT_DOMAIN)


def _by_method(parser_class: type, prog: str, help_text: str, deployed: bool) -> Callable[[list[str]], argparse.ArgumentParser]:
    """``sim``'s or ``run``'s flags: those of the domain whose method ``--method`` names."""
    def build(args: list[str]) -> argparse.ArgumentParser:
        domain = _domain(_methods(args))
        p = parser_class(prog=prog, description=help_text + " " + (__doc__ or "").split("\n\n")[-1].strip())
        if deployed:
            p.add_argument("--superlink", required=True, metavar="HOST:PORT", help="the SuperLink's address")
        domain.add_remote_arguments(p, deployed)
        p.set_defaults(run=run_deployed if deployed else run_sim, domain=domain.name)
        return p
    return build


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("flower", help="run an experiment over Flower (simulated, or across machines)",
                              description=__doc__)
    sub = p.add_subparsers(dest="flower_command", required=True, parser_class=type(p))
    for name, text, deployed in (("sim", "a simulated Flower federation on this machine, one node per participant", False),
                                 ("run", "submit an experiment to a running SuperLink (frd flower link)", True)):
        sub.add_parser(name, help=text).delegate = _by_method(type(p), f"frd flower {name}", text, deployed)
    link = sub.add_parser("link", help="start a SuperLink and wait (Ctrl-C stops it)")
    link.add_argument("--host", default=LOOPBACK, help="address to listen on (default loopback; 0.0.0.0 for other machines)")
    link.add_argument("--port", type=int, default=9092, help="port (default 9092)")
    link.set_defaults(run=run_link)
    node = sub.add_parser("node", help="start the SuperNode of one participant and wait (Ctrl-C stops it)")
    node.add_argument("--superlink", required=True, metavar="HOST:PORT", help="the SuperLink's address")
    node.add_argument("--participant", type=int, required=True, metavar="K", help="this node's device or agent, 0..N-1")
    node.add_argument("--participants", type=int, required=True, metavar="N", help="devices or agents of the experiment")
    node.add_argument("--port", type=int, help="loopback port of the node's app runtime (default a free one)")
    node.set_defaults(run=run_node)


def _address(text: str) -> str:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise FrdError(f"--superlink is HOST:PORT (e.g. 10.0.0.5:9092), got {text!r}")
    return text


def _checked(args: argparse.Namespace) -> tuple[Domain, Any, Path]:
    """The experiment's domain, config and absolute results folder, built once here so that bad
    input is one line before any process starts."""
    require_flwr()
    domain = get_domain(args.domain)
    config, out = domain.remote_config(args)
    return domain, config, out


def _report(domain: Domain, config: Any, out: Path, log: Path) -> None:
    store = ResultStore(out, config, config.resume_key())
    missing = domain.run_ids(config) - store.finished()
    if missing:
        raise FrdError(f"the Flower run ended without {', '.join(sorted(missing))}: {tail(log, 1)}")
    domain.report(config, store)


def run_sim(args: argparse.Namespace) -> int:
    domain, config, out = _checked(args)
    log = out / "flower.log"
    with tempfile.TemporaryDirectory(prefix="frd-flwr-") as tmp:
        home, port = Path(tmp), free_port()
        write_home(home, f"{LOOPBACK}:{port}")
        guard = reaper.start(remove=(tmp,))  # killed, this command leaves no home behind
        try:
            link = start(superlink_command(LOOPBACK, port, simulation=True), home, log)
            try:
                wait_listening(link, port, log)
                flwr_run(write_app(home / "app", spec(domain, config, str(out))), home, log,
                         supernodes=domain.participants(config))
            finally:
                stop(link)
        finally:
            reaper.stop(guard)
    _report(domain, config, out, log)
    return 0


def run_deployed(args: argparse.Namespace) -> int:
    superlink = _address(args.superlink)
    domain, config, out = _checked(args)
    with tempfile.TemporaryDirectory(prefix="frd-flwr-") as tmp:
        home = Path(tmp)
        write_home(home, superlink)
        log = home / "flwr-run.log"
        flwr_run(write_app(home / "app", spec(domain, config, str(out))), home, log)
        if not (out / "config.json").exists():
            print(f"submitted; the tables are in {out} on the SuperLink's machine")
            return 0
        _report(domain, config, out, log)
    return 0


def _serve(launch: Callable[[Path, Path, list[subprocess.Popen]], None], what: str) -> int:
    """Start Flower's processes (``launch`` appends each to the list), then wait until one exits or
    this command is stopped; either way stop them all by PID. Killed (``kill -9``), the kernel sends
    each SIGTERM (``frd.flower.launch``), and a reaper sends SIGKILL to any still there
    ``frd.reaper.GRACE_S`` later (a SuperLink waits on open connections, a ``flwr run --stream``,
    before it exits) and removes the home."""
    with tempfile.TemporaryDirectory(prefix="frd-flwr-") as tmp:
        home = Path(tmp)
        log = home / "flower.log"
        processes: list[subprocess.Popen] = []
        guard = reaper.start(remove=(tmp,))  # killed, this command leaves no home behind
        try:
            launch(home, log, processes)
            print(what, flush=True)
            while all(process.poll() is None for process in processes):
                time.sleep(0.5)
        finally:
            stop(*processes)
            reaper.stop(guard)
        exited = next(p for p in processes if p.returncode is not None)
        raise FrdError(f"{Path(str(exited.args[0])).name} exited ({exited.returncode}): {tail(log)}")  # type: ignore[index]


def run_link(args: argparse.Namespace) -> int:
    require_flwr()
    address = f"{args.host}:{args.port}"

    def launch(home: Path, log: Path, processes: list[subprocess.Popen]) -> None:
        start_link(args.host, args.port, home, log, processes)

    return _serve(launch, f"SuperLink on {address}; start the nodes with frd flower node --superlink {address} "
                          f"--participant K --participants N, then frd flower run --superlink {address} ... (Ctrl-C stops it)")


def run_node(args: argparse.Namespace) -> int:
    require_flwr()
    superlink = _address(args.superlink)
    if not 0 <= args.participant < args.participants:
        raise FrdError(f"--participant must lie in 0..{args.participants - 1}, got {args.participant}")

    def launch(home: Path, log: Path, processes: list[subprocess.Popen]) -> None:
        start_node(superlink, args.participant, args.participants, args.port or free_port(), home, log, processes)

    return _serve(launch, f"participant {args.participant} of {args.participants} connected to {superlink} "
                          "(Ctrl-C stops it)")

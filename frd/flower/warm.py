"""A warm ClientApp runner: one long-lived process serves every message a SuperNode receives.

Flower 1.42's SuperNode, by default (``--isolation subprocess``), starts a SuperExec that starts a
new ``flwr-clientapp`` process for every message; on the development machine each such start cost
about 3 s to import Flower and 4 s to import frd and torch, more than the work of a small round.
With ``--isolation process`` the SuperNode leaves running the ClientApp to a process of the
user's. This is that process: it acquires each task from the SuperNode's Runtime API as Flower's
SuperExec does, and runs it as ``flwr-clientapp`` does, with flwr's own pull and push functions,
but without a process start, so frd is imported once per node rather than once per message.
(Flower's Kubernetes executor keeps warm pods for the same reason.)

The participant's state still travels in ``context.state``, pulled with each task and pushed back
with its output, exactly as with a process per message; only frd's own app is served (the
components of every frd run's app are the installed frd).
"""
from __future__ import annotations

import argparse
import time
from logging import ERROR

from flwr.app import Message
from flwr.app.error import Error
from flwr.common.constant import ErrorCode, SubStatus
from flwr.proto.runtime_pb2 import AcquireTaskRequest
from flwr.supercore import log
from flwr.supercore.app_utils import start_parent_process_monitor
from flwr.supercore.constant import TaskType
from flwr.supercore.heartbeat import HeartbeatSender, make_task_heartbeat_fn_http
from flwr.supercore.interceptors import RuntimeTokenHttpInterceptor, RuntimeVersionHttpInterceptor
from flwr.supercore.retry import make_simple_http_retry_invoker
from flwr.supercore.runtime import RuntimeHttpClient
from flwr.supernode.runtime.run_clientapp import pull_task_input, push_message, push_task_output

from frd.flower.apps import client as frd_client

FRD_APP = "frd/frd-app"
"""The FAB id of every app frd writes (publisher/name in ``launch.APP_TOML``)."""
POLL_S = 0.1
"""Interval between asks for a task (Flower's SuperExec asks every FLWR_SUPEREXEC_TASK_POLL_INTERVAL)."""


def _runtime_client(address: str, component: str, token: str | None = None) -> RuntimeHttpClient:
    interceptors = [RuntimeVersionHttpInterceptor(component_name=component)]
    if token is not None:
        interceptors.append(RuntimeTokenHttpInterceptor(token))  # type: ignore[arg-type]
    return RuntimeHttpClient.from_server_address(server_address=address, insecure=True, root_certificates=None,
                                                 interceptors=interceptors,
                                                 retry_invoker=make_simple_http_retry_invoker())


def run_task(address: str, token: str) -> None:
    """One task, as ``flwr.supernode.runtime.run_clientapp`` runs it, in this process: pull the
    message and context, run frd's ClientApp, push the reply, then the context and the status."""
    client = _runtime_client(address, "flwr-clientapp", token)
    heartbeat = HeartbeatSender(make_task_heartbeat_fn_http(client))
    heartbeat.start()
    message, context, reply = None, None, None
    status, details = SubStatus.FAILED, "ClientApp task failed"
    try:
        message, context, run, _ = pull_task_input(client)
        if run.fab_id != FRD_APP:
            raise ValueError(f"this node serves frd's app ({FRD_APP}), not {run.fab_id!r}")
        reply = frd_client(message=message, context=context)
        status, details = SubStatus.COMPLETED, ""
    except Exception as ex:  # noqa: BLE001 -- as in Flower: the failure goes back to the ServerApp
        log(ERROR, "ClientApp raised an exception", exc_info=ex)
        details = f"{type(ex)}:<'{ex}'>"
        if message is not None:
            reply = Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=details), reply_to=message)
    finally:
        try:
            if reply is not None and context is not None:
                push_message(client, reply, context)
        finally:
            push_task_output(client, context, status, details)
            heartbeat.stop()
            client.close()


def serve(address: str) -> None:
    """Ask the SuperNode at ``address`` (its Runtime API) for ClientApp tasks, forever."""
    superexec = _runtime_client(address, "SuperExec")
    while True:
        acquired = superexec.AcquireTask(AcquireTaskRequest(supported_task_types=[TaskType.CLIENT_APP]))
        if acquired.HasField("task") and acquired.token:
            run_task(address, acquired.token)
        else:
            time.sleep(POLL_S)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m frd.flower.warm", description=__doc__.splitlines()[0])
    parser.add_argument("--runtime-api-address", required=True, help="the SuperNode's Runtime API, HOST:PORT")
    parser.add_argument("--supernode-pid", type=int, help="exit when this process (the SuperNode) does")
    args = parser.parse_args(argv)
    if args.supernode_pid is not None:
        start_parent_process_monitor(args.supernode_pid)  # raises SIGINT here when the SuperNode is gone
    try:
        serve(args.runtime_api_address)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

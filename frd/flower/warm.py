"""Warm app runners: one long-lived process serves every task a SuperNode or SuperLink gets.

Flower 1.42, by default (``--isolation subprocess``), starts a new ``flwr-clientapp`` process
for every message a SuperNode receives and a new ``flwr-serverapp`` process for every run; on the
development machine each start cost about 3 s to import Flower and 4 s to import frd and torch,
more than the work of a small round. With ``--isolation process`` a SuperNode or SuperLink leaves
running the app to a process of the user's. These are those processes: each acquires its tasks
from the Runtime API as Flower's SuperExec does and runs them as ``flwr-clientapp`` /
``flwr-serverapp`` do, with flwr's own pull, push and log-upload functions, but without a process
start, so frd is imported once per node or SuperLink rather than once per message or run;
its domains (models, data, methods) load as soon as the runner is ready, while it waits for a
first task, which then finds them loaded (loading them cost a first task 5.8 s of CPU, py-spy).
(Flower's Kubernetes executor keeps warm pods for the same reason.)

A participant's state still travels in ``context.state``, pulled with each task and pushed back
with its output, exactly as with a process per message. Only frd's own app is served (the
components of every frd run's app are the installed frd).

A runner serves one task at a time, so no task may wait forever: a message's content that does not
come within ``PULL_S`` fails that task and the runner goes on. (Flower 1.42's SuperNode leaves the
task of a message it drops because its run has ended, as when a participant was lost; with
Flower's own limit of two hours, the surviving node served nothing more, and a rerun hung.)

A runner outlives its tasks, which Flower's one-shot app processes do not, so two of Flower's habits
are kept from ending it. Once a task's status is pushed its token is void, and Flower's HTTP retry
answers a request refused for its token (401) with a SIGINT to its own process (``flwr.supercore.
retry.http_retry``): so each task stops its heartbeat and log upload before it pushes its status,
and a SIGINT ends the runner only once its SuperNode or SuperLink is gone (Flower's parent monitor
sends one then; Ctrl-C on ``frd flower node`` ends the SuperNode, so the runner follows within
0.2 s). A runner ended by such a SIGINT left its node serving nothing, and the next run waited on
it for ever: the likely cause of a test that hung once in six suite runs. [our reading of flwr 1.42]
"""
from __future__ import annotations

import argparse
import os
import signal
import time
from logging import ERROR, WARNING
from pathlib import Path
from queue import Empty, Queue
from types import FrameType
from typing import Callable

import httpx
from flwr.app import Context, Message, RecordDict
from flwr.app.error import Error
from flwr.cli.install import install_from_fab
from flwr.common.config import get_fused_config_from_dir, get_project_dir
from flwr.common.constant import ErrorCode, SubStatus
from flwr.common.serde import context_from_proto, context_to_proto, fab_from_proto, run_from_proto
from flwr.proto.node_pb2 import Node
from flwr.proto.runtime_pb2 import AcquireTaskRequest, PullAppMessagesRequest, PullTaskInputRequest, PushTaskOutputRequest
from flwr.server.run_serverapp import run as run_server_app
from flwr.supercore import log
from flwr.supercore.app_utils import start_parent_process_monitor
from flwr.supercore.constant import TaskType
from flwr.supercore.fab import Fab
from flwr.supercore.heartbeat import HeartbeatSender, make_task_heartbeat_fn_http
from flwr.supercore.inflatable.inflatable_protobuf_utils import (
    make_confirm_message_received_fn_protobuf,
    make_pull_object_fn_protobuf,
)
from flwr.supercore.inflatable.inflatable_utils import pull_and_inflate_object_from_tree
from flwr.supercore.interceptors import RuntimeTokenHttpInterceptor, RuntimeVersionHttpInterceptor
from flwr.supercore.logger import flush_logs, mirror_output_to_queue, start_log_uploader, stop_log_uploader
from flwr.supercore.retry import make_simple_http_retry_invoker
from flwr.supercore.run import Run
from flwr.supercore.runtime import RuntimeHttpClient
from flwr.supercore.task_identity import TaskIdentity
from flwr.superlink.grid import HttpGrid
from flwr.supernode.runtime.run_clientapp import push_message, push_task_output

from frd.domains import domains
from frd.flower.apps import client as frd_client
from frd.flower.apps import server as frd_server
from frd.flower.launch import ready_line

FRD_APP = "frd/frd-app"
"""The FAB id of every app frd writes (publisher/name in ``launch.APP_TOML``)."""
POLL_S = 0.1
"""Interval between asks for a task (Flower's SuperExec asks every FLWR_SUPEREXEC_TASK_POLL_INTERVAL)."""
PULL_S = 20.0
"""Longest wait for a message's content: the SuperNode pulls it from the SuperLink as it hands out
the task, which takes well under a second for frd's messages on loopback. [our choice]"""


def _runtime_client(address: str, component: str, token: str | None = None) -> RuntimeHttpClient:
    interceptors = [RuntimeVersionHttpInterceptor(component_name=component)]
    if token is not None:
        interceptors.append(RuntimeTokenHttpInterceptor(token))  # type: ignore[arg-type]
    return RuntimeHttpClient.from_server_address(server_address=address, insecure=True, root_certificates=None,
                                                 interceptors=interceptors,
                                                 retry_invoker=make_simple_http_retry_invoker())


def pull_task_input(client: RuntimeHttpClient) -> tuple[Message, Context, Run, Fab]:
    """The task's message, context, run and app, as ``flwr.supernode.runtime.run_clientapp``
    pulls them, but waiting at most ``PULL_S`` for the message's content."""
    task = client.PullTaskInput(PullTaskInputRequest())
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = (task.task_id, task.run.run_id,
                                                                       task.context.node_id)
    context, run, fab = context_from_proto(task.context), run_from_proto(task.run), fab_from_proto(task.fab)
    pulled = client.PullMessages(PullAppMessagesRequest())
    if not pulled.messages_list:
        raise RuntimeError("No messages received from Runtime API")
    node, tree = Node(node_id=context.node_id), pulled.message_object_trees[0]
    message = pull_and_inflate_object_from_tree(
        tree, make_pull_object_fn_protobuf(client.PullObject, node, context.run_id),
        make_confirm_message_received_fn_protobuf(client.ConfirmMessageReceived, node, context.run_id),
        return_type=Message, max_time=PULL_S)
    message.metadata.__dict__["_message_id"] = tree.object_id  # as Flower: the content does not carry its own id
    return message, context, run, fab


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
        _check_app(run.fab_id)
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
            heartbeat.stop()  # before the status, the token's last use (see the module's docstring)
            push_task_output(client, context, status, details)
            client.close()


def _check_app(fab_id: str) -> None:
    if fab_id != FRD_APP:
        raise ValueError(f"this runner serves frd's app ({FRD_APP}), not {fab_id!r}")


def run_server_task(address: str, token: str, logs: Queue) -> None:
    """One run, as ``flwr.superlink.runtime.run_serverapp`` runs it, in this process: pull the run
    and its app, run frd's ServerApp on a grid of the SuperLink, uploading what it prints as the
    run's logs (``flwr run --stream`` shows them), then push the status."""
    grid = HttpGrid(runtime_api_address=address, insecure=True, root_certificates=None, token=token)
    client = grid._runtime_client
    heartbeat = HeartbeatSender(make_task_heartbeat_fn_http(client))
    heartbeat.start()
    context, uploader = None, None
    status, details = SubStatus.FAILED, "ServerApp task failed"
    try:
        task = client.PullTaskInput(PullTaskInputRequest())
        TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = (task.task_id, task.run.run_id,
                                                                           task.context.node_id)
        context, run, fab = context_from_proto(task.context), run_from_proto(task.run), fab_from_proto(task.fab)
        grid.set_run(run)
        _drain(logs)  # what was printed between runs is no run's log
        uploader = start_log_uploader(logs, node_id=0, run_id=run.run_id, client=client)
        _check_app(run.fab_id)
        install_from_fab(fab.content, skip_prompt=True)  # the app's run config (frd's spec) lives in its pyproject
        app_dir = get_project_dir(run.fab_id, run.fab_version, fab.hash_str)
        context.run_config = get_fused_config_from_dir(Path(app_dir), run.override_config)
        run_server_app(grid=grid, context=context, server_app_dir=str(app_dir), loaded_server_app=frd_server)
        status, details = SubStatus.COMPLETED, ""
        context.state = RecordDict()  # as Flower does: the run's state is not sent back
    except Exception as ex:  # noqa: BLE001 -- as in Flower: the failure is the run's status and log
        log(ERROR, "ServerApp raised an exception", exc_info=ex)
        details = f"ServerApp failed with exception: {ex}"
    finally:
        if uploader is not None:  # the last logs and heartbeat before the status, the token's last use
            flush_logs(logs)
            stop_log_uploader(logs, uploader)
        heartbeat.stop()
        try:
            client.PushTaskOutput(PushTaskOutputRequest(context=context_to_proto(context) if context else None,
                                                        sub_status=status, details=details))
        except httpx.HTTPError as err:
            log(ERROR, "Failed to push task output: %s", str(err))
        grid.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _interrupt_once_orphaned(parent_pid: int) -> Callable[[int, FrameType | None], None]:
    """A SIGINT handler that ends the runner only when ``parent_pid`` is gone (see the module's docstring)."""
    def on_sigint(signum: int, frame: FrameType | None) -> None:
        if _alive(parent_pid):
            log(WARNING, "SIGINT ignored: the runner serves until its SuperNode or SuperLink (PID %d) ends", parent_pid)
            return
        raise KeyboardInterrupt

    return on_sigint


def _drain(queue: Queue) -> None:
    while True:
        try:
            queue.get_nowait()
        except Empty:
            return


def serve(address: str, task_type: str, run: Callable[[str, str], None]) -> None:
    """Ask the Runtime API at ``address`` for tasks of ``task_type`` and ``run`` each, forever."""
    superexec = _runtime_client(address, "SuperExec")
    while True:
        acquired = superexec.AcquireTask(AcquireTaskRequest(supported_task_types=[task_type]))
        if acquired.HasField("task") and acquired.token:
            try:
                run(address, acquired.token)
            except Exception as ex:  # noqa: BLE001 -- e.g. a push that failed: that task's end, not the runner's
                log(ERROR, "a task ended with an error", exc_info=ex)
        else:
            time.sleep(POLL_S)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m frd.flower.warm", description=__doc__.splitlines()[0])
    parser.add_argument("app", choices=("client", "server"), help="serve a SuperNode's ClientApp tasks or a SuperLink's runs")
    parser.add_argument("--runtime-api-address", required=True, help="the SuperNode's or SuperLink's Runtime API, HOST:PORT")
    parser.add_argument("--parent-pid", type=int, help="exit when this process (the SuperNode or SuperLink) does")
    args = parser.parse_args(argv)
    if args.parent_pid is not None:
        start_parent_process_monitor(args.parent_pid)  # raises SIGINT here when the parent is gone
        signal.signal(signal.SIGINT, _interrupt_once_orphaned(args.parent_pid))
    print(ready_line(args.app, int(args.runtime_api_address.rpartition(":")[2])), flush=True)  # launch waits for it
    domains()  # their modules (models, data, methods): 5.8 s of a first task's CPU otherwise; tasks wait meanwhile
    if args.app == "client":
        task_type, run = TaskType.CLIENT_APP, run_task
    else:
        logs: Queue = Queue()
        mirror_output_to_queue(logs)  # as flwr-serverapp: what the ServerApp prints becomes the run's log
        task_type, run = TaskType.SERVER_APP, lambda address, token: run_server_task(address, token, logs)
    try:
        serve(args.runtime_api_address, task_type, run)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

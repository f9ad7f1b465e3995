"""Every use of Flower's private code in hcct-lite, named once, on the Flower range it is tested on.

:mod:`.inline`, :mod:`.silo_exec` with :mod:`.task_journal`, and :mod:`.submit` need more
than Flower's public API. Each private thing they take is a name of this module; nothing
else imports a private Flower module (``tests/architecture/test_architecture.py`` checks).
Private code changes without notice, so Flower is pinned to :data:`TESTED_RANGE`.
"""

from __future__ import annotations

import functools
import inspect
import re
import warnings
from types import SimpleNamespace

import flwr
from flwr.app import Error, Message
from flwr.common.constant import ErrorCode, SubStatus
from flwr.supercore.constant import TaskType
from flwr.supercore.inflatable.inflatable_object import (
    get_all_nested_objects,
    no_object_id_recompute,
)
from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents
from flwr.supercore.superexec.executor.subprocess_executor import SubprocessExecutor
from flwr.supercore.superexec.executor.types import LaunchResult
from flwr.supercore.task_identity import TaskIdentity

__all__ = [
    "TESTED_RANGE",
    "FLOWER_REQUIREMENT",
    "version_problem",
    "check_flower_version",
    "set_message_id",
    "over_the_wire",
    "set_run_identity",
    "error_reply",
    "message_to_bytes",
    "message_from_bytes",
    "SubprocessExecutor",
    "LaunchResult",
    "is_clientapp_task",
    "warm_up",
    "run_clientapp_task",
    "runtime_client",
    "resolve_root_certificates",
    "has_executor_hook",
    "serve_superexec",
    "record_task_io",
    "take_task_message",
    "answer_task_with_error",
    "superlink_status_reader",
]

# The Flower releases hcct-lite is tested on: (lowest, first excluded), as (major, minor).
# pyproject.toml and environment.yml pin the same; ``make flower-next`` tries the next Flower.
TESTED_RANGE = ((1, 42), (1, 43))
FLOWER_REQUIREMENT = "flwr[simulation]>={}.{},<{}.{}".format(*TESTED_RANGE[0], *TESTED_RANGE[1])


def version_problem(version: str | None = None) -> str | None:
    """Why Flower ``version`` (default: the installed one) is outside :data:`TESTED_RANGE`.

    None inside it. A version whose major and minor cannot be read is outside.
    """
    version = flwr.__version__ if version is None else version
    m = re.match(r"(\d+)\.(\d+)", str(version))
    release = (int(m[1]), int(m[2])) if m else None
    if release is not None and TESTED_RANGE[0] <= release < TESTED_RANGE[1]:
        return None
    return (
        f"Flower {version} is outside the range hcct-lite is tested on ({FLOWER_REQUIREMENT}): "
        "the inline engine, silo-exec and flower-run use Flower's private code and may fail "
        "(make flower-next runs their tests against the next Flower)"
    )


def check_flower_version() -> None:
    """Warn (a ``UserWarning``) when the installed Flower is outside the tested range."""
    problem = version_problem()
    if problem:
        warnings.warn(problem, stacklevel=2)


check_flower_version()


# --- messages: the inline grid and the task journal -----------------------------------------


def set_message_id(message: Message, message_id: str) -> None:
    """Give ``message`` the id a SuperLink gives it (Flower keeps it in a private field)."""
    message.metadata.__dict__["_message_id"] = message_id


def over_the_wire(message: Message) -> Message:
    """A copy of ``message`` made from the bytes a deployment would send for it.

    Each object is deflated to its stored bytes and the message inflated from them, as a
    SuperLink and a SuperNode do; the copy keeps the original's message id.
    """
    with no_object_id_recompute():  # each object's id (a hash) computed once, as a push does
        objects = get_all_nested_objects(message)
        contents = {oid: obj.deflate() for oid, obj in objects.items()}
        copy = inflate_object_from_contents(message.object_id, contents)
    set_message_id(copy, message.metadata.message_id)
    return copy


def set_run_identity(run_id: int) -> None:
    """Let this process build Flower messages of run ``run_id`` outside a Flower process."""
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = run_id, 0, 1


def error_reply(reply_to: Message, reason: str, crashed: bool = False) -> Message:
    """Flower's error reply to ``reply_to``: the ClientApp raised (or, ``crashed``, died)."""
    code = ErrorCode.CLIENT_APP_CRASHED if crashed else ErrorCode.CLIENT_APP_RAISED_EXCEPTION
    return Message(Error(code=code, reason=reason), reply_to=reply_to)


def message_to_bytes(message: Message) -> bytes:
    """``message`` without its content, as Flower's protobuf bytes (a task journal's record)."""
    from flwr.app.message import remove_content_from_message
    from flwr.common.serde import message_to_proto

    return message_to_proto(remove_content_from_message(message)).SerializeToString()


def message_from_bytes(data: bytes, message_id: str) -> Message:
    """The message :func:`message_to_bytes` wrote, with its id back."""
    from flwr.common.serde import message_from_proto
    from flwr.proto.message_pb2 import Message as ProtoMessage

    message = message_from_proto(ProtoMessage.FromString(data))
    set_message_id(message, message_id)
    return message


# --- a SuperNode's tasks: silo-exec ---------------------------------------------------------


def is_clientapp_task(spec) -> bool:
    """Whether a SuperExec launch ``spec`` is a ClientApp task."""
    return spec.task_type == TaskType.CLIENT_APP


def warm_up() -> None:
    """Import the Flower code every ClientApp task runs (once, before any fork)."""
    import flwr.cli.install  # noqa: F401
    import flwr.supernode.runtime.run_clientapp  # noqa: F401


def run_clientapp_task(spec, certificates) -> None:
    """Run one ClientApp task with Flower's own code, in a forked child of the executor.

    The parent's exit handlers (which close the parent's connections) are dropped first.
    Flower ends the task with ``sys.exit``.
    """
    from flwr.supercore.exit import exit_handler
    from flwr.supernode.runtime.run_clientapp import run_clientapp

    exit_handler.registered_exit_handlers.clear()
    run_clientapp(
        runtime_api_address=spec.runtime_api_address,
        token=spec.token,
        insecure=spec.insecure,
        certificates=certificates,
        parent_pid=spec.parent_pid,
        runtime_dependency_install=spec.runtime_dependency_install,
    )


def runtime_client(runtime_api_address: str, insecure: bool, certificates, token: str):
    """A Flower ``RuntimeHttpClient`` of the SuperNode's Runtime API, as the task of ``token``.

    Tried twice at most: a refusal (the token expired meanwhile) is an answer.
    """
    from flwr.supercore.interceptors import (
        RuntimeTokenHttpInterceptor,
        RuntimeVersionHttpInterceptor,
    )
    from flwr.supercore.retry import make_simple_http_retry_invoker
    from flwr.supercore.runtime import RuntimeHttpClient

    invoker = make_simple_http_retry_invoker()
    invoker.max_tries = 2
    return RuntimeHttpClient.from_server_address(
        server_address=runtime_api_address,
        insecure=insecure,
        root_certificates=certificates,
        interceptors=[
            RuntimeVersionHttpInterceptor(component_name="flwr-clientapp"),
            RuntimeTokenHttpInterceptor(token),
        ],
        retry_invoker=invoker,
    )


def resolve_root_certificates(path, insecure: bool):
    """The PEM bytes of the CA at ``path`` (None without TLS or for the system's roots)."""
    from flwr.supercore.tls import validate_and_resolve_root_certificates

    return validate_and_resolve_root_certificates(path, insecure)


def has_executor_hook() -> bool:
    """Whether this Flower's SuperExec loop takes its executor from a replaceable hook."""
    from flwr.supercore.superexec import run_superexec as superexec

    return hasattr(superexec, "get_executor")


def serve_superexec(executor, runtime_api_address: str, insecure: bool, root_certificates) -> None:
    """Run Flower's SuperExec loop for one SuperNode with ``executor`` in place of Flower's.

    Raises ``RuntimeError`` where this Flower has no executor hook.
    """
    from flwr.supercore.superexec import run_superexec as superexec

    if not has_executor_hook():
        raise RuntimeError(
            "this Flower version's SuperExec has no executor hook; run the SuperNode with its "
            "default isolation instead of silo-exec"
        )
    superexec.get_executor = lambda *args, **kwargs: executor
    superexec.run_superexec(
        runtime_api_address=runtime_api_address,
        insecure=insecure,
        root_certificates_path=root_certificates,
        parent_pid=None,
    )


def record_task_io(on_pulled, on_pushed) -> None:
    """Call ``on_pulled(message)`` and ``on_pushed()`` when this task pulls and replies.

    In a task's process: Flower's ``pull_task_input`` and ``push_message`` are wrapped in
    place (the process ends with its task).
    """
    import flwr.supernode.runtime.run_clientapp as flower_task

    pull, push = flower_task.pull_task_input, flower_task.push_message

    @functools.wraps(pull)
    def pulled(client):
        message, context, run, fab = pull(client)
        on_pulled(message)
        return message, context, run, fab

    @functools.wraps(push)
    def pushed(client, message, context):
        push(client, message, context)
        on_pushed()

    flower_task.pull_task_input, flower_task.push_message = pulled, pushed


def take_task_message(client):
    """The task's message, from the SuperNode, as the task itself would pull it (or None).

    Confirmed as received, so that the SuperNode may drop its stored content.
    """
    from flwr.common.serde import message_from_proto
    from flwr.proto.node_pb2 import Node
    from flwr.proto.runtime_pb2 import PullAppMessagesRequest
    from flwr.supercore.inflatable.inflatable_protobuf_utils import (
        make_confirm_message_received_fn_protobuf,
    )

    got = client.PullMessages(PullAppMessagesRequest())
    if not got.messages_list:
        return None
    message = message_from_proto(got.messages_list[0])
    set_message_id(message, got.message_object_trees[0].object_id)
    node, run_id = Node(node_id=message.metadata.dst_node_id), message.metadata.run_id
    make_confirm_message_received_fn_protobuf(client.ConfirmMessageReceived, node, run_id)(
        message.metadata.message_id
    )
    return message


def answer_task_with_error(client, message: Message, reason: str) -> None:
    """Flower's error reply to ``message`` (the task crashed), then the task's status, failed."""
    from flwr.supernode.runtime import run_clientapp as flower_task

    reply = error_reply(message, reason, crashed=True)
    where = SimpleNamespace(node_id=message.metadata.dst_node_id, run_id=message.metadata.run_id)
    # Flower's own push (unwrapped: in a task's process it records through record_task_io)
    inspect.unwrap(flower_task.push_message)(client, reply, where)
    flower_task.push_task_output(
        client=client, context=None, sub_status=SubStatus.FAILED, details=reason
    )


# --- the SuperLink's Control API: flower-run ------------------------------------------------


def superlink_status_reader(federation: str):
    """``(status_of, close)``: ``status_of(run_id)`` is the run's status as ``flwr ls`` shows it.

    Connects as ``flwr ls`` does (the SuperLink's entry in Flower's config.toml, its TLS
    root certificates and stored login), once; each call is one Control API request.
    """
    from flwr.cli.flower_config import read_superlink_connection
    from flwr.cli.utils import init_http_client_from_connection
    from flwr.common.serde import run_from_proto
    from flwr.proto.control_pb2 import ListRunsRequest  # pylint: disable=E0611

    client = init_http_client_from_connection(read_superlink_connection(federation))

    def status_of(run_id) -> str:
        reply = client.ListRuns(ListRunsRequest(run_id=int(run_id)))
        states = [run_from_proto(proto).status for proto in reply.run_dict.values()]
        if not states:
            return "unknown"
        state = states[0]
        return f"{state.status}:{state.sub_status}" if state.sub_status else state.status

    return status_of, client.close

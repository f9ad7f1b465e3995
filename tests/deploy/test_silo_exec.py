"""``hcct-lite silo-exec``'s own checks (the warm silos run for real in test_flower_deploy)."""

import json
import os
import time
from types import SimpleNamespace

import pytest

pytest.importorskip("flwr")

from hcct_lite.cli import main  # noqa: E402
from hcct_lite.deploy import silo_exec  # noqa: E402
from hcct_lite.deploy.flower_internals import set_message_id  # noqa: E402


def test_the_fork_executor_reaps_its_finished_children():
    executor = silo_exec.ForkExecutor()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    executor.children[pid] = time.monotonic()
    deadline = time.monotonic() + 30
    while executor.children and time.monotonic() < deadline:
        executor.reconcile()
        time.sleep(0.05)
    assert executor.children == {}
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # already reaped: no zombie left behind


def test_a_task_past_the_silos_limit_is_ended_and_reaped():
    executor = silo_exec.ForkExecutor(max_task_seconds=0.5)
    pid = os.fork()
    if pid == 0:  # a hung ClientApp task
        time.sleep(600)
        os._exit(0)
    executor.children[pid] = time.monotonic()
    executor.reconcile()
    assert pid in executor.children  # not yet past the limit
    deadline = time.monotonic() + 30
    while executor.children and time.monotonic() < deadline:
        time.sleep(0.1)
        executor.reconcile()
    assert executor.children == {}
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # killed and reaped
    assert silo_exec.ForkExecutor(max_task_seconds=0).children == {}


def test_silo_exec_says_what_it_cannot_do(monkeypatch, capsys):
    from flwr.supercore.superexec import run_superexec

    monkeypatch.delattr(run_superexec, "get_executor")
    assert main(["silo-exec", "--insecure"]) == 2
    assert "no executor hook" in capsys.readouterr().err
    monkeypatch.delattr(os, "fork")
    assert main(["silo-exec", "--insecure"]) == 2
    assert "silo-exec needs os.fork" in capsys.readouterr().err


# --- the task journal: answering for a task that died without replying ---------------------


def _message():
    """A ClientApp's training message as the SuperNode hands it over (no content needed)."""
    from flwr.app import Metadata, RecordDict
    from flwr.app.message import make_message

    md = Metadata(
        run_id=7,
        message_id="",
        src_node_id=1,
        dst_node_id=5,
        reply_to_message_id="",
        group_id="epoch-1",
        created_at=time.time(),
        ttl=3600.0,
        message_type="train",
    )
    message = make_message(metadata=md, content=RecordDict())
    set_message_id(message, message.object_id)
    return message


class FakeRuntime:
    """Flower's RuntimeHttpClient as the SuperNode's Runtime API answers one task's token."""

    def __init__(self, token, refuse=False, waiting=()):
        self.token, self.refuse, self.pushed, self.outputs, self.closed = token, refuse, [], [], 0
        self.waiting, self.confirmed = list(waiting), []  # messages not yet handed out

    def PullMessages(self, request):  # noqa: N802 - Flower's method name
        from flwr.app.message import remove_content_from_message
        from flwr.common.serde import message_to_proto
        from flwr.proto.runtime_pb2 import PullAppMessagesResponse
        from flwr.supercore.inflatable.inflatable_object import get_object_tree

        if not self.waiting:
            return PullAppMessagesResponse()
        message = self.waiting.pop(0)
        return PullAppMessagesResponse(
            messages_list=[message_to_proto(remove_content_from_message(message))],
            message_object_trees=[get_object_tree(message)],
        )

    def ConfirmMessageReceived(self, request):  # noqa: N802
        self.confirmed.append(request.message_object_id)

    def PushMessages(self, request):  # noqa: N802
        from flwr.proto.runtime_pb2 import PushAppMessagesResponse

        if self.refuse:  # the token expired meanwhile: the SuperNode settled the task itself
            raise RuntimeError("Runtime task-token authentication failed.")
        self.pushed += list(request.messages_list)
        return PushAppMessagesResponse(message_ids=["x"], objects_to_push=[], session_id="s")

    def PushObject(self, request):  # noqa: N802
        raise AssertionError("an error reply has no objects to push")

    def PushTaskOutput(self, request):  # noqa: N802
        self.outputs.append(request)

    def close(self):
        self.closed += 1


def _connector(clients, refuse=False, waiting=()):
    def connect(token):
        clients.append(FakeRuntime(token, refuse, waiting))
        return clients[-1]

    return connect


@pytest.fixture
def task_process(monkeypatch):
    """This test's process as a task's, for ``TaskJournal.in_child``; Flower's module back after.

    ``in_child`` wraps Flower's ``pull_task_input`` and ``push_message`` for good (a task's
    process ends with its task) and closes the executor's lock, which the test keeps.
    """
    import flwr.supernode.runtime.run_clientapp as flower_task

    for name in ("pull_task_input", "push_message"):
        monkeypatch.setattr(flower_task, name, getattr(flower_task, name))  # restored after
    monkeypatch.setattr(os, "close", lambda fd: None)
    return flower_task


def test_a_second_executor_on_the_same_silo_is_refused(tmp_path, capsys):
    from hcct_lite.deploy.task_journal import TaskJournal

    journal = TaskJournal(tmp_path / "state")
    assert oct((tmp_path / "state").stat().st_mode & 0o777) == "0o700"  # tokens inside
    with pytest.raises(RuntimeError, match=f"another silo-exec \\(pid {os.getpid()}\\)"):
        TaskJournal(tmp_path / "state")
    assert main(["silo-exec", "--insecure", "--state-dir", str(tmp_path / "state")]) == 2
    assert "already serves this SuperNode" in capsys.readouterr().err
    journal.close()
    TaskJournal(tmp_path / "state").close()  # free again once the first one is gone


def test_a_task_that_died_after_taking_its_message_is_answered_with_an_error(
    tmp_path, monkeypatch, task_process
):
    from flwr.common.constant import ErrorCode, SubStatus
    from flwr.common.serde import message_from_proto

    from hcct_lite.deploy.task_journal import TaskJournal

    message, flower_task = _message(), task_process
    # the SuperNode hands the task its message; Flower's push is the real one
    monkeypatch.setattr(flower_task, "pull_task_input", lambda c: (message, "ctx", "run", "fab"))
    journal = TaskJournal(tmp_path)
    journal.in_child("token-1")
    pid = os.getpid()
    assert json.loads(journal.record(pid).read_text()) == {"token": "token-1"}
    assert flower_task.pull_task_input(None)[0] is message
    clients = []
    assert "answered message" in journal.settle(pid, _connector(clients))
    (client,) = clients
    assert client.token == "token-1" and client.closed == 1
    (reply,) = [message_from_proto(p) for p in client.pushed]
    assert reply.metadata.reply_to_message_id == message.metadata.message_id
    assert reply.metadata.dst_node_id == message.metadata.src_node_id
    assert reply.has_error() and reply.error.code == ErrorCode.CLIENT_APP_CRASHED
    assert [o.sub_status for o in client.outputs] == [SubStatus.FAILED]
    assert not journal.record(pid).exists()  # forgotten once settled


def test_a_task_that_replied_or_took_nothing_is_not_answered_for(
    tmp_path, monkeypatch, task_process
):
    from hcct_lite.deploy.task_journal import TaskJournal

    message, flower_task = _message(), task_process
    monkeypatch.setattr(flower_task, "pull_task_input", lambda c: (message, "ctx", "run", "fab"))
    journal, pid, clients = TaskJournal(tmp_path), os.getpid(), []
    journal.in_child("token-2")
    # died after its message was handed out, before it recorded it: Flower's expiry answers
    assert "not recorded it" in journal.settle(pid, _connector(clients))
    assert [(c.pushed, c.outputs) for c in clients] == [([], [])]  # the task is not ended
    clients.clear()
    journal.in_child("token-3")
    flower_task.pull_task_input(None)
    where = SimpleNamespace(node_id=5, run_id=7)
    flower_task.push_message(FakeRuntime("token-3"), message, where)  # it replied, then died
    assert journal.settle(pid, _connector(clients)) is None  # it replied: nothing to say
    assert clients == [] and journal.pids() == []
    # a token the SuperNode no longer knows (expired meanwhile): a refusal, nothing else
    journal.in_child("token-4")
    flower_task.pull_task_input(None)
    assert "not answered" in journal.settle(pid, _connector(clients, refuse=True))
    assert clients[0].outputs == [] and journal.pids() == []


def test_a_task_that_died_before_taking_its_message_takes_it_and_answers(tmp_path, task_process):
    from flwr.common.serde import message_from_proto

    from hcct_lite.deploy.task_journal import TaskJournal

    message, journal, clients = _message(), TaskJournal(tmp_path), []
    journal.in_child("token-5")  # then killed before it pulled: its message waits
    said = journal.settle(os.getpid(), _connector(clients, waiting=[message]))
    assert said == f"answered message {message.metadata.message_id[:12]} with an error reply"
    (client,) = clients
    assert client.confirmed == [message.metadata.message_id]
    (reply,) = [message_from_proto(p) for p in client.pushed]
    assert reply.metadata.reply_to_message_id == message.metadata.message_id
    assert reply.has_error() and len(client.outputs) == 1


def _dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_the_executor_answers_for_a_task_it_ended_and_for_one_a_killed_executor_left(
    tmp_path,
):
    import base64

    from flwr.app.message import remove_content_from_message
    from flwr.common.serde import message_to_proto

    from hcct_lite.deploy.task_journal import TaskJournal

    message = _message()
    proto = message_to_proto(remove_content_from_message(message)).SerializeToString()
    taken = {"message": base64.b64encode(proto).decode(), "message_id": message.metadata.message_id}
    journal, clients = TaskJournal(tmp_path), []
    orphan = _dead_pid()  # the task of an executor killed before this one started
    journal._write(journal.record(orphan).name, {"token": "orphan", **taken})
    executor = silo_exec.ForkExecutor(None, 0.5, journal, _connector(clients))
    assert executor.orphans == {orphan}
    pid = os.fork()
    if pid == 0:  # a task that took its message, then hung
        journal._write(journal.record(os.getpid()).name, {"token": "hung", **taken})
        time.sleep(600)
        os._exit(0)
    executor.children[pid] = time.monotonic()
    executor.reconcile()
    assert [c.token for c in clients] == ["orphan"] and executor.orphans == set()
    deadline = time.monotonic() + 30
    while executor.children and time.monotonic() < deadline:
        time.sleep(0.1)
        executor.reconcile()
    assert [c.token for c in clients] == ["orphan", "hung"]
    assert all(len(c.pushed) == 1 and len(c.outputs) == 1 for c in clients)
    assert journal.pids() == []


# --- bad input: one line naming the option, before anything starts -------------------------


def _one_line_error(capsys, argv) -> str:
    """The error line ``hcct-lite argv`` prints, checked to be one line and status 2."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("hcct-lite: error: "), err
    return err


@pytest.mark.parametrize(
    "address, host, port",
    [
        ("127.0.0.1:9094", "127.0.0.1", 9094),
        ("localhost:1", "localhost", 1),
        ("silo-3.example.org:65535", "silo-3.example.org", 65535),
        ("[::1]:9094", "::1", 9094),
        ("[fe80::1%eth0]:9094", "fe80::1%eth0", 9094),
    ],
)
def test_a_good_runtime_api_address_is_taken(address, host, port):
    assert silo_exec.check_runtime_api_address(address) == (host, port)


@pytest.mark.parametrize(
    "address",
    [
        "",
        "[::1]:x",
        "::::",
        "abc",
        "127.0.0.1:99999",
        "127.0.0.1:0",  # the ports' boundaries
        "127.0.0.1:65536",
        "127.0.0.1:",
        ":9094",  # no host
        "[]:9094",
        "[::1]",
        "::1:9094",  # IPv6 without brackets: which colon ends the host?
        "[abc]:9094",
        "127.0.0.1:+80",
        "127.0.0.1:٨٠",  # Arabic-Indic digits: isdigit, but no URL's port
        "http://127.0.0.1:9094",
        "127.0.0.1 :9094",
    ],
)
def test_a_bad_runtime_api_address_is_refused_in_one_line(address, capsys, tmp_path):
    with pytest.raises(ValueError, match="--runtime-api-address must be HOST:PORT"):
        silo_exec.check_runtime_api_address(address)
    state = tmp_path / "state"
    argv = ["silo-exec", "--insecure", "--state-dir", str(state), "--runtime-api-address"]
    err = _one_line_error(capsys, [*argv, address])
    assert err == (
        "hcct-lite: error: --runtime-api-address must be HOST:PORT with a port 1-65535 (an "
        f"IPv6 host in brackets: [::1]:9094); got {address!r}\n"
    )
    assert not state.exists()  # refused before the journal is made


def test_a_good_address_reaches_flowers_loop(monkeypatch, tmp_path, capsys):
    served = []

    def serve(executor, address, insecure, root_certificates):
        served.append((address, insecure, root_certificates))
        executor.journal.close()

    monkeypatch.setattr(silo_exec.flower, "serve_superexec", serve)  # no connection
    monkeypatch.setenv("FLWR_SUPEREXEC_TASK_POLL_INTERVAL", "0.1")  # restored after
    state = str(tmp_path / "state")
    argv = ["silo-exec", "--insecure", "--state-dir", state, "--runtime-api-address"]
    assert main([*argv, "[::1]:65535"]) == 0
    assert served == [("[::1]:65535", True, None)]
    assert "warm" in capsys.readouterr().err


@pytest.mark.parametrize(
    "given, said",
    [
        (["--root-certificates", "{tmp}/no-such.pem"], "'{tmp}/no-such.pem' does not exist"),
        (["--root-certificates", "{tmp}"], "'{tmp}' is a folder"),
        (["--root-certificates", ""], "'' is a folder"),
        (["--root-certificates", "/dev/null"], "'/dev/null' is not a file"),
        (["--root-certificates", "{tmp}/ca.pem", "--insecure"], "--insecure means none"),
    ],
)
def test_bad_root_certificates_are_refused_in_one_line_before_flower(given, said, capsys, tmp_path):
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    given = [g.format(tmp=tmp_path) for g in given]
    state = tmp_path / "state"
    err = _one_line_error(capsys, ["silo-exec", "--state-dir", str(state), *given])
    assert err.startswith("hcct-lite: error: --root-certificates ")
    assert said.format(tmp=tmp_path) in err
    assert not state.exists()
    silo_exec.check_root_certificates(str(tmp_path / "ca.pem"), insecure=False)  # a file: taken
    silo_exec.check_root_certificates(None, insecure=True)


def test_the_command_itself_prints_one_line_and_no_traceback():
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "hcct_lite.cli", "silo-exec", "--runtime-api-address", "::::"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "hcct-lite: error: --runtime-api-address must be HOST:PORT with a port 1-65535 (an "
        "IPv6 host in brackets: [::1]:9094); got '::::'"
    ]

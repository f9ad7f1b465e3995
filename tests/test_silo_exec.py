"""``hcct-lite silo-exec``'s own checks (the warm silos run for real in test_flower_deploy)."""

import os
import time

import pytest

pytest.importorskip("flwr")

from hcct_lite.cli import main  # noqa: E402
from hcct_lite.flower import silo_exec  # noqa: E402


def test_the_fork_executor_reaps_its_finished_children():
    executor = silo_exec.make_fork_executor()
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
    executor = silo_exec.make_fork_executor(max_task_seconds=0.5)
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
    assert silo_exec.make_fork_executor(max_task_seconds=0).children == {}


def test_silo_exec_says_what_it_cannot_do(monkeypatch, capsys):
    from flwr.supercore.superexec import run_superexec

    monkeypatch.delattr(run_superexec, "get_executor")
    assert main(["silo-exec", "--insecure"]) == 2
    assert "no executor hook" in capsys.readouterr().err
    monkeypatch.delattr(os, "fork")
    assert main(["silo-exec", "--insecure"]) == 2
    assert "silo-exec needs os.fork" in capsys.readouterr().err

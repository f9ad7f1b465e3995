"""Warm silos recover by themselves: a hung task and a killed executor, in a real deployment.

One TLS deployment with SuperNode authentication (the processes of test_flower_deploy), every
silo warm (``--isolation process`` beside ``hcct-lite silo-exec``). In the first run silo 1's
ClientApp hangs in epoch 1's training and its ``silo-exec`` ends the task after 5 s; silo 2's
ClientApp hangs in epoch 2's training and its ``silo-exec`` is killed (SIGKILL, the process
alone: its task must die with it) and started again. Each must be back in the very next epoch:
without the executor answering for the dead task, the SuperNode would wait for Flower's token
expiry (about 60 s after the task's last heartbeat) and, with 25-s rounds, the silo would
miss the next epoch too (measured with the executor's answer switched off: silo 1 missing
from epochs 1-2, silo 2 from epochs 2-3). A second run on the same federation must then
include every silo.
"""

import json
import os
import signal
import time
from pathlib import Path

import pytest

pytest.importorskip("flwr")

from test_flower_deploy import (  # noqa: E402
    N_CLIENTS,
    POISON_APP,
    Processes,
    _environment,
    _outcome,
    _start_federation,
    _stop,
    _submit,
    free_port,
    wait_for,
)

HUNG, KILLED = 1, 2  # silo 1 hangs at epoch 1 (ended by its limit), silo 2 at epoch 2 (killed)
POISONED = {HUNG: ' poison="hang-at-1"', KILLED: ' poison="hang-at-2"'}


def _children(pid: int) -> list:
    return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()


def _record(state: Path, task: int) -> dict:
    """Task ``task``'s journal record as it stands (written whole), or {} before the first."""
    try:
        return json.loads((state / f"task-{task}.json").read_text())
    except FileNotFoundError:
        return {}


def _kill_executor_mid_task(procs: Processes, state: Path) -> None:
    """SIGKILL silo 2's silo-exec while its epoch-2 task hangs, and start a new one.

    Only once the task has recorded its message: killed between its pull and its record,
    it is left to Flower's token expiry (task_journal.py), which a loaded machine's slow
    task would otherwise meet now and then.
    """
    wait_for(lambda: "ROUND epoch-2]" in procs.log(f"silo{KILLED}"), 600, "epoch 2")
    executor = procs.procs[f"exec{KILLED}"]
    wait_for(lambda: _children(executor.pid), 60, "silo 2's epoch-2 task")
    task = int(_children(executor.pid)[0])
    wait_for(lambda: "message" in _record(state, task), 60, "silo 2's task to record its message")
    time.sleep(1.0)  # still there a second later: the hung training, not a task ending
    assert _children(executor.pid) == [str(task)] and "replied" not in _record(state, task)
    os.kill(executor.pid, signal.SIGKILL)
    executor.wait(timeout=10)
    wait_for(lambda: not Path(f"/proc/{task}").exists(), 30, "the task to die with it")
    procs.start(f"exec{KILLED}-again", *["hcct-lite", *executor.args[1:]])


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc (Linux)")
def test_warm_silos_come_back_in_the_next_epoch_and_the_next_run(tmp_path):
    t0 = time.monotonic()
    link_port = free_port()
    procs = Processes(tmp_path, _environment(tmp_path, link_port))
    first, second, submit = tmp_path / "first.json", tmp_path / "second.json", None
    try:
        exec_args = {HUNG: ["--max-task-seconds", "5"]}
        silos = _start_federation(procs, tmp_path, link_port, POISONED, True, exec_args)
        settings = 'scheme="hcct" round-timeout=25.0 discovery-timeout=60.0'
        submit = _submit(procs, POISON_APP, f"{settings} epochs=4", first, silos)
        _kill_executor_mid_task(procs, tmp_path / f"state{KILLED}")
        run1 = _outcome(submit, first, 600)
        submit = _submit(procs, POISON_APP, f"{settings} epochs=1", second, silos)
        run2 = _outcome(submit, second, 600)
    finally:
        _stop(procs, submit)
    assert [e["missing"] for e in run1["history"]] == [[], [HUNG], [KILLED], []]
    assert run1["status"] == {"state": "complete"} and run1["rejected"] == []
    assert "ran past 5 s; ended" in procs.log(f"exec{HUNG}")
    assert "answered message" in procs.log(f"exec{HUNG}")
    assert "answered message" in procs.log(f"exec{KILLED}-again")
    assert run2["status"] == {"state": "complete"} and run2["unenrolled"] == {}
    assert run2["history"][0]["missing"] == []
    assert all(e is not None for e in run2["history"][0]["client_test_error"])
    assert len(run2["history"][0]["client_test_error"]) == N_CLIENTS
    print(f"recovery deployment test: {time.monotonic() - t0:.1f} s")

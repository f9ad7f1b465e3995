"""``hcct-lite flower-run``: submit a run to a SuperLink and wait for its outcome.

``flwr run`` returns once the SuperLink has accepted the run, with status 0 even if the
ServerApp then fails. This wrapper submits with ``flwr run``, asks the SuperLink for the
run's status until it has finished (as ``flwr ls`` would), and returns 0 only if it completed.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time

__all__ = ["submit_and_wait", "flower_status_reader"]


# consecutive failed status asks after which flower-run gives up (the run goes on)
FAILED_ASKS = 5


def _flwr() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "flwr")
    return here if os.path.exists(here) else shutil.which("flwr") or "flwr"


def _json_of(proc, what: str) -> dict:
    """The JSON object a ``flwr ... --format json`` command printed, or a RuntimeError."""
    text = proc.stdout or ""
    start = text.find("{")
    try:
        data = json.loads(text[start:]) if start >= 0 else {}
    except json.JSONDecodeError:
        data = {}
    if proc.returncode != 0 or not data.get("success"):
        # the whole message: its last line alone can be a fragment ("attribute.")
        detail = " ".join((data.get("error-message") or proc.stderr or text).split())
        raise RuntimeError(f"{what} failed: {detail[:600] or 'no output'}")
    return data


def flower_status_reader(federation: str):
    """``(status_of, close)``: the run status ``flwr ls`` shows, from the SuperLink's Control API.

    :func:`~hcct_lite.deploy.flower_internals.superlink_status_reader`.
    """
    from .flower_internals import superlink_status_reader

    return superlink_status_reader(federation)


FAILED_HOW = (
    " (the ServerApp failed, or the experiment stopped early: no silo answered acceptably in "
    "an epoch; the SuperLink's log says which, and a stopped run's partial result is in the "
    "run config's json-out)"
)


def submit_and_wait(
    app: str,
    federation: str,
    run_config: str = "",
    timeout: float = 3600.0,
    poll: float = 1.0,
    runner=subprocess.run,
    clock=time.monotonic,
    sleep=time.sleep,
    status_reader=flower_status_reader,
) -> tuple:
    """Submit ``app`` to ``federation`` and wait until the run finishes.

    ``status_reader(federation)`` gives ``(status_of, close)`` (default: Flower's Control
    API, see ``flower_status_reader``); it is called after the submission succeeded.

    Returns
    -------
    (exit status, message): 0 if the run finished and completed; 1 if it failed, was
    stopped, or had not finished after ``timeout`` seconds
    """
    if not (math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"--timeout must be a positive number of seconds; got {timeout}")
    args = [_flwr(), "run", app, federation, "--format", "json"]
    if run_config:
        args += ["--run-config", run_config]
    run_id = _json_of(runner(args, capture_output=True, text=True), "flwr run")["run-id"]
    status_of, close = status_reader(federation)
    deadline, status = clock() + timeout, "unknown"
    failed = 0
    try:
        while clock() < deadline:
            try:
                status, failed = status_of(run_id), 0
            except Exception as err:  # noqa: BLE001 - any failure to ask is reported as one
                failed += 1
                if failed == FAILED_ASKS:  # one lost answer does not give up on a long run
                    raise RuntimeError(
                        f"asking the SuperLink for run {run_id}'s status failed "
                        f"{failed} times in a row: {err}"
                    ) from err
            if status.startswith("finished"):
                ok = status.endswith(":completed")
                why = "" if ok else FAILED_HOW
                return (0 if ok else 1), f"run {run_id}: {status}{why}"
            sleep(poll)
    finally:
        close()
    return 1, f"run {run_id}: still {status} after {timeout:g} s"

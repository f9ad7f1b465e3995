"""``hcct-lite flower-run``: submit a run to a SuperLink and wait for its outcome.

``flwr run`` returns as soon as the SuperLink has accepted the run, with status 0 even if
the ServerApp then fails. This wrapper submits the run, polls ``flwr ls`` until the run
has finished, and returns 0 only if it completed.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time

__all__ = ["submit_and_wait"]


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
        detail = (data.get("error-message") or proc.stderr or text).strip().splitlines()
        raise RuntimeError(f"{what} failed: {detail[-1] if detail else 'no output'}")
    return data


def submit_and_wait(
    app: str,
    federation: str,
    run_config: str = "",
    timeout: float = 3600.0,
    poll: float = 5.0,
    runner=subprocess.run,
    clock=time.monotonic,
    sleep=time.sleep,
) -> tuple:
    """Submit ``app`` to ``federation`` and wait until the run finishes.

    Returns
    -------
    (exit status, message): 0 if the run finished and completed; 1 if it failed, was
    stopped, or had not finished after ``timeout`` seconds
    """
    if not (math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"--timeout must be a positive number of seconds; got {timeout}")
    flwr = _flwr()
    args = [flwr, "run", app, federation, "--format", "json"]
    if run_config:
        args += ["--run-config", run_config]
    run_id = _json_of(runner(args, capture_output=True, text=True), "flwr run")["run-id"]
    deadline, status = clock() + timeout, "unknown"
    while clock() < deadline:
        ls = [flwr, "ls", federation, "--run-id", str(run_id), "--format", "json"]
        runs = _json_of(runner(ls, capture_output=True, text=True), "flwr ls")["runs"]
        status = runs[0]["status"] if runs else "unknown"
        if status.startswith("finished"):
            ok = status.endswith(":completed")
            return (0 if ok else 1), f"run {run_id}: {status}"
        sleep(poll)
    return 1, f"run {run_id}: still {status} after {timeout:g} s"

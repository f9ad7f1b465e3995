"""Running one submission in a fresh kernel and reading its answers as plain JSON.

:func:`run_submission` runs each code cell, then a cell of the grader's own that prints the
answer variables after a random marker line. :func:`read_answers` keeps plain answers only:
numbers, text and flat lists of them. The kernel never holds a key and never judges.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from assessment import QUESTIONS

__all__ = ["KERNEL", "NAMES", "read_answers", "run_submission"]

# the grader's own cell: the answer variables as plain JSON, after a marker line
DUMP = """
def _hcct_grader_dump():
    import json, math
    names = {names!r}

    def plain(value, inner=False):
        kind = type(value)
        if kind is int:
            return value if abs(value) < 10**15 else None
        if kind is float:
            return value if math.isfinite(value) else None
        if kind is str:
            return value[:100]
        if kind.__module__ == "numpy" and kind.__name__ != "ndarray" and hasattr(value, "item"):
            return plain(value.item(), inner)
        if kind.__module__ == "numpy" and kind.__name__ == "ndarray" and not inner:
            return plain(value.tolist()) if value.size <= 20 else None
        if kind in (list, tuple) and not inner and len(value) <= 20:
            return [plain(item, True) for item in value]
        return None

    found = {{}}
    for name in names:
        try:
            found[name] = plain(globals().get(name))
        except Exception:
            found[name] = None
    print({marker!r} + json.dumps(found))


_hcct_grader_dump()
del _hcct_grader_dump
"""
NAMES = tuple(f"answer_{i}" for i in QUESTIONS)


def _plain(value, inner: bool = False):
    """``value`` if it is a plain answer (a number, a text, a flat list of them), else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if abs(value) < 10**15 else None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return value[:100]
    if isinstance(value, list) and not inner and len(value) <= 20:
        items = [_plain(item, True) for item in value]
        return None if any(item is None for item in items) else items
    return None


def read_answers(text: str, marker: str) -> dict | None:
    """The answers in the output of the grader's cell, or None when there are none."""
    for line in text.splitlines():
        if line.startswith(marker) and len(line) < 100_000:
            try:
                raw = json.loads(line[len(marker) :], parse_constant=lambda c: None)
            except ValueError:
                return None
            if not isinstance(raw, dict):
                return None
            return {name: _plain(raw.get(name)) for name in NAMES}
    return None


# the kernel's command: this Python's ipykernel
KERNEL = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]


class _Spec:
    """The kernel's spec, held in memory (``argv``, nothing read from disk)."""

    def __init__(self, argv: list):
        from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

        spec = KernelSpec(
            argv=argv,
            display_name="hcct-lite grader",
            language="python",
        )

        class Manager(KernelSpecManager):
            def get_kernel_spec(self, kernel_name, *args, **kwargs):
                return spec

        self.manager = Manager()


def _kernel_env(tmp: Path, kit: Path) -> dict:
    home = tmp / "home"
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "TMPDIR": str(tmp / "tmp"),
        "PYTHONPATH": str(kit),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "HCCT_MODE": "shipped",
        "HCCT_RESULTS": str(kit / "results"),
        "MPLBACKEND": "Agg",
        "IPYTHONDIR": str(home / ".ipython"),
        "MPLCONFIGDIR": str(home / ".matplotlib"),
        "JUPYTER_CONFIG_DIR": str(home / ".jupyter"),
        "JUPYTER_DATA_DIR": str(home / ".local" / "share" / "jupyter"),
        "JUPYTER_RUNTIME_DIR": str(home / ".local" / "share" / "jupyter" / "runtime"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "OMP_NUM_THREADS": "1",
    }
    for name in ("home", "tmp", "work"):
        (tmp / name).mkdir(exist_ok=True)
    return env


def run_submission(
    nb, tmp: Path, kit: Path, timeout: int, total: int, command: list | None = None
) -> tuple:
    """Run ``nb``'s code cells in a fresh kernel in ``tmp``; return ``(answers, notes, pid)``.

    After each cell the grader's cell reads the answers. The first cell that runs past
    ``timeout`` seconds (or past ``total`` for the whole notebook), or that kills the
    kernel, stops the run: the answers are those the cells above it set. ``command`` starts
    the kernel (default :data:`KERNEL`); ``pid`` is that process's, None if it never started.
    """
    from jupyter_client.manager import AsyncKernelManager
    from jupyter_core.utils import run_sync
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    marker = f"HCCT-GRADER-{secrets.token_hex(16)}:"
    ours = nbformat.v4.new_code_cell(DUMP.format(names=NAMES, marker=marker))
    ours.metadata["grader"] = True
    deadline = time.monotonic() + total

    def seconds(cell):
        left = max(1, int(deadline - time.monotonic()))
        return min(30 if cell.metadata.get("grader") else timeout, left)

    spec = _Spec(command or KERNEL)
    km = AsyncKernelManager(kernel_name="hcct-grader", kernel_spec_manager=spec.manager)
    km.connection_file = str(tmp / "home" / "kernel-connection.json")

    where = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    cells = [nbformat.v4.new_code_cell(str(nb.cells[i].source)) for i in where]
    run = nbformat.v4.new_notebook(cells=[*cells, ours])
    last = len(cells)

    class Client(NotebookClient):
        def output(self, outs, msg, display_id, cell_index):  # keep only the grader's
            return super().output(outs, msg, display_id, cell_index) if cell_index == last else None

    client = Client(
        run,
        km=km,
        timeout_func=seconds,
        allow_errors=True,
        shutdown_kernel="immediate",
        startup_timeout=120,
        iopub_timeout=10,
    )
    answers, notes, pid = {name: None for name in NAMES}, [], None
    env = _kernel_env(tmp, kit)
    try:
        with client.setup_kernel(
            env=env, cwd=str(tmp / "work"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        ):
            pid = getattr(km.provisioner, "pid", None)
            for index, cell in enumerate(cells):
                try:
                    client.execute_cell(cell, index)
                except CellTimeoutError:
                    late = "the notebook's time" if time.monotonic() >= deadline else "its time"
                    notes.append(f"stopped at cell {where[index]}: ran past {late}; below: not run")
                    break
                except DeadKernelError:
                    notes.append(f"stopped at cell {where[index]}: the kernel died")
                    break
                ours.outputs = []
                try:
                    client.execute_cell(ours, last, store_history=False)
                except (CellTimeoutError, DeadKernelError):
                    notes.append(
                        f"stopped after cell {where[index]}: the answers could not be read"
                    )
                    break
                text = "".join(o.get("text", "") for o in ours.outputs if o.output_type == "stream")
                found = read_answers(text, marker)
                if found is not None:
                    answers = found
    except Exception as err:  # noqa: BLE001 - a kernel that would not start or talk
        notes.append(f"the run failed: {type(err).__name__}: {str(err)[:200]}")
    finally:
        try:
            if km.has_kernel:
                run_sync(km.shutdown_kernel)(now=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
    return answers, notes, pid

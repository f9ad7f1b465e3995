"""Run a notebook top to bottom in a fresh kernel: the one way the tools execute notebooks.

    python tools/notebook_exec.py --mode MODE [--timeout S] [--inplace] NOTEBOOK ...

``make figures`` and ``make notebooks`` call this command; ``tools/make_classroom.py``,
``tools/build_book.py`` and ``tools/lesson_times.py`` call :func:`execute`. The tests run
the notebooks under nbval instead, which also compares the outputs of the checked cells.

Each run starts a kernel (nbclient) in the notebook's folder, or the ``cwd`` given, with
this process's environment, the caller's ``env`` and ``HCCT_MODE`` set to the mode. A cell
that raises, or runs past the timeout (seconds per cell; ``HCCT_CELL_TIMEOUT``, default
600), stops the run with a :class:`NotebookError` naming the notebook and the cell. The
command writes the executed notebook back with ``--inplace`` and otherwise keeps only what
the cells wrote (``make figures``: the figures). No jupyter-cache: its key is the code
cells' text, while the outputs depend on the mode, the library and ``results/`` too, so a
cache would hand back stale outputs (and a shipped-mode run trains nothing).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

from hcct_lite.lessons.modes import ENV as MODE_ENV
from hcct_lite.lessons.modes import Mode

__all__ = ["NotebookError", "AS_SHOWN", "cell_timeout", "execute", "execute_file", "main"]

TIMEOUT_ENV = "HCCT_CELL_TIMEOUT"
COLOUR = re.compile(r"\x1b\[[0-9;]*m")
# a notebook as a class sees it: each figure recorded as an output by the kernel's inline
# backend (Agg would record none) and each slider as its starting picture, not a widget
# that shows nothing without a kernel
AS_SHOWN = {
    "MPLBACKEND": "module://matplotlib_inline.backend_inline",
    "HCCT_STATIC_WIDGETS": "1",
}


class NotebookError(RuntimeError):
    """A notebook's cell raised, ran past its time or lost its kernel; the message names
    the notebook, the mode and the cell."""


def cell_timeout(environ=None) -> int:
    """Seconds a cell may run: ``HCCT_CELL_TIMEOUT`` (a positive whole number), else 600."""
    environ = os.environ if environ is None else environ
    raw = environ.get(TIMEOUT_ENV, "600")
    return _seconds(raw, f"{TIMEOUT_ENV}={raw!r}")


def _seconds(value, what: str) -> int:
    seconds = 0
    if isinstance(value, int | str) and not isinstance(value, bool):
        try:
            seconds = int(value)
        except ValueError:
            pass
    if seconds <= 0:
        raise ValueError(f"{what}: seconds per cell must be a positive whole number")
    return seconds


def execute(nb, *, mode: str, cwd=None, name: str = "notebook", timeout=None, env=None):
    """Run every cell of ``nb`` in a fresh kernel; return ``nb``, its outputs filled in.

    Parameters
    ----------
    nb : nbformat.NotebookNode
        The notebook, executed in place (nbclient records each cell's timing in its
        metadata ``execution``).
    mode : {"shipped", "quick", "full"}
        ``HCCT_MODE`` in the kernel, whatever this process's environment says.
    cwd : path-like, optional
        The kernel's working directory (the notebook's folder, for its relative paths);
        default this process's.
    name : str, default "notebook"
        How errors name the notebook (its path).
    timeout : int, optional
        Seconds per cell; default :func:`cell_timeout`.
    env : dict of str to str, optional
        More environment variables for the kernel (e.g. :data:`AS_SHOWN`); this process's
        environment is the kernel's otherwise, and is not changed.

    Raises
    ------
    ValueError
        For a mode or timeout that is not one, before any kernel starts.
    NotebookError
        When a cell raises, runs past ``timeout`` or the kernel dies.
    """
    mode = Mode(mode).name
    timeout = cell_timeout() if timeout is None else _seconds(timeout, f"timeout={timeout!r}")
    at = {"index": None}
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(cwd or Path.cwd())}},
        on_cell_start=lambda cell, cell_index: at.update(index=cell_index),
    )
    kernel_env = {**os.environ, **(env or {}), MODE_ENV: mode}
    try:
        client.execute(env=kernel_env)
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as err:
        raise NotebookError(_failure(nb, name, mode, at["index"], err, timeout)) from None
    return nb


def _failure(nb, name: str, mode: str, index, err, timeout: int) -> str:
    where = f"{name} ({MODE_ENV}={mode}), cell {index}"
    if index is not None:
        first = nb.cells[index].source.strip().splitlines()[:1]
        where += f" ({first[0][:60]!r})" if first else ""
    if isinstance(err, CellTimeoutError):
        return f"{where}: ran past {timeout} s (seconds per cell: {TIMEOUT_ENV})"
    if isinstance(err, DeadKernelError):
        return f"{where}: the kernel died ({err})"
    # nbclient's message holds the cell's source and the traceback (in terminal colours);
    # its end is the error
    detail = COLOUR.sub("", str(err))[-2000:]
    return f"{where}: raised {err.ename}: {err.evalue}\n{detail}"


def execute_file(path, *, mode: str, inplace: bool = False, timeout=None, env=None):
    """Execute the notebook at ``path`` in its folder; write it back with ``inplace``."""
    path = Path(path)
    if not path.is_file():
        raise NotebookError(f"no such notebook: {path}")
    nb = nbformat.read(path, as_version=4)
    execute(nb, mode=mode, cwd=path.resolve().parent, name=str(path), timeout=timeout, env=env)
    if inplace:
        nbformat.write(nb, path)
    return nb


def main(argv=None) -> int:
    """The command: execute each notebook in order, stop at the first that fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path, metavar="NOTEBOOK")
    parser.add_argument("--mode", required=True, help="HCCT_MODE in the kernel")
    parser.add_argument("--timeout", type=int, help=f"seconds per cell (default {TIMEOUT_ENV})")
    parser.add_argument("--inplace", action="store_true", help="write the outputs back")
    args = parser.parse_args(argv)
    for path in args.notebooks:
        print(f"executing {path} ({MODE_ENV}={args.mode})", flush=True)
        try:
            execute_file(path, mode=args.mode, inplace=args.inplace, timeout=args.timeout)
        except (NotebookError, ValueError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

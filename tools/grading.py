"""Grading the final assessment (notebook 06) so that a submission cannot game it.

    python tools/assessment.py grade SUBMISSION ... [--csv GRADES] [--timeout S] [--total S]

:func:`grade` trusts nothing a submission runs:

1. it reads each submission's ``student_id`` from the notebook's text, and computes that
   student's key (:func:`assessment.answer_key`), before any submission runs;
2. it runs each submission in a fresh kernel, in a temporary folder (its home and working
   folder) with a read-only copy of the package and the shipped results, first on the
   kernel's path; a cell that runs past the timeout stops the run there;
3. after each cell, a cell of its own prints the answer variables as plain JSON (numbers,
   text and lists of them; anything else is read as no answer);
4. it judges those answers in this process, with :func:`hcct_lite.lessons.checks.judge`;
5. it hashes the copy before and after: a submission that changed it scores 0, flagged.
   So does one during which a tracked file of the checkout changed. One that changed the
   grader's own copy (the pristine one, copied for each submission) stops the grading.

The kernel never holds a key and never judges. What grading cannot stop is in
``docs/teaching.md`` (grading the final assessment).
"""

from __future__ import annotations

import ast
import csv
import hashlib
import json
import math
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from assessment import QUESTIONS, ROOT, SKIP, answer_key

import hcct_lite as hl
from hcct_lite.lessons.assessment import PLACEHOLDER
from hcct_lite.lessons.checks import judge
from hcct_lite.lessons.modes import results_dir

__all__ = ["COLUMNS", "grade", "read_student_id", "run_submission"]


def read_student_id(nb) -> str | None:
    """The ``student_id`` a notebook's code assigns as plain text; None if none or several.

    Read from the cells' text, never by running them: what the student wrote is their id.
    """
    from IPython.core.inputtransformer2 import TransformerManager

    found = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(TransformerManager().transform_cell(cell.source))
        except (SyntaxError, ValueError):
            continue
        for node in tree.body:
            target = node.targets[0] if isinstance(node, ast.Assign) else None
            target = node.target if isinstance(node, ast.AnnAssign) else target
            if (
                isinstance(target, ast.Name)
                and target.id == "student_id"
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                found.add(node.value.value.strip())
    found.discard(PLACEHOLDER)
    found.discard("")
    return found.pop() if len(found) == 1 else None


def _manifest(folder: Path) -> dict:
    """``relative path -> sha256`` of every file under ``folder`` (a link: its target)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_symlink():
            out[rel] = "link:" + os.readlink(path)
        elif path.is_file():
            try:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError:
                out[rel] = "unreadable"
        elif not path.is_dir():
            out[rel] = "special"
    return out


def _changed(before: dict, after: dict) -> list:
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def _tracked(root: Path) -> list:
    """The checkout's tracked files (``git ls-files``), or every file of the package."""
    done = subprocess.run(
        ["git", "ls-files", "-z"], cwd=root, capture_output=True, timeout=60, check=False
    )
    names = [n for n in done.stdout.decode().split("\0") if n] if done.returncode == 0 else []
    if not names:
        names = [p.relative_to(root).as_posix() for p in (root / "hcct_lite").rglob("*.py")]
    return [root / n for n in names]


def _fingerprint(paths: list) -> dict:
    out = {}
    for path in paths:
        try:
            out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            out[str(path)] = "missing"
    return out


def _lock(folder: Path) -> None:
    """Make ``folder`` read-only: files 444, folders 555."""
    for path in sorted(folder.rglob("*"), reverse=True):
        if not path.is_symlink():
            path.chmod(0o555 if path.is_dir() else 0o444)
    folder.chmod(0o555)


def _unlock(folder: Path) -> None:
    """Give every folder and file under ``folder`` back to its owner (u+rwx), not following
    links, so that it can be read and removed."""
    if not folder.exists() or folder.is_symlink():
        return
    folder.chmod(0o700)
    for top, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(top, name)
            if not path.is_symlink():
                try:
                    path.chmod(0o700 if path.is_dir() else 0o600)
                except OSError:
                    pass


def _remove(folder: Path) -> None:
    _unlock(folder)
    shutil.rmtree(folder, ignore_errors=True)


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


def _answers(text: str, marker: str) -> dict | None:
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


class _Spec:
    """The kernel's spec, held in memory: this Python's ipykernel, nothing read from disk."""

    def __init__(self):
        from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

        spec = KernelSpec(
            argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
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


def run_submission(nb, tmp: Path, kit: Path, timeout: int, total: int) -> tuple:
    """Run ``nb``'s code cells in a fresh kernel in ``tmp``; return ``(answers, notes)``.

    After each cell the grader's cell reads the answers. The first cell that runs past
    ``timeout`` seconds (or past ``total`` for the whole notebook), or that kills the
    kernel, stops the run: the answers are those the cells above it set.
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

    km = AsyncKernelManager(kernel_name="hcct-grader", kernel_spec_manager=_Spec().manager)
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
    answers, notes = {name: None for name in NAMES}, []
    env = _kernel_env(tmp, kit)
    try:
        with client.setup_kernel(
            env=env, cwd=str(tmp / "work"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        ):
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
                found = _answers(text, marker)
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
    return answers, notes


def _score(answers: dict, key: dict) -> list:
    points = []
    for i, (kind, decimals) in QUESTIONS.items():
        given = answers.get(f"answer_{i}")
        right = given is not None and judge(kind, given, key[f"answer_{i}"], decimals)
        points.append(1 if right else 0)
    return points


COLUMNS = ["submission", "student_id", *[f"q{i}" for i in QUESTIONS], "total", "possible"]
COLUMNS += ["flagged", "notes"]


def _row(path: Path) -> dict:
    row = dict.fromkeys(COLUMNS, "")
    row.update({f"q{i}": 0 for i in QUESTIONS}, submission=path.name, total=0)
    row.update(possible=len(QUESTIONS), answers={})
    return row


def _note(row: dict, text: str) -> None:
    row["notes"] = "; ".join(filter(None, [row["notes"], text]))


def _zero(row: dict, why: str) -> None:
    row.update({f"q{i}": 0 for i in QUESTIONS}, total=0, flagged=why)


def _prepare(paths: list) -> list:
    """``(notebook, key, row)`` per submission: its id read from its text, its key computed."""
    jobs = []
    for path in paths:
        row, nb, key = _row(path), None, None
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception as err:  # noqa: BLE001 - not a notebook at all
            _note(row, f"not a notebook: {type(err).__name__}")
        sid = read_student_id(nb) if nb is not None else None
        if nb is not None and sid is None:
            _note(row, 'no student id: student_id = "..." in the first cell, as text')
        if sid is not None:
            row["student_id"], key = sid, answer_key(sid)
        jobs.append((nb, key, row))
    ids = [row["student_id"] for *_, row in jobs]
    for *_, row in jobs:
        if row["student_id"] and ids.count(row["student_id"]) > 1:
            _note(row, "another submission has the same id")
    return jobs


def _grade_one(nb, key: dict, row: dict, base: Path, pristine: Path, expected: dict, limits):
    """Run one submission against its own read-only copy of ``pristine``; fill in ``row``."""
    tmp = Path(tempfile.mkdtemp(prefix="submission-", dir=base))
    kit = tmp / "kit"
    try:
        shutil.copytree(pristine, kit, symlinks=True)
        _unlock(kit)
        if _manifest(kit) != expected:
            return False
        _lock(kit)
        answers, notes = run_submission(nb, tmp, kit, *limits)
        _unlock(kit)
        changed = _changed(expected, _manifest(kit))
    finally:
        _remove(tmp)
    points = _score(answers, key)
    row.update({f"q{i}": p for i, p in zip(QUESTIONS, points, strict=True)})
    row.update(total=sum(points), answers=answers)
    for note in notes:
        _note(row, note)
    if changed:
        _zero(row, f"changed its copy of the package: {_few(changed)}")
    return True


def grade(
    submissions: list,
    csv_path: Path | None = None,
    timeout: int = 120,
    total: int = 1800,
    root: Path | None = None,
) -> list:
    """Grade each submitted notebook of the final assessment; one row (a dict) each.

    Parameters
    ----------
    submissions : list of path-like
        The notebooks; each is graded for the ``student_id`` its code assigns as text.
    csv_path : path-like, optional
        Where to write the rows as CSV (columns :data:`COLUMNS`).
    timeout : int, default=120
        Seconds a cell may run; the first that runs longer stops its notebook there.
    total : int, default=1800
        Seconds a whole notebook may run.
    root : path-like, optional
        The checkout watched for changes (its tracked files); default this one.

    Returns
    -------
    list of dict
        Per submission: ``q1`` ... ``q6`` (1 or 0), ``total``, ``possible``, ``flagged``
        (why it scored 0 for changing files, or why it was not graded), ``notes`` and
        ``answers`` (the plain answers read, not in the CSV).

    Raises
    ------
    SystemExit
        Naming a submission that is not a file.
    """
    root = Path(root or ROOT)
    paths = [Path(p) for p in submissions]
    for path in paths:
        if not path.is_file():
            raise SystemExit(f"no submission {path}")
    # everything trusted happens before any submission runs: ids, keys, fingerprints
    jobs = _prepare(paths)
    package, results = Path(hl.__file__).resolve().parent, results_dir().resolve()
    tracked = _tracked(root)
    checkout = _fingerprint(tracked)
    base = Path(tempfile.mkdtemp(prefix="hcct-grade-"))
    stopped, touched = None, []
    try:
        pristine = base / "pristine"
        pristine.mkdir()
        shutil.copytree(package, pristine / "hcct_lite", ignore=SKIP)
        shutil.copytree(results, pristine / "results", ignore=SKIP)
        expected = _manifest(pristine)
        _lock(pristine)
        for nb, key, row in jobs:
            if stopped:
                row["flagged"] = f"not graded: the grader's copy changed while {stopped} ran"
                continue
            if key is not None:
                limits = (timeout, total)
                if not _grade_one(nb, key, row, base, pristine, expected, limits):
                    stopped = "an earlier submission"
                    row["flagged"] = "not graded: the grader's own copy changed"
                    continue
            now = _fingerprint(tracked)
            if now != checkout:  # by this submission, or by someone editing meanwhile
                moved = _few(_changed(checkout, now))
                _zero(row, f"the checkout changed while it ran: {moved} (see git diff)")
                checkout, touched = now, [*touched, row["submission"]]
            if pristine.stat().st_mode & 0o222 or _manifest(pristine) != expected:
                _zero(row, "changed the grader's own copy of the package")
                stopped = row["submission"]
            _report(row)
    finally:
        _remove(base)
    if touched:
        print(
            f"WARNING: the checkout changed while {', '.join(touched)} ran. Look at "
            "git status and git diff before you trust it again.",
            flush=True,
        )
    if stopped:
        print(
            f"STOPPED after {stopped}: the grader's own copy changed. Grade the submissions "
            "not graded again, on their own.",
            flush=True,
        )
    rows = [row for *_, row in jobs]
    if csv_path is not None:
        with open(csv_path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
    return rows


def _few(paths: list) -> str:
    names = [Path(p).name if os.path.isabs(p) else p for p in paths[:3]]
    return ", ".join(names) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")


def _report(row: dict) -> None:
    line = (
        f"{row['submission']} ({row['student_id'] or 'no id'}): {row['total']} of {row['possible']}"
    )
    if row["flagged"]:
        line += f"  FLAGGED: {row['flagged']}"
    if row["notes"]:
        line += f"  ({row['notes']})"
    print(line, flush=True)

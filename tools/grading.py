"""Grading the final assessment (notebook 06) so that a submission cannot game it.

    python tools/assessment.py grade SUBMISSION ... [--csv GRADES] [--timeout S] [--total S]

:func:`grade` trusts nothing a submission runs:

1. it reads each submission's ``student_id`` from the notebook's text, and computes that
   student's key (:func:`assessment.answer_key`), before any submission runs;
2. it runs each submission in a fresh kernel (``grading_kernel``), in a temporary folder
   (its home and working folder) with a read-only copy of the package and the shipped
   results, first on the kernel's path; a cell that runs past the timeout stops the run;
3. on Linux the kernel runs isolated (``grading_sandbox``): it sees neither the checkout
   nor the grader's files; elsewhere a warning says that it can read them;
4. after each cell, a cell of its own prints the answer variables as plain JSON (numbers,
   text and lists of them; anything else is read as no answer);
5. it judges those answers in this process, with :func:`hcct_lite.lessons.checks.judge`;
6. it kills every process the submission started, then hashes the copy: a submission that
   changed it scores 0, flagged. So does one during which a tracked file of the checkout
   changed, unless a process of an earlier one may still run: then both are named. One
   that changed the grader's own copy (the pristine one) stops the grading. After the last,
   it looks at the checkout again, a little later.

The kernel never holds a key and never judges. What grading cannot stop is in
``docs/teaching.md`` (grading the final assessment).
"""

from __future__ import annotations

import ast
import csv
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from assessment import QUESTIONS, ROOT, SKIP, SOURCE, answer_key
from grading_files import (
    changed,
    few,
    fingerprint,
    lock,
    manifest,
    remove,
    tracked,
    unlock,
    untracked,
)
from grading_kernel import KERNEL, run_submission
from grading_sandbox import Reaper, unavailable, wrap

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


def _same_id(sid):
    return " ".join(sid.split()).casefold() if sid else sid


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
    # the same id however it is written: case and spaces draw the same numbers
    ids = [_same_id(row["student_id"]) for *_, row in jobs]
    for *_, row in jobs:
        if row["student_id"] and ids.count(_same_id(row["student_id"])) > 1:
            _note(row, "another submission has the same id")
    return jobs


class _Class:
    """What grading a class shares: the copies, the isolation, the checkout's hashes."""

    def __init__(self, base: Path, root: Path, limits: tuple, isolate: bool = True):
        self.base, self.limits, self.reaper = base, limits, Reaper()
        self.pristine = base / "pristine"
        self.pristine.mkdir()
        package, results = Path(hl.__file__).resolve().parent, results_dir().resolve()
        shutil.copytree(package, self.pristine / "hcct_lite", ignore=SKIP)
        shutil.copytree(results, self.pristine / "results", ignore=SKIP)
        self.expected = manifest(self.pristine)
        lock(self.pristine)
        self.root, self.tracked = root, tracked(root)
        self.checkout = self.state()
        (base / "root").mkdir()
        venv = Path(os.path.realpath(sys.prefix))
        shown = [p for p in self.tracked if not p.resolve().is_relative_to(venv)][:50]
        hidden = [ROOT / "tools" / "assessment.py", SOURCE, self.pristine, *shown]
        self.why_not = unavailable(base, hidden) if isolate else "turned off (isolate=False)"
        self.loose = {}  # submission -> whether a process it started may still run

    def command(self, tmp: Path, kit: Path) -> list:
        if self.why_not:
            return KERNEL
        return wrap(KERNEL, self.base / "root", tmp, kit)

    def run(self, nb, key: dict, row: dict) -> bool:
        """Run one submission against its own read-only copy; fill in ``row``. False when
        the copy made for it differs from the pristine one."""
        tmp = Path(tempfile.mkdtemp(prefix="submission-", dir=self.base))
        kit, before, pid = tmp / "kit", set(self.reaper.descendants()), None
        try:
            shutil.copytree(self.pristine, kit, symlinks=True)
            unlock(kit)
            if manifest(kit) != self.expected:
                return False
            lock(kit)
            command = self.command(tmp, kit)
            answers, notes, pid = run_submission(nb, tmp, kit, *self.limits, command=command)
        finally:
            left = self.reaper.end(before, pid)
            self.loose[row["submission"]] = left is None or bool(left)
            if left:
                _note(row, f"{len(left)} of its processes could not be killed")
            unlock(kit)
            moved = changed(self.expected, manifest(kit))
            remove(tmp)
        points = _score(answers, key)
        row.update({f"q{i}": p for i, p in zip(QUESTIONS, points, strict=True)})
        row.update(total=sum(points), answers=answers)
        for note in notes:
            _note(row, note)
        if moved:
            _zero(row, f"changed its copy of the package: {few(moved)}")
        return True

    def suspects(self, row: dict | None = None) -> list:
        """The submissions before ``row`` (all, if None) whose processes may still run."""
        names = [name for name, alive in self.loose.items() if alive]
        return [n for n in names if row is None or n != row["submission"]]

    def state(self) -> dict:
        """The hashes of the checkout's tracked files and of its new, unignored ones."""
        return fingerprint(self.tracked + untracked(self.root))

    def watch(self, row: dict) -> bool:
        """Whether the checkout changed while ``row`` ran; flag it, and blame fairly."""
        now = self.state()
        if now == self.checkout:
            return False
        moved, self.checkout = few(changed(self.checkout, now)), now
        earlier = self.suspects(row)
        if not earlier:  # by this submission, or by someone editing meanwhile
            _zero(row, f"the checkout changed while it ran: {moved} (see git diff)")
            return True
        row["flagged"] = (
            f"the checkout changed while it ran: {moved}; an earlier submission may have "
            f"left a process running: {', '.join(earlier)}"
        )
        return True

    def late(self, settle: float) -> str | None:
        """A warning when the checkout changed ``settle`` seconds after the last one."""
        time.sleep(settle)
        now = self.state()
        if now == self.checkout:
            return None
        moved, names = few(changed(self.checkout, now)), self.suspects()
        who = (
            f"A process left by {', '.join(names)} may have done it."
            if names
            else "No submission left a process the grader could see."
        )
        return f"WARNING: the checkout changed after the last submission ended: {moved}. {who}"


def _warnings(why_not: str | None) -> list:
    if why_not is None:
        return []
    lines = [
        f"WARNING: submissions can read your files, the key and the solutions included "
        f"(no isolation: {why_not}). Grade in a container or virtual machine, as an "
        "unprivileged user: make grade there."
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        lines.append(
            "WARNING: grading as root without isolation: read-only stops nothing. Grade "
            "as an unprivileged user."
        )
    return lines


def grade(
    submissions: list,
    csv_path: Path | None = None,
    timeout: int = 120,
    total: int = 1800,
    root: Path | None = None,
    settle: float = 2.0,
    isolate: bool = True,
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
    settle : float, default=2.0
        Seconds after the last submission before the checkout is looked at again.
    isolate : bool, default=True
        Run each kernel isolated, and refuse to grade where the system does not allow it;
        False runs it as the grader (the checks on changed files then still stand).

    Returns
    -------
    list of dict
        Per submission: ``q1`` ... ``q6`` (1 or 0), ``total``, ``possible``, ``flagged``
        (why it scored 0 for changing files, why it needs a look, or why it was not
        graded), ``notes`` and ``answers`` (the plain answers read, not in the CSV).

    Raises
    ------
    SystemExit
        Naming a submission that is not a file, or why kernels cannot run isolated here.
    """
    paths = [Path(p) for p in submissions]
    for path in paths:
        if not path.is_file():
            raise SystemExit(f"no submission {path}")
    # everything trusted happens before any submission runs: ids, keys, fingerprints
    jobs = _prepare(paths)
    base = Path(tempfile.mkdtemp(prefix="hcct-grade-"))
    stopped, touched, late = None, [], None
    try:
        group = _Class(base, Path(root or ROOT), (timeout, total), isolate)
        if isolate and group.why_not:
            raise SystemExit(
                f"cannot grade isolated here ({group.why_not}): a submission could change "
                "your files. Grade on Linux with unshare, or pass --unisolated to accept that."
            )
        for line in _warnings(group.why_not):
            print(line, flush=True)
        for nb, key, row in jobs:
            if stopped:
                row["flagged"] = f"not graded: the grader's copy changed while {stopped} ran"
                continue
            if key is not None and not group.run(nb, key, row):
                stopped = "an earlier submission"
                row["flagged"] = "not graded: the grader's own copy changed"
                continue
            if group.watch(row):
                touched.append(row["submission"])
            if group.pristine.stat().st_mode & 0o222 or manifest(group.pristine) != group.expected:
                _zero(row, "changed the grader's own copy of the package")
                stopped = row["submission"]
            _report(row)
        late = group.late(settle)
    finally:
        if "group" in locals():
            group.reaper.close()
        remove(base)
    _summary(touched, stopped, late)
    rows = [row for *_, row in jobs]
    if csv_path is not None:
        with open(csv_path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
    return rows


def _summary(touched: list, stopped: str | None, late: str | None) -> None:
    if touched:
        print(
            f"WARNING: the checkout changed while {', '.join(touched)} ran. Look at "
            "git status and git diff before you trust it again.",
            flush=True,
        )
    if late:
        print(late + " Look at git status and git diff.", flush=True)
    if stopped:
        print(
            f"STOPPED after {stopped}: the grader's own copy changed. Grade the submissions "
            "not graded again, on their own.",
            flush=True,
        )


def _report(row: dict) -> None:
    line = (
        f"{row['submission']} ({row['student_id'] or 'no id'}): {row['total']} of {row['possible']}"
    )
    if row["flagged"]:
        line += f"  FLAGGED: {row['flagged']}"
    if row["notes"]:
        line += f"  ({row['notes']})"
    print(line, flush=True)

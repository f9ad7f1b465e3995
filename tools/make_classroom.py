"""Write the classroom editions of the notebooks (``make classroom``).

    python tools/make_classroom.py [OUT [NOTEBOOK ...]]   # OUT: classroom/; all notebooks
    python tools/make_classroom.py --solved OUT            # for make test: merged, not run

The notebooks in ``notebooks/`` hold no solutions: each notebook's are in
``docs/solutions/<notebook>.md``, one code block per exercise.

``OUT/student/``: every notebook with all outputs removed, exercises kept; each edition is
first executed top to bottom in shipped mode, so a student notebook that would fail stops
the build, naming the notebook and cell. With the final assessment's student edition
(``tools/assessment.py``: otter-grader's ``otter assign``), which holds no solution and no
key: each student's numbers come from their id, and ``make grade`` computes each key.
``OUT/instructor/``: every notebook with its solutions below its exercises, executed in
shipped mode, every figure and answer kept; the assessment's solutions, worked for the
example id (``tools/assessment.py``: ``EXAMPLE_ID``).
``OUT/student-kit/`` and ``OUT/student-kit.zip``: what to hand out, the package, the
shipped results and the student editions (nothing of ``docs/``).
The assessment and the kit are written when every notebook is (no NOTEBOOK given).
``--solved OUT``: every notebook with its solutions below its exercises and its stored
outputs kept (what nbval checks), not executed: ``make test`` runs these.
"""

from __future__ import annotations

import copy
import re
import shutil
import sys
from pathlib import Path

import nbformat
from assessment import EXAMPLE_ID, build_assessment, with_student_id, write_kit
from notebook_exec import AS_SHOWN, NotebookError, execute

__all__ = ["solutions_of", "student_edition", "instructor_edition", "main"]

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "docs" / "solutions"
EXERCISES = "## Exercises"
ASSESSMENT = "06_assessment.ipynb"
NOTE = "The solutions are not in this notebook"
BLOCK = re.compile(r"^## Exercise (\d+)\n+```python\n(.*?)\n```", re.S | re.M)


def solutions_of(notebook: Path, folder: Path = SOLUTIONS) -> list:
    """The solution code of ``notebook``'s exercises, in order (exercise 1 first).

    Raises ``SystemExit`` naming the file when it is missing or its exercises are not
    numbered 1, 2, ... in order.
    """
    path = folder / f"{notebook.stem}.md"
    if not path.is_file():
        raise SystemExit(f"{notebook.name}: no solutions file {path}")
    found = BLOCK.findall(path.read_text())
    numbers = [int(n) for n, _ in found]
    if numbers != list(range(1, len(found) + 1)) or not found:
        raise SystemExit(f"{path}: exercises numbered {numbers}, expected 1, 2, ... in order")
    return [code for _, code in found]


def _exercises_at(nb, name: str) -> int:
    at = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and EXERCISES in c.source]
    if len(at) != 1:
        raise SystemExit(f"{name}: expected one '{EXERCISES}' cell, found {len(at)}")
    return at[0]


def _clear(nb):
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata.pop("widgets", None)
    return nb


def _reword(source: str, text: str) -> str:
    """Replace the notebook's paragraph on where the solutions are with ``text``."""
    start = source.find(NOTE)
    if start < 0:
        return source
    end = source.find("\n\n", start)
    return source[:start] + text + ("" if end < 0 else source[end:])


def student_edition(nb):
    """A copy of ``nb`` without outputs, telling the student who has the solutions."""
    out = copy.deepcopy(nb)
    for cell in out.cells:
        if cell.cell_type == "markdown":
            cell.source = _reword(cell.source, "Your instructor has the solutions.")
    return _clear(out)


def solved(nb, solutions: list, name: str = "notebook"):
    """A copy of ``nb`` with solution k, tagged ``solution``, right below exercise k's check.

    Every exercise has a check cell (metadata ``exercise``: k); a solution without one stops
    the build, naming the notebook and the exercise.
    """
    out = copy.deepcopy(nb)
    at = _exercises_at(out, name)
    checks = {c.metadata["exercise"]: c for c in out.cells if "exercise" in c.metadata}
    for k, code in enumerate(solutions, 1):
        if k not in checks:
            raise SystemExit(f"{name}: exercise {k} has a solution but no check cell")
        cell = nbformat.v4.new_code_cell(code, metadata={"tags": ["solution"]})
        out.cells.insert(out.cells.index(checks[k]) + 1, cell)
    out.cells[at].source = _reword(out.cells[at].source, "The solutions below are shown and run.")
    return out


def instructor_edition(nb, solutions: list, name: str = "notebook"):
    """:func:`solved` without outputs, to be executed."""
    return _clear(solved(nb, solutions, name))


def _execute(nb, name: str, cwd: Path):
    # figures and sliders' starting pictures as outputs; seconds per cell from
    # HCCT_CELL_TIMEOUT (default 600): a hung kernel fails, the cell named
    try:
        return execute(nb, mode="shipped", cwd=cwd, name=name, env=AS_SHOWN)
    except (NotebookError, ValueError) as err:
        raise SystemExit(str(err)) from None


def _notebooks(paths: list) -> list:
    notebooks = [Path(a) for a in paths] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    missing = [str(p) for p in notebooks if not p.is_file()]
    if missing:
        raise SystemExit(f"no such notebook: {', '.join(missing)}")
    if not notebooks:
        raise SystemExit(f"no notebooks in {ROOT / 'notebooks'}")
    return notebooks


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--solved"]:
        out = Path(args[1]) if len(args) > 1 else ROOT / "build" / "solved"
        out.mkdir(parents=True, exist_ok=True)
        for path in _notebooks(args[2:]):
            nb = solved(nbformat.read(path, as_version=4), solutions_of(path), path.name)
            nbformat.write(nb, out / path.name)
            print(f"wrote {out / path.name}")
        return 0
    out = Path(args[0]) if args else ROOT / "classroom"
    notebooks = _notebooks(args[1:])
    _editions(out, notebooks)
    if not args[1:]:  # the whole class: the assessment and the students' kit too
        _assessment(out)
        kit = write_kit(out, out / "student")
        print(f"wrote {kit} and {kit}.zip: the folder to hand out")
    return 0


def _assessment(out: Path) -> None:
    """Notebook 06 through otter-grader: its student edition, its worked example."""
    work = out / "assessment"
    shutil.rmtree(work, ignore_errors=True)
    build_assessment(work)
    shutil.copy(work / "student" / ASSESSMENT, out / "student" / ASSESSMENT)
    solved = nbformat.read(work / "autograder" / ASSESSMENT, as_version=4)
    solved = with_student_id(solved, EXAMPLE_ID)
    ran = _execute(solved, f"instructor/{ASSESSMENT}", out / "instructor")
    nbformat.write(ran, out / "instructor" / ASSESSMENT)
    (out / "instructor" / "06_assessment-autograder.zip").unlink(missing_ok=True)  # older builds
    print(f"wrote {out / 'instructor' / ASSESSMENT}: worked for the id {EXAMPLE_ID!r}")


def _editions(out: Path, notebooks: list) -> None:
    for edition in ("student", "instructor"):
        folder = out / edition
        folder.mkdir(parents=True, exist_ok=True)
        for path in notebooks:
            nb = nbformat.read(path, as_version=4)
            if edition == "student":
                nb = student_edition(nb)
            else:
                nb = instructor_edition(nb, solutions_of(path), path.name)
            ran = _execute(copy.deepcopy(nb), f"{edition}/{path.name}", folder)
            nbformat.write(nb if edition == "student" else ran, folder / path.name)
            print(f"wrote {folder / path.name}")


if __name__ == "__main__":
    sys.exit(main())

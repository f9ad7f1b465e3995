"""``make classroom``: a student edition without solutions, an instructor edition with them."""

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from make_classroom import instructor_edition, main, student_edition  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_student_edition_keeps_exercises_and_drops_solutions_and_outputs(path):
    nb = nbformat.read(path, as_version=4)
    student = student_edition(nb)
    assert not [c for c in student.cells if "solution" in c.metadata.get("tags", [])]
    assert all(not c.get("outputs") for c in student.cells if c.cell_type == "code")
    text = "\n".join(c.source for c in student.cells)
    assert "## Exercises" in text and "Your instructor has the solutions." in text
    assert "solutions_shown():" not in text and "HCCT_SOLUTIONS" not in text
    # every non-solution cell survives, in order
    kept = [c.source for c in nb.cells if "solution" not in c.metadata.get("tags", [])]
    assert len(student.cells) == len(kept)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_instructor_edition_runs_its_solutions_unguarded(path):
    nb = nbformat.read(path, as_version=4)
    teacher = instructor_edition(nb)
    solutions = [c for c in teacher.cells if "solution" in c.metadata.get("tags", [])]
    assert solutions and all(c.source.startswith("# Solution") for c in solutions)
    for cell in solutions:
        compile(cell.source, path.name, "exec")  # dedented into valid code


def test_make_classroom_writes_both_editions_that_run_in_shipped_mode(tmp_path):
    # in its own process, as `make classroom` runs it: no event loop or environment shared
    # with the other tests; a hung kernel fails after 5 minutes, naming the notebook
    notebook = ROOT / "notebooks" / "02_generalization_bound.ipynb"
    env = dict(os.environ, HCCT_CELL_TIMEOUT="300")
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "make_classroom.py"),
                           str(tmp_path), str(notebook)], env=env, capture_output=True,
                          text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "wrote" in done.stdout
    student = nbformat.read(tmp_path / "student" / "02_generalization_bound.ipynb", as_version=4)
    teacher = nbformat.read(tmp_path / "instructor" / "02_generalization_bound.ipynb", as_version=4)
    assert all(not c.get("outputs") for c in student.cells if c.cell_type == "code")
    answers = [c for c in teacher.cells if "solution" in c.metadata.get("tags", [])]
    assert all(c.outputs for c in answers)  # every solution ran and printed its answer
    # every figure the notebook draws is in the handout (a plotting cell has an image)
    plots = [c for c in teacher.cells if c.cell_type == "code" and "plot" in c.source]
    assert plots and all(_images(c) for c in plots)


def _images(cell) -> int:
    return sum("image/png" in o.get("data", {}) for o in cell.get("outputs", []))


def test_a_missing_notebook_is_named(tmp_path):
    with pytest.raises(SystemExit, match="no such notebook: nope.ipynb"):
        main([str(tmp_path), "nope.ipynb"])

"""``make classroom``: a student edition without solutions, an instructor edition with them."""

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from make_classroom import instructor_edition, main, solutions_of, student_edition  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_answer_in_the_notebooks_and_one_solution_per_exercise(path):
    nb = nbformat.read(path, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "# Solution" not in code and "solution" not in str([c.metadata for c in nb.cells])
    (exercises,) = [c.source for c in nb.cells if "## Exercises" in c.source]
    asked = re.findall(r"^(\d+)\. ", exercises[exercises.index("## Exercises") :], re.M)
    solutions = solutions_of(path)
    assert [int(n) for n in asked] == list(range(1, len(solutions) + 1))
    for k, code in enumerate(solutions, 1):
        assert code.startswith(f"# Solution {k}")
        compile(code, f"{path.stem} solution {k}", "exec")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_editions_place_the_solutions_below_the_exercises(path):
    nb = nbformat.read(path, as_version=4)
    student = student_edition(nb)
    assert all(not c.get("outputs") for c in student.cells if c.cell_type == "code")
    text = "\n".join(c.source for c in student.cells)
    assert "## Exercises" in text and "Your instructor has the solutions." in text
    assert len(student.cells) == len(nb.cells)
    teacher = instructor_edition(nb, solutions_of(path), path.name)
    at = next(i for i, c in enumerate(teacher.cells) if "## Exercises" in c.source)
    added = [c for c in teacher.cells if "solution" in c.metadata.get("tags", [])]
    assert [c.source for c in added] == solutions_of(path)
    assert all(teacher.cells.index(c) > at for c in added)
    for k, cell in enumerate(added, 1):  # right below its own check cell
        assert teacher.cells[teacher.cells.index(cell) - 1].metadata.get("exercise") == k
    assert "The solutions below are shown and run." in teacher.cells[at].source
    assert len(teacher.cells) == len(nb.cells) + len(added)


def test_a_solution_without_its_check_cell_is_named():
    nb = nbformat.read(NOTEBOOKS[0], as_version=4)
    nb.cells = [c for c in nb.cells if c.metadata.get("exercise") != 2]
    with pytest.raises(SystemExit, match="x.ipynb: exercise 2 has a solution but no check"):
        instructor_edition(nb, solutions_of(NOTEBOOKS[0]), "x.ipynb")


def test_a_solutions_file_out_of_order_is_named(tmp_path):
    (tmp_path / "x.md").write_text("## Exercise 2\n\n```python\n# Solution 2\n```\n")
    with pytest.raises(SystemExit, match="x.md: exercises numbered \\[2\\], expected 1, 2"):
        solutions_of(Path("x.ipynb"), tmp_path)
    with pytest.raises(SystemExit, match="y.ipynb: no solutions file"):
        solutions_of(Path("y.ipynb"), tmp_path)


def test_make_classroom_writes_both_editions_that_run_in_shipped_mode(tmp_path):
    # in its own process, as `make classroom` runs it: no event loop or environment shared
    # with the other tests; a hung kernel fails after 5 minutes, naming the notebook
    notebook = ROOT / "notebooks" / "02_generalization_bound.ipynb"
    env = dict(os.environ, HCCT_CELL_TIMEOUT="300")
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "make_classroom.py"), str(tmp_path), str(notebook)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "wrote" in done.stdout
    student = nbformat.read(tmp_path / "student" / "02_generalization_bound.ipynb", as_version=4)
    teacher = nbformat.read(tmp_path / "instructor" / "02_generalization_bound.ipynb", as_version=4)
    assert all(not c.get("outputs") for c in student.cells if c.cell_type == "code")
    answers = [c for c in teacher.cells if "solution" in c.metadata.get("tags", [])]
    assert all(c.outputs for c in answers)  # every solution ran and printed its answer
    # every figure the notebook draws is in the handout, sliders' starting pictures too
    figures = [c for c in teacher.cells if c.metadata.get("alt")]
    assert len(figures) == 4 and all(_images(c) for c in figures)


def _images(cell) -> int:
    return sum("image/png" in o.get("data", {}) for o in cell.get("outputs", []))


def test_a_missing_notebook_is_named(tmp_path):
    with pytest.raises(SystemExit, match="no such notebook: nope.ipynb"):
        main([str(tmp_path), "nope.ipynb"])

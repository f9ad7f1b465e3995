"""Write the classroom editions of the notebooks (``make classroom``).

    python tools/make_classroom.py [OUT [NOTEBOOK ...]]   # OUT: classroom/; all notebooks

``OUT/student/``: every notebook with its solution cells and all outputs removed, exercises
kept; each edition is first executed top to bottom in shipped mode, so a student notebook
that would fail stops the build, naming the notebook and cell.
``OUT/instructor/``: every notebook executed in shipped mode with its solutions shown and
unwrapped (no ``if hl.solutions_shown():`` guard), outputs kept.
"""

from __future__ import annotations

import copy
import os
import sys
import textwrap
from pathlib import Path

import nbformat
from build_book import execute
from nbconvert.preprocessors import CellExecutionError

__all__ = ["student_edition", "instructor_edition", "main"]

ROOT = Path(__file__).resolve().parents[1]
GUARD = "if hl.solutions_shown():\n"
HIDDEN = "Solutions are hidden"
# the kernel's inline backend records every figure as an output (Agg would record none)
INLINE = "module://matplotlib_inline.backend_inline"
# seconds per cell (HCCT_CELL_TIMEOUT overrides): a hung kernel fails, the cell named
CELL_TIMEOUT = int(os.environ.get("HCCT_CELL_TIMEOUT", "600"))


def _is_solution(cell) -> bool:
    return "solution" in cell.metadata.get("tags", [])


def _clear(nb):
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata.pop("widgets", None)
    return nb


def _reword(source: str, text: str) -> str:
    """Replace the notebook's paragraph on hidden solutions with ``text``."""
    start = source.find(HIDDEN)
    if start < 0:
        return source
    end = source.find("\n\n", start)
    return source[:start] + text + ("" if end < 0 else source[end:])


def student_edition(nb):
    """A copy of ``nb`` without solution cells and without outputs."""
    out = copy.deepcopy(nb)
    out.cells = [c for c in out.cells if not _is_solution(c)]
    for cell in out.cells:
        if cell.cell_type == "markdown":
            cell.source = _reword(cell.source, "Your instructor has the solutions.")
    return _clear(out)


def instructor_edition(nb):
    """A copy of ``nb`` whose solution cells run unconditionally (the guard removed)."""
    out = copy.deepcopy(nb)
    for cell in out.cells:
        if _is_solution(cell) and cell.source.startswith(GUARD):
            cell.source = textwrap.dedent(cell.source[len(GUARD) :])
        elif cell.cell_type == "markdown":
            cell.source = _reword(cell.source, "The solutions below are shown and run.")
    return _clear(out)


def _execute(nb, name: str, cwd: Path):
    try:
        return execute(nb, cwd, CELL_TIMEOUT, {"HCCT_MODE": "shipped", "MPLBACKEND": INLINE})
    except (CellExecutionError, TimeoutError) as err:
        raise SystemExit(f"{name}: a cell failed in shipped mode:\n{str(err)[:2000]}") from None


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else ROOT / "classroom"
    notebooks = [Path(a) for a in args[1:]] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    missing = [str(p) for p in notebooks if not p.is_file()]
    if missing:
        raise SystemExit(f"no such notebook: {', '.join(missing)}")
    if not notebooks:
        raise SystemExit(f"no notebooks in {ROOT / 'notebooks'}")
    for edition, make in (("student", student_edition), ("instructor", instructor_edition)):
        folder = out / edition
        folder.mkdir(parents=True, exist_ok=True)
        for path in notebooks:
            nb = make(nbformat.read(path, as_version=4))
            ran = _execute(copy.deepcopy(nb), f"{edition}/{path.name}", folder)
            nbformat.write(nb if edition == "student" else ran, folder / path.name)
            print(f"wrote {folder / path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Keep committed notebooks small: strip outputs except those nbval checks.

    python tools/strip_notebooks.py notebooks/*.ipynb

Cells marked ``# NBVAL_CHECK_OUTPUT`` keep their outputs (nbval compares them in CI);
every other cell loses outputs and execution count, and widget state is dropped. A cell's
metadata keeps what the project reads: tags, "jupyter" (collapsed solution cells stay
collapsed), "alt" (a figure's text alternative) and "exercise" (the classroom kit's number).
"""

from __future__ import annotations

import sys

import nbformat

__all__ = ["strip_notebook", "main"]

CHECK = "# NBVAL_CHECK_OUTPUT"
KEEP = ("tags", "jupyter", "alt", "exercise")


def strip_notebook(nb):
    """Strip ``nb`` (an nbformat notebook) in place and return it."""
    nb.metadata.pop("widgets", None)
    for key in list(nb.metadata):
        if key not in ("kernelspec", "language_info"):
            nb.metadata.pop(key)
    for cell in nb.cells:
        cell.metadata = {k: v for k, v in cell.metadata.items() if k in KEEP}
        if cell.cell_type != "code":
            continue
        if CHECK in cell.source:
            cell.outputs = [
                o
                for o in cell.outputs
                if o.get("output_type") != "display_data"
                or "application/vnd.jupyter.widget-view+json" not in o.get("data", {})
            ]
            for o in cell.outputs:
                o.pop("metadata", None) if o.get("output_type") == "stream" else None
        else:
            cell.outputs = []
            cell.execution_count = None
    return nb


def main(argv=None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print(__doc__)
        return 2
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        nbformat.write(strip_notebook(nb), path)
        print(f"stripped {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Notebooks are committed stripped by nbstripout: outputs only where nbval checks them."""

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CHECK = "# NBVAL_CHECK_OUTPUT"


def make_args() -> list:
    """The options ``make notebooks`` gives nbstripout, split as its shell splits them."""
    rule = 'print-nbstripout-args: ; @printf "%s\\n" $(NBSTRIPOUT_ARGS)'
    done = subprocess.run(
        ["make", "-s", "--no-print-directory", "--eval", rule, "print-nbstripout-args"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.splitlines()


def hook_args() -> list:
    """The options the pre-commit hook gives nbstripout."""
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    (hook,) = [h for r in config["repos"] for h in r["hooks"] if h["id"] == "strip-notebooks"]
    assert hook["entry"] == ".venv/bin/nbstripout"
    return hook["args"]


def strip(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nbstripout", *make_args(), str(path)],
        capture_output=True,
        text=True,
    )


def test_make_notebooks_and_the_pre_commit_hook_strip_alike():
    args = make_args()
    assert args == hook_args()
    assert args[:3] == ["--keep-id", "--keep-count", "--extra-keys"]
    assert "cell.metadata.slideshow" in args[3]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_exactly_the_checked_cells_keep_their_outputs(path):
    # nbstripout keeps a cell's outputs when its metadata says keep_output; nbval compares
    # the outputs of the cells marked NBVAL_CHECK_OUTPUT: the two lists must be one
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        checked = cell.cell_type == "code" and CHECK in cell.source
        assert cell.metadata.get("keep_output", False) is checked, f"{path.name}, cell {i}"
        if cell.cell_type == "code" and not checked:
            assert cell.outputs == [], f"{path.name}, cell {i}"
        if checked:  # nbval fails a cell whose outputs have no count ("unrun reference cell")
            assert isinstance(cell.execution_count, int), f"{path.name}, cell {i}"


def test_the_committed_notebooks_are_stripped(tmp_path):
    for path in NOTEBOOKS:
        shutil.copy(path, tmp_path / path.name)
        done = strip(tmp_path / path.name)
        assert done.returncode == 0, done.stderr
        assert (tmp_path / path.name).read_text() == path.read_text(), path.name


def test_stripping_keeps_checked_outputs_and_what_the_tools_read(tmp_path):
    out = new_output("stream", name="stdout", text="42\n")
    checked = new_code_cell(f"{CHECK}\nprint(42)", outputs=[out], execution_count=1)
    checked.metadata["keep_output"] = True
    # an unmarked cell loses its output, marked NBVAL_CHECK_OUTPUT or not (the test above
    # keeps the markers in step)
    other = new_code_cell("print(1)", outputs=[out], execution_count=2)
    other.metadata.update(exercise=2, alt="a figure", scrolled=True, tags=["x"], editable=False)
    other.metadata["jupyter"] = {"source_hidden": True}
    heading = new_markdown_cell("## Exercises", metadata={"slideshow": {"slide_type": "-"}})
    nb = new_notebook(cells=[checked, other, heading])
    nb.metadata.update(
        widgets={"state": {}},
        vscode={"x": 1},
        kernelspec={"name": "python3", "display_name": "Python 3"},
    )
    path = tmp_path / "x.ipynb"
    nbformat.write(nb, path)
    assert strip(path).returncode == 0
    got = nbformat.read(path, as_version=4)
    nbformat.validate(got)
    assert got.cells[0].outputs[0]["text"] == "42\n" and got.cells[1].outputs == []
    assert got.cells[0].execution_count == 1  # nbval compares only cells that ran
    assert [c.id for c in got.cells] == [c.id for c in nb.cells]
    # what the classroom kit, the figures' text alternatives and collapsed solutions read
    # stays; editor state goes, and so does the widget state
    assert got.cells[1].metadata == {
        "exercise": 2,
        "alt": "a figure",
        "tags": ["x"],
        "jupyter": {"source_hidden": True},
    }
    assert got.cells[2].metadata == {} and set(got.metadata) == {"kernelspec"}

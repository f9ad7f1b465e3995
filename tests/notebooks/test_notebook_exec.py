"""``tools/notebook_exec.py``: the one way the tools run a notebook (nbclient)."""

import os
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

from notebook_exec import NotebookError, cell_timeout, execute, main  # noqa: E402

KERNEL = {"kernelspec": {"name": "python3", "display_name": "Python 3"}}
SHOW = "import os\nprint(os.environ['HCCT_MODE'], os.environ.get('EXTRA'), os.getcwd(), sep='\\n')"


def _notebook(*sources):
    cells = [new_markdown_cell("# A notebook")]
    cells += [new_code_cell(s) for s in sources]
    return new_notebook(cells=cells, metadata=KERNEL)


def _text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs)


def test_a_notebook_runs_in_its_mode_folder_and_environment(tmp_path, monkeypatch):
    # the mode given wins over the caller's HCCT_MODE, which stays as it was
    monkeypatch.setenv("HCCT_MODE", "full")
    nb = execute(_notebook(SHOW), mode="quick", cwd=tmp_path, env={"EXTRA": "x"})
    mode, extra, cwd = _text(nb.cells[1]).splitlines()
    assert (mode, extra) == ("quick", "x") and Path(cwd).resolve() == tmp_path.resolve()
    assert nb.cells[1].execution_count == 1
    assert os.environ["HCCT_MODE"] == "full" and "EXTRA" not in os.environ


def test_a_failing_cell_is_named_with_its_notebook_and_mode(tmp_path):
    nb = _notebook("x = 1", "1 / 0", "print('never')")
    with pytest.raises(NotebookError) as err:
        execute(nb, mode="shipped", cwd=tmp_path, name="lessons/tiny.ipynb")
    message = str(err.value)
    head = "lessons/tiny.ipynb (HCCT_MODE=shipped), cell 2 ('1 / 0'): raised ZeroDivisionError"
    assert message.startswith(head), message
    assert "\x1b[" not in message  # no terminal colours in a build log
    assert nb.cells[3].outputs == []  # the run stopped at the failing cell


def test_a_cell_past_its_time_is_named(tmp_path):
    nb = _notebook("import time\ntime.sleep(30)")
    with pytest.raises(NotebookError, match=r"t.ipynb \(HCCT_MODE=quick\), cell 1 .*past 2 s"):
        execute(nb, mode="quick", cwd=tmp_path, name="t.ipynb", timeout=2)


@pytest.mark.parametrize("mode", ["fast", "", None, "QUICK "])
def test_a_mode_that_is_not_one_is_refused_before_a_kernel_starts(mode):
    with pytest.raises(ValueError, match="HCCT_MODE=.* is not a mode"):
        execute(_notebook("1"), mode=mode)


@pytest.mark.parametrize("value", [0, -5, "0", "ten", "1.5", "", True, 2.0, [1]])
def test_a_timeout_that_is_not_seconds_is_refused(value):
    with pytest.raises(ValueError, match="positive whole number"):
        execute(_notebook("1"), mode="quick", timeout=value)


@pytest.mark.parametrize("value", ["0", "-1", "ten", "1.5", "", " "])
def test_a_cell_timeout_variable_that_is_not_seconds_is_named(value):
    with pytest.raises(ValueError, match=f"HCCT_CELL_TIMEOUT={value!r}: seconds"):
        cell_timeout({"HCCT_CELL_TIMEOUT": value})


def test_the_timeout_defaults_to_ten_minutes_or_the_environment():
    assert cell_timeout({}) == 600 and cell_timeout({"HCCT_CELL_TIMEOUT": "30"}) == 30


def test_the_command_writes_back_only_when_asked_and_names_a_failure(tmp_path, capsys):
    good, bad = tmp_path / "good.ipynb", tmp_path / "bad.ipynb"
    nbformat.write(_notebook("print(21 * 2)"), good)
    nbformat.write(_notebook("raise KeyError('k')"), bad)
    before = good.read_text()
    assert main(["--mode", "shipped", str(good)]) == 0
    assert good.read_text() == before
    assert main(["--mode", "shipped", "--inplace", str(good)]) == 0
    assert _text(nbformat.read(good, as_version=4).cells[1]) == "42\n"
    # the first failure stops the run, named; the next notebook is not run
    assert main(["--mode", "quick", "--inplace", str(bad), str(good)]) == 1
    out, err = capsys.readouterr()
    assert f"error: {bad} (HCCT_MODE=quick), cell 1" in err and "KeyError" in err
    assert f"executing {good}" not in out.split(f"executing {bad}")[1]
    assert main(["--mode", "quick", str(tmp_path / "nope.ipynb")]) == 1
    assert f"no such notebook: {tmp_path / 'nope.ipynb'}" in capsys.readouterr().err

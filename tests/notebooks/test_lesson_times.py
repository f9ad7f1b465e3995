"""``tools/lesson_times.py``: the per-section counts behind docs/teaching.md's plans."""

import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

from lesson_times import (  # noqa: E402
    code_lines,
    formulas,
    main,
    minutes,
    output_words,
    run_timed,
    seconds,
    sections,
    words,
)


def test_words_count_prose_and_the_symbols_of_inline_maths():
    # Two clients, D _ i (2 symbols: D, i) = 90 (1), and samples; the display formula apart
    assert words("Two clients, $D_i = 90$ and $$\\alpha / D$$ samples.") == 7
    assert words("$\\hat D_k$") == 3  # \hat, D, k
    assert formulas("a $$x$$ b $$\\frac{1}{2}$$ c $y$") == 2


def test_outputs_are_read_and_images_are_not():
    text = nbformat.v4.new_output("stream", text="K = 5 below K = 10 at 2 of 3 seeds\n")
    png = nbformat.v4.new_output("display_data", data={"image/png": "AAAA", "text/plain": "F"})
    cell = nbformat.v4.new_code_cell("print()", outputs=[text, png])
    assert output_words(cell) == 10  # K 5 below K 10 at 2 of 3 seeds


def test_code_is_read_line_by_line_but_blank_lines_and_nbval_markers_are_not():
    cell = nbformat.v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nx = 1\n\n\n# why\nprint(x)\n")
    assert code_lines(cell) == 3  # x = 1, the comment, print(x)
    assert code_lines(nbformat.v4.new_code_cell("")) == 0
    # ten lines of code are a minute of class, on top of what the rest costs
    assert minutes(0, 0, 0, 0.0, 10) == 1 and minutes(100, 0, 0, 0.0, 25) == 3.5


def test_sections_add_up_words_outputs_maths_figures_checks_code_and_seconds_per_heading():
    png = nbformat.v4.new_output("display_data", data={"image/png": "AAAA"})
    out = nbformat.v4.new_output("stream", text="one two\n")
    cells = [
        (nbformat.v4.new_markdown_cell("# Title\n\none two three"), 0.0),
        (nbformat.v4.new_markdown_cell("## First\n\nfour five $$x^2$$"), 0.0),
        (nbformat.v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nprint(1)", outputs=[out]), 2.0),
        (nbformat.v4.new_code_cell("plot()", outputs=[png]), 1.0),
        (nbformat.v4.new_markdown_cell("tail words\n\n## Second\n\nsix"), 0.0),
    ]
    rows = sections(cells)
    assert [r[0] for r in rows] == ["(opening)", "First", "Second"]
    # First four five, one two, tail words; two lines of code, the marker not one of them
    assert rows[1] == ("First", 7, 1, 1, 1, 2, 3.0)
    assert rows[2] == ("Second", 2, 0, 0, 0, 0, 0.0)
    assert minutes(300, 2, 2, 60.0) == 3 + 3 + 3 + 1


def test_a_cell_runs_for_the_seconds_its_kernel_recorded():
    cell = nbformat.v4.new_code_cell("x")
    cell.metadata["execution"] = {
        "iopub.execute_input": "2026-01-01T10:00:00.250000Z",
        "shell.execute_reply": "2026-01-01T10:00:02.000000Z",
    }
    assert seconds(cell) == 1.75
    # not run: a markdown cell, a cell of an untimed run, a cell whose run broke off
    assert seconds(nbformat.v4.new_markdown_cell("# x")) == 0.0
    assert seconds(nbformat.v4.new_code_cell("x")) == 0.0
    del cell.metadata["execution"]["shell.execute_reply"]
    assert seconds(cell) == 0.0


def test_a_notebook_is_run_in_shipped_mode_and_timed_cell_by_cell(tmp_path, capsys):
    sleep = "import os, time\ntime.sleep(0.5)\nprint(os.environ['HCCT_MODE'])"
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell("## Wait"), nbformat.v4.new_code_cell(sleep)],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}},
    )
    nbformat.write(nb, tmp_path / "x.ipynb")
    (_, zero), (code, secs) = run_timed(tmp_path / "x.ipynb")
    assert zero == 0.0 and 0.5 <= secs < 60 and code.outputs[0]["text"] == "shipped\n"
    nb.cells[1].source = "1 / 0"
    nbformat.write(nb, tmp_path / "x.ipynb")
    assert main([str(tmp_path / "x.ipynb")]) == 1
    assert "x.ipynb (HCCT_MODE=shipped), cell 1 ('1 / 0'): raised ZeroDivisionError" in (
        capsys.readouterr().err
    )


def _table(text: str, after: str) -> list:
    """The body rows of the first Markdown table after the text ``after``, as cell lists."""
    lines = text.split(after, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next(i for i in range(start, len(lines) + 1) if not lines[i:] or lines[i][:1] != "|")
    return [[c.strip() for c in row.strip("|").split("|")] for row in lines[start + 2 : end]]


def test_the_90_minute_plan_adds_up_and_leaves_at_least_ten_minutes():
    text = (Path(__file__).resolve().parents[2] / "docs" / "teaching.md").read_text()
    plan = _table(text, "### A 90-minute class")
    sections = [r for r in plan if r[1][:3] in ("01:", "02:", "03:")]
    assert len(sections) == 9
    counted = round(sum(float(r[2].split(" + ")[0]) for r in sections), 1)
    count = {r[0]: r[1] for r in _table(text, "The honest count:")}
    assert float(count["the sections above, at the counting rule"]) == counted
    parts = [float(v) for k, v in count.items() if not k.startswith("**")]
    total, spare = float(count["**total**"].strip("*")), float(count["**spare**"].strip("*"))
    assert round(sum(parts), 1) == total and round(90 - total, 1) == spare >= 10
    # the overheads the rule cannot see are in: switches, a debrief, questions, the board
    assert {"two switches of notebook", "questions"} <= set(count)
    assert any("debrief" in k for k in count) and any("on the board" in k for k in count)
    # the in-class exercise is a row of the plan, and its debrief is counted
    assert any("exercise" in r[1] and "debrief" in r[1] for r in sections)

"""``tools/lesson_times.py``: the per-section counts behind docs/teaching.md's plans."""

import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

from lesson_times import minutes, sections, words  # noqa: E402


def test_words_count_prose_and_a_maths_span_as_one():
    assert (
        words("Two clients, $D_i = 90$ and $$\\alpha / D$$ samples.") == 6
    )  # Two clients x and x samples


def test_sections_add_up_words_figures_checks_and_seconds_per_heading():
    png = nbformat.v4.new_output("display_data", data={"image/png": "AAAA"})
    cells = [
        (nbformat.v4.new_markdown_cell("# Title\n\none two three"), 0.0),
        (nbformat.v4.new_markdown_cell("## First\n\nfour five"), 0.0),
        (nbformat.v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nprint(1)"), 2.0),
        (nbformat.v4.new_code_cell("plot()", outputs=[png]), 1.0),
        (nbformat.v4.new_markdown_cell("tail words\n\n## Second\n\nsix"), 0.0),
    ]
    rows = sections(cells)
    assert [r[0] for r in rows] == ["(opening)", "First", "Second"]
    assert rows[1] == ("First", 5, 1, 1, 3.0)  # First four five, then "tail words"
    assert rows[2] == ("Second", 2, 0, 0, 0.0)
    assert minutes(300, 2, 60.0) == 3 + 3 + 1

"""Measure what each notebook section asks of a class: prose, maths, code, outputs, time.

    python tools/lesson_times.py [NOTEBOOK ...]   # default: every notebook, shipped mode

Each notebook is executed top to bottom in shipped mode (as in class) and timed cell by
cell. Per ``##`` section it prints the words of prose, the display formulas, the words of
printed output (tables and checks are read too), the figures, the checked cells, the
lines of code and the seconds its cells ran, then the class minutes they come to at a
stated rule:

- prose and printed output: 100 words a minute (projected, read and discussed); an inline
  formula counts its symbols as words (``$\\hat D_k$`` is two: a letter and a subscript);
- a display formula: 1.5 minutes (written out and explained, not read);
- a figure: 1.5 minutes;
- code: 10 lines a minute (shown, read aloud, its point said); a blank line or an nbval
  marker is no line;
- plus the run time.

``docs/teaching.md``'s plans are built from this table. They add what no notebook holds:
8 minutes for an exercise that asks for code and 4 for a short one, 3 for its debrief, 2
for each switch of notebook, time for questions, and more where a cell is read line by
line or a theorem is written on the board.
"""

from __future__ import annotations

import re
import sys
from datetime import datetime
from pathlib import Path

from notebook_exec import AS_SHOWN, NotebookError, execute_file

ROOT = Path(__file__).resolve().parents[1]
WORDS_PER_MINUTE, MINUTES_PER_FIGURE, MINUTES_PER_FORMULA = 100, 1.5, 1.5
LINES_PER_MINUTE = 10
DISPLAY = re.compile(r"\$\$.*?\$\$", re.S)
INLINE = re.compile(r"\$[^$]+\$")
SYMBOL = re.compile(r"\\[A-Za-z]+|[A-Za-z]|\d+(?:\.\d+)?")


def formulas(markdown: str) -> int:
    """Display formulas (``$$ ... $$``)."""
    return len(DISPLAY.findall(markdown))


def words(markdown: str) -> int:
    """Words of prose; an inline formula counts its symbols, a display formula nothing."""
    text = DISPLAY.sub(" ", markdown)
    symbols = sum(len(SYMBOL.findall(m)) for m in INLINE.findall(text))
    return len(re.findall(r"\w+", INLINE.sub(" ", text))) + symbols


def output_words(cell) -> int:
    """Words a class reads in a code cell's printed output (text, not images)."""
    out = 0
    for o in cell.get("outputs", []):
        text = o.get("text") or o.get("data", {}).get("text/plain", "")
        if "image/png" not in o.get("data", {}):
            out += len(re.findall(r"\w+(?:\.\d+)?", "".join(text)))
    return out


def code_lines(cell) -> int:
    """Lines of code a class reads in a code cell: not blank, not an nbval marker."""
    lines = [line.strip() for line in cell.source.splitlines()]
    return sum(bool(line) and not line.startswith("# NBVAL_") for line in lines)


def seconds(cell) -> float:
    """The seconds a cell ran: from the kernel's receiving it to its reply, as nbclient
    records them in the cell's metadata ``execution``; 0 for a cell not run (markdown)."""
    times = cell.metadata.get("execution", {})
    start, end = times.get("iopub.execute_input"), times.get("shell.execute_reply")
    if not (start and end):
        return 0.0
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def run_timed(path: Path) -> list:
    """Execute ``path`` in shipped mode (figures recorded, sliders as pictures); return the
    notebook's cells with ``seconds`` each."""
    nb = execute_file(path, mode="shipped", env=AS_SHOWN)
    return [(cell, seconds(cell)) for cell in nb.cells]


def sections(cells) -> list:
    """``(title, words, formulas, figures, checks, code, seconds)`` per ``##`` section.

    In order; ``words`` adds the prose and the printed output, ``code`` counts lines.
    """
    out = [["(opening)", 0, 0, 0, 0, 0, 0.0]]
    for cell, secs in cells:
        if cell.cell_type == "markdown":
            for part in re.split(r"^(?=## )", cell.source, flags=re.M):
                if part.startswith("## "):
                    out.append([part.splitlines()[0][3:].strip(), 0, 0, 0, 0, 0, 0.0])
                out[-1][1] += words(part)
                out[-1][2] += formulas(part)
            continue
        out[-1][1] += output_words(cell)
        out[-1][3] += sum("image/png" in o.get("data", {}) for o in cell.get("outputs", []))
        out[-1][4] += "NBVAL_CHECK_OUTPUT" in cell.source
        out[-1][5] += code_lines(cell)
        out[-1][6] += secs
    return [tuple(s) for s in out if any(s[1:6])]


def minutes(n_words: int, n_formulas: int, figures: int, seconds: float, n_code: int = 0) -> float:
    """Class minutes of a section at the rule above."""
    return (
        n_words / WORDS_PER_MINUTE
        + MINUTES_PER_FORMULA * n_formulas
        + MINUTES_PER_FIGURE * figures
        + n_code / LINES_PER_MINUTE
        + seconds / 60
    )


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    paths = [Path(a) for a in args] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    head = (
        f"  {'section':<52} {'words':>5} {'maths':>5} {'figs':>4} {'checks':>6} {'code':>4} "
        f"{'run s':>6}"
    )
    for path in paths:
        try:
            rows = sections(run_timed(path))
        except (NotebookError, ValueError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        print(f"\n{path.name}\n{head} {'min':>5}")
        for title, n_words, n_maths, figures, checks, code, secs in rows:
            print(
                f"  {title[:52]:<52} {n_words:>5} {n_maths:>5} {figures:>4} {checks:>6} "
                f"{code:>4} {secs:>6.1f} {minutes(n_words, n_maths, figures, secs, code):>5.1f}"
            )
        words_, maths, figs, checks, code, secs = [sum(r[k] for r in rows) for k in range(1, 7)]
        print(
            f"  {'total':<52} {words_:>5} {maths:>5} {figs:>4} {checks:>6} {code:>4} "
            f"{secs:>6.1f} {minutes(words_, maths, figs, secs, code):>5.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Measure what each notebook section asks of a class: words, figures, checks, run time.

    python tools/lesson_times.py [NOTEBOOK ...]   # default: every notebook, shipped mode

Each notebook is executed top to bottom in shipped mode (as in class) and timed cell by
cell. Per ``##`` section it prints the words of prose (maths counted as one word), the
figures, the checked cells and the seconds its cells ran, then the class minutes they come
to at a stated rule: ``words / 100`` (read aloud or projected and discussed), 1.5 per figure,
plus the run time. ``docs/teaching.md``'s plans are built from this table.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
WORDS_PER_MINUTE, MINUTES_PER_FIGURE = 100, 1.5


def words(markdown: str) -> int:
    """Words of prose; a maths span counts as one word."""
    return len(re.findall(r"\w+", re.sub(r"\$\$.*?\$\$|\$[^$]*\$", " x ", markdown, flags=re.S)))


def run_timed(path: Path) -> list:
    """Execute ``path`` in shipped mode; return the notebook's cells with ``seconds`` each."""
    nb = nbformat.read(path, as_version=4)
    # the inline backend records each figure as an output (Agg would record none)
    inline = "module://matplotlib_inline.backend_inline"
    os.environ.update(HCCT_MODE="shipped", MPLBACKEND=inline, HCCT_STATIC_WIDGETS="1")
    client = NotebookClient(nb, timeout=600, resources={"metadata": {"path": str(path.parent)}})
    seconds = []
    with client.setup_kernel():
        for i, cell in enumerate(nb.cells):
            start = time.perf_counter()
            client.execute_cell(cell, i)
            seconds.append(time.perf_counter() - start)
    return list(zip(nb.cells, seconds, strict=True))


def sections(cells) -> list:
    """``(title, words, figures, checks, seconds)`` per ``##`` section, in order."""
    out = [["(opening)", 0, 0, 0, 0.0]]
    for cell, secs in cells:
        if cell.cell_type == "markdown":
            for part in re.split(r"^(?=## )", cell.source, flags=re.M):
                if part.startswith("## "):
                    out.append([part.splitlines()[0][3:].strip(), 0, 0, 0, 0.0])
                out[-1][1] += words(part)
            continue
        out[-1][2] += sum("image/png" in o.get("data", {}) for o in cell.get("outputs", []))
        out[-1][3] += "NBVAL_CHECK_OUTPUT" in cell.source
        out[-1][4] += secs
    return [tuple(s) for s in out if s[1] or s[2] or s[3]]


def minutes(n_words: int, figures: int, seconds: float) -> float:
    return n_words / WORDS_PER_MINUTE + MINUTES_PER_FIGURE * figures + seconds / 60


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    paths = [Path(a) for a in args] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for path in paths:
        rows = sections(run_timed(path))
        print(f"\n{path.name}")
        print(f"  {'section':<58} {'words':>5} {'figs':>4} {'checks':>6} {'run s':>6} {'min':>5}")
        for title, n_words, figures, checks, secs in rows:
            print(f"  {title[:58]:<58} {n_words:>5} {figures:>4} {checks:>6} {secs:>6.1f} "
                  f"{minutes(n_words, figures, secs):>5.1f}")  # fmt: skip
        total = [sum(r[k] for r in rows) for k in range(1, 5)]
        print(f"  {'total':<58} {total[0]:>5} {total[1]:>4} {total[2]:>6} {total[3]:>6.1f} "
              f"{minutes(total[0], total[1], total[3]):>5.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

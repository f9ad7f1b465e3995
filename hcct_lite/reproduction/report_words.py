"""Words and lines the report's sections share: where runs come from, figures, ties."""

from __future__ import annotations

import os

from .paper_grids import grid_jobs
from .verdicts import compare, extreme

__all__ = ["source_line", "figure_link", "alone_epochs", "extreme_words"]


def source_line(out_dir: str, grid, runs) -> str:
    """``"`grid`: 45 of 45 runs, seeds 0-4, CPU."``, read from the files.

    ``grid`` may be a list of grids, with ``runs`` a dict grid -> runs: where they all have
    the same counts and seeds, one line names each grid's device and the rest once.
    """
    if isinstance(grid, str):
        grid, runs = [grid], {grid: runs}
    said = {}
    for g in grid:
        rs = runs[g]
        seeds = sorted({r["seed"] for r in rs})
        run_of = len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1))
        span = f"{seeds[0]}-{seeds[-1]}" if run_of else ", ".join(map(str, seeds)) or "-"
        devices = {str((r.get("provenance") or {}).get("device", "cpu")) for r in rs}
        where = " and ".join(sorted({"GPU" if d.startswith("cuda") else "CPU" for d in devices}))
        said[g] = (f"{len(rs)} of {len(grid_jobs([g]))} runs, seeds {span}", where)
    if len(said) > 1 and len({counts for counts, _ in said.values()}) == 1:
        names = ", ".join(f"`{g}` ({w or 'none'})" for g, (_, w) in said.items())
        return f"{names}: {next(iter(said.values()))[0]} each."
    return " ".join(
        f"`{g}`: {counts}" + (f", {w}." if w else ".") for g, (counts, w) in said.items()
    )


def figure_link(out_dir: str, name: str, alt: str) -> list:
    """A markdown image of ``figures/<name>`` (drawn by a notebook), or nothing if absent."""
    root = os.path.dirname(os.path.abspath(out_dir))
    if not os.path.exists(os.path.join(root, "figures", name)):
        return []
    return ["", f"![{alt}](../figures/{name})"]


def alone_epochs(runs) -> tuple:
    """``(epochs with every client in a group alone, epochs)`` over ``runs``."""
    epochs = [h for r in runs for h in r["history"]]
    return sum(all(len(g) == 1 for g in h["groups"]) for h in epochs), len(epochs)


def extreme_words(values: dict, noise: float, way: str, name=str) -> str:
    """``"`a`, lower than every other by the rule"`` or ``"`a`, a tie by the rule with `b` (...)"``.

    ``values``: variant -> {seed: error}; ``name`` formats a variant for the sentence. A tie
    counts the seeds at which the extreme variant is ``way``.
    """
    top, tied = extreme(values, noise, way)
    if not tied:
        return f"{name(top)}, {way} than every other by the rule"
    said = "; ".join(
        f"{name(t)} ({compare(values[top], values[t], noise).words(way)})" for t in tied
    )
    return f"{name(top)}, a tie by the rule with {said}"

"""Grids on Ray, an optional part: a grid's runs as Ray tasks, on one machine or many.

:mod:`.grid` has :class:`~hcct_lite.ray.grid.RayOptions` and the Ray start-up settings the
Flower simulation shares; :mod:`.options` adds ``--ray`` to ``compare`` and ``reproduce``.
Install it with the extra ``ray``; the core finds it through its entry point
(:mod:`hcct_lite.parts`).
"""

from __future__ import annotations

__all__ = ["register"]


def register() -> None:
    """Tell the core what this part adds (its entry point calls this)."""
    from ..parts import register as add

    add("grid-options", "ray", "hcct_lite.ray.options:GridOptions", "ray")

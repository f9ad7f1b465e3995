"""Whether another set of GPU results keeps the conclusions of the shipped one.

A faster way of computing (batched clients, other float arithmetic) may move numbers but
not conclusions. :func:`compare_sets` judges a grid set (a scratch folder of ``reproduce``)
against the shipped results, grid by grid.
"""

from __future__ import annotations

from ..lessons.shipped import scheme_claims
from ..reproduction.figure_checks import figure_claims
from ..runs.reading import by_scheme, complete_seeds, load_grid

__all__ = [
    "TABLE4_GRIDS",
    "FIGURE_GRIDS",
    "table4_spread",
    "claims_agree",
    "settings_apart",
    "compare_sets",
]

TABLE4_GRIDS = {"schemes-digit": "digit", "schemes-cifar10": "cifar10"}
FIGURE_GRIDS = ("incoming-cifar10", "alpha-cifar10", "fixed-k-digit", "k-vs-n-digit")


def table4_spread(new, ref) -> list:
    """Per scheme and protocol: the new seed mean against the reference's seed range.

    ``new``, ``ref``: lists of result dicts of one Table IV grid. Returns dicts with
    ``scheme``, ``protocol`` (final or best), ``new`` (mean over seeds), ``low`` and ``high``
    (the reference's lowest and highest seed value) and ``within``.
    """
    rows = []
    for scheme, (final, best) in by_scheme(new).items():
        ref_runs = [r for r in ref if r["scheme"] == scheme]
        values = {
            "final": [r["final"]["mean"] for r in ref_runs],
            "best": [r["final"]["best_over_epochs"]["mean"] for r in ref_runs],
        }
        for protocol, stat in (("final", final), ("best", best)):
            low, high = min(values[protocol]), max(values[protocol])
            rows.append(
                dict(
                    scheme=scheme,
                    protocol=protocol,
                    new=stat[0],
                    low=low,
                    high=high,
                    within=bool(low <= stat[0] <= high),
                )
            )
    return rows


def claims_agree(new, ref, grid: str) -> dict:
    """Claim -> (holds on ``new``, holds on ``ref``) for the claims notebook 04 checks."""
    if grid in TABLE4_GRIDS:
        check = lambda runs: scheme_claims(runs, TABLE4_GRIDS[grid])  # noqa: E731
    else:
        check = lambda runs: figure_claims(complete_seeds(runs), grid)  # noqa: E731
    a, b = check(new), check(ref)
    return {claim: (bool(a[claim]), bool(b[claim])) for claim in b}


# How a run ran, not what it computed on the grid's question: the faster paths themselves
HOW = ("device", "data_root", "download", "cuda_graphs", "batched_clients", "gpu_precision")


def settings_apart(new, ref) -> list:
    """The settings (beyond :data:`HOW`) in which some new run differs from its reference run.

    A setting a reference file lacks counts as differing: nothing is assumed of older code.
    """
    by_name = {r["name"]: r["config"] for r in ref}
    apart = set()
    for r in new:
        old = by_name[r["name"]]
        keys = (set(r["config"]) | set(old)) - set(HOW)
        apart |= {k for k in keys if k not in old or r["config"].get(k) != old[k]}
    return sorted(apart)


def compare_sets(new_dir: str, ref_dir: str = "results", grids=None) -> dict:
    """Grid -> its verdicts, the new set in ``new_dir`` against the one in ``ref_dir``.

    Each grid's ``status`` (complete, missing or ``k of n runs``). A complete grid also has
    ``settings`` (:func:`settings_apart`), ``claims`` (:func:`claims_agree`: notebook 04's
    claims) and, for a Table IV grid, ``table4`` (:func:`table4_spread`). An incomplete grid
    is judged on nothing; a reference folder without the grid is an error.
    """
    out = {}
    for grid in grids or [*TABLE4_GRIDS, *FIGURE_GRIDS]:
        new, ref = load_grid(new_dir, grid), load_grid(ref_dir, grid)
        if not ref:
            raise ValueError(f"no runs of grid {grid!r} in the reference folder {ref_dir!r}")
        names = {r["name"] for r in ref}
        have = {r["name"] for r in new} & names
        if len(have) < len(names):
            out[grid] = {"status": f"{len(have)} of {len(names)} runs" if have else "missing"}
            continue
        new = [r for r in new if r["name"] in names]
        out[grid] = {
            "status": "complete",
            "settings": settings_apart(new, ref),
            "claims": claims_agree(new, ref, grid),
        }
        if grid in TABLE4_GRIDS:
            out[grid]["table4"] = table4_spread(new, ref)
    return out

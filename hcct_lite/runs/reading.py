"""Reading stored runs back.

A grid's result files, the seeds every variant has, the per-scheme statistics and the groups
a run formed: the one way the report and the lessons read what :mod:`.runner` stored. Every
file goes through :func:`~hcct_lite.runs.store.load_result`, so a broken one is named.
"""

from __future__ import annotations

import glob
import os

import numpy as np

from ..training.config import SCHEMES
from .results import seed_stats
from .store import load_result

__all__ = [
    "read_results",
    "load_grid",
    "variant",
    "complete_seeds",
    "by_scheme",
    "epoch_groups",
    "group_labels",
]


def read_results(paths) -> list:
    """The results stored at ``paths``, in order, each checked whole.

    Raises ``ValueError`` naming a file that is not a complete, well-formed result.
    """
    return [load_result(p) for p in paths]


def load_grid(out_dir: str, grid: str) -> list:
    """Every result JSON of ``grid`` under ``out_dir``, sorted by file name.

    Raises ``ValueError`` naming a file that is not a complete, well-formed result.
    """
    out = []
    for path in sorted(glob.glob(os.path.join(out_dir, grid, "*.json"))):
        try:  # a table never mixes in a broken run
            out.append(load_result(path))
        except ValueError as err:
            raise ValueError(f"{err}; rerun its grid") from None
    return out


def variant(run: dict) -> str:
    """A run's name without its seed: ``"ratio0.1-alpha100-seed2"`` -> ``"ratio0.1-alpha100"``."""
    return run["name"].rsplit("-seed", 1)[0]


def complete_seeds(runs) -> list:
    """The runs of the seeds that every variant present has run, so means compare alike.

    A partly shipped grid (say K = 1..20 at seed 0 but only K = 1..3 at seed 1) would
    otherwise average some variants over more seeds than others. Federations of different
    sizes (``config["n_clients"]``, Fig. 6's N) are separate comparisons: each keeps the
    seeds that all of its own variants have.
    """
    by_size = {}
    for r in runs:
        by_size.setdefault(r.get("config", {}).get("n_clients"), []).append(r)
    keep = set()
    for group in by_size.values():
        seeds = {}
        for r in group:
            seeds.setdefault(variant(r), set()).add(r["seed"])
        common = set.intersection(*seeds.values())
        keep |= {id(r) for r in group if r["seed"] in common}
    return [r for r in runs if id(r) in keep]


def by_scheme(runs) -> dict:
    """``scheme -> (final (mean, std, n), best (mean, std, n))`` over seeds."""
    out = {}
    for s in SCHEMES:
        rs = [r for r in runs if r["scheme"] == s]
        if rs:
            out[s] = (
                seed_stats([r["final"]["mean"] for r in rs]),
                seed_stats([r["final"]["best_over_epochs"]["mean"] for r in rs]),
            )
    return out


def epoch_groups(runs, scheme: str = "hcct") -> dict:
    """Seed -> the groups ``scheme`` formed in each epoch (list of lists of clients, 0-based).

    ``runs`` : result dicts (any grid); runs of other schemes are skipped.
    """
    return {
        r["seed"]: [h["groups"] for h in r["history"]]
        for r in sorted(runs, key=lambda r: r["seed"])
        if r["scheme"] == scheme
    }


def group_labels(groups, n: int) -> np.ndarray:
    """One label per client (n,): the smallest member of its group (stable across epochs).

    Parameters
    ----------
    groups : list of lists of client indices (0-based); a client in no group is alone
    n : number of clients
    """
    labels = np.arange(n)
    for g in groups:
        members = sorted(int(i) for i in g)
        if members and (members[0] < 0 or members[-1] >= n):
            raise ValueError(f"group {members} names a client outside 0..{n - 1}")
        labels[members] = members[0] if members else 0
    return labels

"""The paper's motivating example (Section III-B, Table 1).

Three CIFAR-10 clients and every way they can collaborate.
"""

from __future__ import annotations

import os

import numpy as np

from ..training.config import make_config
from ..training.engine import run_experiment
from .paper import TABLE1
from .results import write_json

__all__ = ["PATTERNS", "run_patterns", "pattern_means", "table1"]

# pattern -> (scheme, partition); clients are numbered from 1 in the paper, from 0 here.
PATTERNS = {
    "independent": ("independent", None),
    "global": ("global", None),
    "(1,2)": ("fixed", [[0, 1], [2]]),
    "(1,3)": ("fixed", [[0, 2], [1]]),
    "(2,3)": ("fixed", [[0], [1, 2]]),
}


def run_patterns(seeds=(0,), out_dir=None, progress=False, log=print, **overrides) -> dict:
    """Train the motivating example under each pattern of :data:`PATTERNS`.

    With ``out_dir``, each run's JSON is written there (atomically) and reused if present.

    Returns
    -------
    dict pattern -> list of result dicts (one per seed)
    """
    import json

    out = {}
    for name, (scheme, partition) in PATTERNS.items():
        out[name] = []
        for seed in seeds:
            path = None
            if out_dir:
                tag = name.strip("()").replace(",", "-")
                path = os.path.join(out_dir, f"motivating__{tag}__seed{seed}.json")
                if os.path.exists(path):
                    with open(path) as f:
                        out[name].append(json.load(f))
                    continue
            cfg = make_config("motivating", scheme, seed, partition=partition, **overrides)
            r = run_experiment(cfg, progress=progress)
            if path:
                write_json(path, r)
            if log:
                log(
                    f"{name:<12} seed {seed}: client errors "
                    f"{np.round(r['final']['client_test_error'], 2).tolist()}"
                )
            out[name].append(r)
    return out


def pattern_means(results: dict) -> dict:
    """Pattern -> (3,) each client's final test error, averaged over seeds."""
    return {
        k: np.mean([r["final"]["client_test_error"] for r in rs], axis=0)
        for k, rs in results.items()
    }


def table1(results: dict):
    """Table 1's layout, ours beside the paper's: returns ``(header, rows)``."""
    header = [
        "pattern",
        "client 1",
        "client 2",
        "client 3",
        "mean",
        "std",
        "paper mean",
        "paper std",
    ]
    rows = []
    for name, rs in results.items():
        errs = np.array([r["final"]["client_test_error"] for r in rs])  # (seeds, 3)
        per_client = [f"{m:.2f} ± {s:.2f}" for m, s in zip(errs.mean(0), errs.std(0), strict=True)]
        means = errs.mean(0)
        ref = TABLE1.get(name, {})
        rows.append(
            [
                name,
                *per_client,
                f"{means.mean():.2f}",
                f"{means.std():.2f}",
                f"{ref.get('mean', float('nan')):.2f}",
                f"{ref.get('std', float('nan')):.2f}",
            ]
        )
    return header, rows

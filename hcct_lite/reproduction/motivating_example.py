"""The paper's motivating example (Table II): three CIFAR-10 clients, every way to collaborate."""

from __future__ import annotations

import numpy as np

from ..runs.jobs import Job, job_path
from ..runs.reading import read_results
from ..runs.runner import run_jobs
from .paper import TABLE_II

__all__ = [
    "PATTERNS",
    "run_patterns",
    "pattern_means",
    "pattern_stds",
    "motivating_table",
    "alone_in",
    "pattern_claims",
    "pattern_ranking",
    "selfish_choices",
    "shipped_differences",
]

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

    With ``out_dir``, each run's JSON is written there (atomically) and reused if present
    (:func:`~hcct_lite.runs.runner.run_jobs`); without, the runs go to a temporary
    folder. Runs use one torch thread, as a grid's do, so the results equal the shipped
    grid's.

    Returns
    -------
    dict pattern -> list of result dicts (one per seed)
    """
    import tempfile

    jobs = {
        (name, seed): Job(
            "",
            f"motivating__{name.strip('()').replace(',', '-')}__seed{seed}",
            "motivating",
            scheme,
            seed,
            dict(overrides, partition=partition),
        )
        for name, (scheme, partition) in PATTERNS.items()
        for seed in seeds
    }
    with tempfile.TemporaryDirectory() as tmp:
        folder = out_dir or tmp
        run_jobs(list(jobs.values()), folder, log=None, progress=progress)
        out = {name: [] for name in PATTERNS}
        for (name, seed), job in jobs.items():
            (r,) = read_results([job_path(folder, job)])
            out[name].append(r)
            if log:
                errors = np.round(r["final"]["client_test_error"], 2).tolist()
                log(f"{name:<12} seed {seed}: client errors {errors}")
    return out


def pattern_stds(results: dict) -> dict:
    """Pattern -> (3,) each client's final test error's std over seeds."""
    return {
        k: np.std([r["final"]["client_test_error"] for r in rs], axis=0)
        for k, rs in results.items()
    }


def pattern_means(results: dict) -> dict:
    """Pattern -> (3,) each client's final test error, averaged over seeds."""
    return {
        k: np.mean([r["final"]["client_test_error"] for r in rs], axis=0)
        for k, rs in results.items()
    }


def motivating_table(results: dict):
    """Table II's layout, ours beside the paper's: returns ``(header, rows)``."""
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
        ref = TABLE_II.get(name, {})
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


def alone_in(pattern: str) -> set:
    """Clients (0-based) that train alone under ``pattern``."""
    scheme, partition = PATTERNS[pattern]
    if scheme == "independent":
        return {0, 1, 2}
    if scheme == "global":
        return set()
    return {g[0] for g in partition if len(g) == 1}


def pattern_ranking(means: dict) -> list:
    """Patterns from the lowest mean error to the highest; ``means`` as :func:`pattern_means`."""
    return sorted(means, key=lambda k: float(np.mean(means[k])))


def selfish_choices(results: dict, tol: float = 1e-9) -> dict:
    """Client (1-based) -> the patterns that give it its lowest seed-mean error.

    Ties are kept (within ``tol`` points): a client alone in two patterns gets the same
    error in both, so a selfish client is indifferent between them.
    """
    m = pattern_means(results)
    out = {}
    for c in range(3):
        low = min(float(v[c]) for v in m.values())
        out[c + 1] = [k for k, v in m.items() if float(v[c]) <= low + tol]
    return out


def pattern_claims(results: dict) -> dict:
    """The notebook's claims about Table II, each evaluated on ``results``.

    Parameters
    ----------
    results : dict pattern -> list of result dicts, every pattern over the same seeds

    Returns
    -------
    dict claim (str) -> bool
    """
    m = pattern_means(results)  # pattern -> (3,) per-client error
    mean = {k: float(v.mean()) for k, v in m.items()}
    by_seed = {k: [r["final"]["client_test_error"] for r in rs] for k, rs in results.items()}
    same_alone = all(
        np.allclose(np.array(by_seed[k])[:, c], np.array(by_seed["independent"])[:, c])
        for k in PATTERNS
        for c in alone_in(k)
    )
    paper = pattern_ranking({k: v["mean"] for k, v in TABLE_II.items()})
    return {
        "the best two patterns are the paper's, in its order: (1,2), then independent": (
            pattern_ranking(m)[:2] == paper[:2] == ["(1,2)", "independent"]
        ),
        "client 1's error is lowest under (1,2)": min(m, key=lambda k: m[k][0]) == "(1,2)",
        "(1,3) is client 1's worst pattern": max(m, key=lambda k: m[k][0]) == "(1,3)",
        "client 2 is no better off in (1,2) than alone": bool(m["(1,2)"][1] >= m["independent"][1]),
        "global has a higher mean error than independent": mean["global"] > mean["independent"],
        "a client that trains alone gets the same error in every pattern": bool(same_alone),
    }


def shipped_differences(results: dict) -> dict:
    """Where the shipped CIFAR-10 runs differ from the paper's Table II: claim -> bool.

    ``results`` are the shipped runs (:func:`~hcct_lite.lessons.shipped.motivating_results`
    in shipped mode).
    """
    m = pattern_means(results)
    ours, paper = pattern_ranking(m), pattern_ranking({k: v["mean"] for k, v in TABLE_II.items()})
    client2 = np.array([r["final"]["client_test_error"][1] for r in results["independent"]])
    loss = float(m["(1,2)"][1] - m["independent"][1])
    return {
        "every client's error is above the paper's, in every pattern": all(
            m[k][c] > TABLE_II[k]["clients"][c][0] for k in TABLE_II for c in range(3)
        ),
        "the bottom three patterns rank in another order than the paper's": ours[2:] != paper[2:],
        f"client 2 is {loss:.1f} points worse in (1,2) than alone, less than the std of its "
        "error alone over seeds": bool(0 < loss < client2.std()),
    }

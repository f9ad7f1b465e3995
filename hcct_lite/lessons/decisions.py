"""HCCT's decisions on shipped runs: which groups it formed, epoch by epoch, and how stable.

Each run's history stores every epoch's groups, so no retraining is needed:
:func:`decision_runs` loads one HCCT run per task, and :func:`truth_agreement` and
:func:`consecutive_agreement` score partitions with the adjusted Rand index.
"""

from __future__ import annotations

import numpy as np

from ..runs.reading import epoch_groups, group_labels, load_grid
from .modes import results_dir

__all__ = [
    "DECISION_GRIDS",
    "numbered",
    "truth_agreement",
    "consecutive_agreement",
    "decision_runs",
    "decision_claims",
]


def numbered(groups) -> list:
    """``groups`` of 0-based client indices as the notebooks name clients, counted from 1.

    >>> numbered([[0, 2], [1]])
    [[1, 3], [2]]
    """
    return [[int(i) + 1 for i in g] for g in groups]


# grid -> the task's name in figures; the grids whose HCCT runs the timeline figure shows
DECISION_GRIDS = {
    "motivating": "motivating example (CIFAR-10)",
    "schemes-rotated-digits": "rotated digits",
    "schemes-fmnist": "FMNIST",
    "schemes-cifar10": "CIFAR-10",
}


def truth_agreement(epochs, truth) -> np.ndarray:
    """Adjusted Rand index of each epoch's partition against the true clusters, (T,).

    Parameters
    ----------
    epochs : list of T partitions (each a list of groups)
    truth : (N,) the true cluster of each client (e.g. its rotation)
    """
    from sklearn.metrics import adjusted_rand_score

    truth = np.asarray(truth)
    return np.array([adjusted_rand_score(truth, group_labels(g, truth.size)) for g in epochs])


def consecutive_agreement(epochs, n: int) -> np.ndarray:
    """Adjusted Rand index of each partition with the previous epoch's, (T - 1,).

    Identical partitions score 1.0, all-singleton ones included.
    """
    from sklearn.metrics import adjusted_rand_score

    labels = [group_labels(g, n) for g in epochs]
    return np.array(
        [adjusted_rand_score(a, b) for a, b in zip(labels[:-1], labels[1:], strict=True)]
    )


def decision_runs(seed: int = 0, scheme: str = "hcct", grids: dict | None = None) -> dict:
    """One shipped run per grid of :data:`DECISION_GRIDS`: grid -> result dict.

    ``grids`` (grid -> its runs) reuses runs already read; the others are read from
    ``results/``. Raises FileNotFoundError naming the grid whose ``scheme`` run of ``seed``
    is not shipped.
    """
    grids = grids or {}
    out = {}
    for grid in DECISION_GRIDS:
        runs = grids[grid] if grid in grids else _grid(grid)
        pick = [r for r in runs if r["scheme"] == scheme and r["seed"] == seed]
        if not pick:
            raise FileNotFoundError(f"no shipped {scheme} run of seed {seed} in results/{grid}")
        out[grid] = pick[0]
    return out


def _grid(grid: str) -> list:
    return load_grid(str(results_dir()), grid)


def _all_alone(run) -> bool:
    """Whether every client of ``run`` trained alone in every epoch."""
    return all(len(h["groups"]) == len(run["sizes"]) for h in run["history"])


def decision_claims() -> dict:
    """What the shipped HCCT runs decided, as checked claims: claim (str) -> bool.

    FMNIST: how many groups HCCT keeps after the first epoch, over every seed; Digit: every
    client alone, and how far the (GPU, not bit-reproducible) final errors still drift from
    Independent's; seed 0 of rotated digits, FMNIST and CIFAR-10 as in the timeline figure.
    """
    fmnist = _grid("schemes-fmnist")  # read once: every seed here, seed 0 below
    counts = np.array([len(g) for s in epoch_groups(fmnist).values() for g in s[1:]])
    digit = _grid("schemes-digit")
    alone = all(_all_alone(r) for r in digit if r["scheme"] == "hcct")
    final = {(r["scheme"], r["seed"]): np.array(r["final"]["client_test_error"]) for r in digit}
    seeds = [s for scheme, s in final if scheme == "hcct" and ("independent", s) in final]
    gap = max(np.abs(final["hcct", s] - final["independent", s]).max() for s in seeds)
    runs = decision_runs(seed=0, grids={"schemes-fmnist": fmnist})
    epochs = {g: [h["groups"] for h in r["history"]] for g, r in runs.items()}
    rotations = np.unique(runs["schemes-rotated-digits"]["domains"], return_inverse=True)[1]
    pairs = truth_agreement(epochs["schemes-rotated-digits"][1:], rotations) == 1
    return {
        "FMNIST: HCCT keeps 4 to 7 groups in over 75 % of epochs after the first": bool(
            np.mean((counts >= 4) & (counts <= 7)) > 0.75
        ),
        "FMNIST: HCCT forms one group in under 5 % of those epochs": bool(
            np.mean(counts == 1) < 0.05
        ),
        "Digit: HCCT keeps every client alone in every epoch of every seed": alone,
        f"Digit: a client's final error still differs from Independent's by up to {gap:.1f} "
        "points (GPU runs)": bool(gap > 0),
        "rotated digits: the four rotation pairs in over 90 % of epochs after the first": bool(
            pairs.mean() > 0.9
        ),
        "FMNIST: consecutive partitions agree little (mean adjusted Rand below 0.3)": bool(
            consecutive_agreement(
                epochs["schemes-fmnist"][1:], len(runs["schemes-fmnist"]["sizes"])
            ).mean()
            < 0.3
        ),
        "CIFAR-10: every client alone in every epoch": _all_alone(runs["schemes-cifar10"]),
    }

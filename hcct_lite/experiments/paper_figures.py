"""The paper's studies of Section VII-C/D (Figs. 4-7) and the batch-norm buffer ablation.

Each function runs a small family of experiments through the one training loop and
returns plain numbers for a figure.
"""

from __future__ import annotations

import numpy as np

from ..training.config import make_config
from ..training.engine import run_experiment

__all__ = ["incoming_curves", "alpha_ratio_grid", "fixed_k_curve", "buffers_ablation"]


def _mean_over_seeds(task, scheme, seeds, **kw):
    runs = [run_experiment(make_config(task, scheme, s, **kw), progress=False) for s in seeds]
    return runs, float(np.mean([r["final"]["mean"] for r in runs]))


def incoming_curves(
    task, new_per_arrival=(0, 1, 2), initial=10, seed=0, scheme="hcct", join_every=10, **settings
) -> dict:
    """Fig.

    4: mean test error per epoch when ``n`` new clients join every ``join_every`` epochs, starting
    from ``initial`` clients. Returns ``label -> (epochs,) errors``.

    Every run builds the same federation (sized for the largest ``n``), so the first
    ``initial`` clients hold the same data in every curve; clients that do not arrive
    within the run never take part.
    """
    epochs = make_config(task, scheme, seed, **settings).epochs
    arrivals = (epochs - 1) // join_every
    total = initial + max(new_per_arrival) * arrivals
    curves = {}
    for n_new in new_per_arrival:
        kw = dict(
            settings,
            n_clients=total,
            join_every=join_every,
            initial_clients=initial,
            new_clients=n_new,
        )
        r = run_experiment(make_config(task, scheme, seed, **kw), progress=False)
        curves[f"{n_new} new per {join_every} epochs"] = [
            h["mean_test_error"] for h in r["history"]
        ]
    return curves


def alpha_ratio_grid(task, alphas, ratios, seeds=(0,), scheme="hcct", **settings) -> dict:
    """Fig. 5: final mean test error for each (train ratio, alpha), averaged over seeds."""
    return {
        (ratio, alpha): _mean_over_seeds(
            task, scheme, seeds, alpha=alpha, train_ratio=ratio, **settings
        )[1]
        for ratio in ratios
        for alpha in alphas
    }


def fixed_k_curve(task, ks, seeds=(0,), scheme="hcct", **settings):
    """Figs. 6/7: final mean test error and total utility (last partition) for each fixed K.

    Returns ``(errors, utilities)``, each a list aligned with ``ks``.
    """
    errors, utilities = [], []
    for k in ks:
        runs, err = _mean_over_seeds(task, scheme, seeds, fixed_groups=k, **settings)
        errors.append(err)
        utilities.append(
            float(
                np.mean(
                    [
                        [h["total_utility"] for h in r["history"] if "total_utility" in h][-1]
                        for r in runs
                    ]
                )
            )
        )
    return errors, utilities


def buffers_ablation(task="digit", seed=0, scheme="hcct", epoch=1, **settings) -> dict:
    """Compare updates over trainable parameters with updates over every state entry.

    Trainable parameters are the paper's definition; every state entry, batch-norm
    buffers included, the authors' code's. For each: the update cosines at ``epoch``, the
    groups of the last epoch, and the final mean test error.

    Returns ``{"parameters": {...}, "with buffers": {...}}``, each with ``cosines`` (N, N),
    ``groups``, ``n_groups_per_epoch`` and ``mean_error``.
    """
    out = {}
    for label, flag in (("parameters", False), ("with buffers", True)):
        cfg = make_config(
            task, scheme, seed, update_includes_buffers=flag, record_cosines=True, **settings
        )
        r = run_experiment(cfg, progress=False)
        h = r["history"][min(epoch, len(r["history"]) - 1)]
        out[label] = {
            "cosines": np.array(h["update_cosines"]),
            "groups": r["history"][-1]["groups"],
            "n_groups_per_epoch": [x["n_groups"] for x in r["history"]],
            "mean_error": r["final"]["mean"],
            "domains": r["domains"],
        }
    return out

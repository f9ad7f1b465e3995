"""The paper's Figs. 3-6 read from run files: per-cell statistics and checked claims.

The notebooks print each claim True or False on the runs given. In a partly shipped fixed-K
grid, only the federation sizes N that have every planned K are judged.
"""

from __future__ import annotations

import numpy as np

from .paper_grids import grid_jobs
from .verdicts import compare, extreme, noise_of, per_seed

__all__ = [
    "incoming_curves",
    "fig4_incumbents",
    "alpha_ratio_errors",
    "alpha_ratio_stats",
    "final_against_lowest",
    "fixed_k_summary",
    "final_utility",
    "fixed_k_std",
    "paired_wins",
    "planned_ks",
    "complete_sizes",
    "limited_beats_global",
    "limited_k_margins",
    "seeds_by_size",
    "figure_claims",
]


def incoming_curves(runs) -> dict:
    """Fig. 3 from run files: ``"<n> new per <k> epochs" -> (epochs,)`` seed-mean error."""
    by = {}
    for r in runs:
        c = r["config"]
        key = f"{c['new_clients']} new per {c['join_every']} epochs"
        by.setdefault(key, []).append([h["mean_test_error"] for h in r["history"]])
    return {k: np.mean(v, axis=0).tolist() for k, v in sorted(by.items())}


def fig4_incumbents(runs) -> dict:
    """Fig. 3: ``new clients per period -> mean error`` of the initial clients, over seeds."""
    by = {}
    for r in runs:
        n0 = r["config"]["initial_clients"]
        errs = r["history"][-1]["client_test_error"][:n0]
        by.setdefault(r["config"]["new_clients"], []).append(np.mean(errs))
    return {k: float(np.mean(v)) for k, v in sorted(by.items())}


def alpha_ratio_stats(runs) -> dict:
    """Fig. 4 per cell: ``(train_ratio, alpha) -> (4,)`` array over seeds.

    The four numbers are the final-epoch mean error's mean and std over seeds, then the
    best-epoch mean error's (the paper's protocol) mean and std; cells sorted.
    """
    by = {}
    for r in runs:
        c, f = r["config"], r["final"]
        by.setdefault((c["train_ratio"], c["alpha"]), []).append(
            (f["mean"], f["best_over_epochs"]["mean"])
        )
    out = {}
    for key, values in sorted(by.items()):
        v = np.asarray(values, dtype=float)
        out[key] = np.array([v[:, 0].mean(), v[:, 0].std(), v[:, 1].mean(), v[:, 1].std()])
    return out


def final_against_lowest(runs, ratio: float) -> tuple:
    """Fig. 4 at ``ratio``, final epoch, by the rule: ``(lowest, {alpha: Comparison})``.

    ``lowest`` is the alpha of lowest seed-mean final error; each other alpha (A) is
    compared with it, seed by seed, against the runs' noise bound.
    """
    cells = {}
    for r in runs:
        if r["config"]["train_ratio"] == ratio:
            cells.setdefault(r["config"]["alpha"], []).append(r)
    if not cells:
        return None, {}
    values, noise = {a: per_seed(rs) for a, rs in cells.items()}, noise_of(runs)
    low, _ = extreme(values, noise, "lower")
    return low, {a: compare(v, values[low], noise) for a, v in values.items() if a != low}


def alpha_ratio_errors(runs) -> dict:
    """Fig. 4 from run files: ``(train_ratio, alpha) -> final mean error`` over seeds."""
    by = {}
    for r in runs:
        c = r["config"]
        by.setdefault((c["train_ratio"], c["alpha"]), []).append(r["final"]["mean"])
    return {k: float(np.mean(v)) for k, v in sorted(by.items())}


def _by_size_and_k(runs, value) -> dict:
    """``N -> K -> [value(run), ...]`` over the runs of a fixed-K grid."""
    by = {}
    for r in runs:
        c = r["config"]
        by.setdefault(c["n_clients"], {}).setdefault(c["fixed_groups"], []).append(value(r))
    return by


def final_utility(r) -> float:
    """A run's total utility at the last epoch that recorded one."""
    return [h["total_utility"] for h in r["history"] if "total_utility" in h][-1]


def fixed_k_summary(runs) -> dict:
    """Figs. 5/6 from run files: ``N -> (ks, errors, utilities)``, seed means, K ascending."""
    by = _by_size_and_k(runs, lambda r: (r["final"]["mean"], final_utility(r)))
    out = {}
    for n, ks in sorted(by.items()):
        order = sorted(ks)
        means = [np.mean(ks[k], axis=0) for k in order]
        out[n] = (order, [float(m[0]) for m in means], [float(m[1]) for m in means])
    return out


def fixed_k_std(runs) -> dict:
    """Figs. 5/6: ``N -> (ks, stds)``, the std over seeds of each K's final mean error."""
    by = _by_size_and_k(runs, lambda r: r["final"]["mean"])
    return {
        n: (sorted(ks), [float(np.std(ks[k])) for k in sorted(ks)]) for n, ks in sorted(by.items())
    }


def paired_wins(runs, n: int, k: int, against: int) -> tuple:
    """``(wins, seeds)``: at how many seeds K = ``k`` ends below K = ``against`` at size ``n``.

    A seed gives every K the same clients and initial model, so this is a paired
    comparison; ``seeds`` counts the seeds that ran both.
    """
    per_seed = {}
    for r in runs:
        c = r["config"]
        if c["n_clients"] == n and c["fixed_groups"] in (k, against):
            per_seed.setdefault(r["seed"], {})[c["fixed_groups"]] = r["final"]["mean"]
    pairs = [v for v in per_seed.values() if len(v) == 2]
    return sum(v[k] < v[against] for v in pairs), len(pairs)


def seeds_by_size(runs) -> dict:
    """``N -> sorted seeds`` of the runs of each federation size N (Figs. 5/6)."""
    out = {}
    for r in runs:
        out.setdefault(r["config"]["n_clients"], set()).add(r["seed"])
    return {n: sorted(s) for n, s in sorted(out.items())}


def planned_ks(grid: str) -> dict:
    """``N -> sorted K`` that the paper grid ``grid`` (a fixed-K grid) runs."""
    out = {}
    for job in grid_jobs([grid]):
        kw = job.overrides
        out.setdefault(kw["n_clients"], set()).add(kw["fixed_groups"])
    return {n: sorted(ks) for n, ks in sorted(out.items())}


def complete_sizes(summary: dict, grid: str) -> list:
    """The N of ``summary`` (from :func:`fixed_k_summary`) that have every K ``grid`` plans."""
    plan = planned_ks(grid)
    return [n for n, (ks, _, _) in summary.items() if list(ks) == plan.get(n)]


def limited_beats_global(summary: dict, grid: str = "k-vs-n-digit") -> dict:
    """``N -> bool``: whether some 1 < K < N beats K = 1 (one global model), for complete N.

    ``summary`` as from :func:`fixed_k_summary`; only the N with every K ``grid`` plans.
    """
    out = {}
    for n in complete_sizes(summary, grid):
        ks, errors, _ = summary[n]
        limited = [e for k, e in zip(ks, errors, strict=True) if 1 < k < ks[-1]]
        out[n] = bool(min(limited) < errors[0])
    return out


def limited_k_margins(runs, grid: str = "k-vs-n-digit") -> dict:
    """Seed by seed, how the best limited K does against one global model, per complete N.

    Returns ``N -> (k, gain, wins, seeds)``: the 1 < K < N with the lowest seed-mean error,
    its seed-mean gain over K = 1 in points (positive: lower error), and at how many of the
    ``seeds`` it has the lower error. Each seed gives every K the same clients and initial
    model, so the per-seed comparison is paired. ``runs`` hold the seeds every K of an N
    has (:func:`~hcct_lite.reproduction.report_tables.complete_seeds`).
    """
    summary = fixed_k_summary(runs)
    out = {}
    for n in complete_sizes(summary, grid):
        ks, errors, _ = summary[n]
        limited = [(e, k) for k, e in zip(ks, errors, strict=True) if 1 < k < ks[-1]]
        k = min(limited)[1]
        out[n] = (k, errors[0] - min(limited)[0], *paired_wins(runs, n, k, 1))
    return out


def _alpha_claims(runs) -> dict:
    stats = alpha_ratio_stats(runs)
    ratios = sorted({r for r, _ in stats})

    def best(r):  # the alpha with the lowest best-epoch error at ratio r
        return min((v[2], a) for (q, a), v in stats.items() if q == r)[1]

    def small_alphas_close(r):  # best-epoch spread of alpha <= 100 below every seed std
        cells = [v for (q, a), v in stats.items() if q == r and a <= 100]
        return np.ptp([v[2] for v in cells]) < min(v[3] for v in cells)

    def large_alphas_higher(r):  # final epoch: each alpha >= 100 above the lowest, by the rule
        low, against = final_against_lowest(runs, r)
        return low < 100 and all(c.outcome == "higher" for a, c in against.items() if a >= 100)

    little, more = [r for r in ratios if r <= 0.1], [r for r in ratios if r >= 0.2]
    return {
        "Fig. 4: final epoch, by the rule: every alpha >= 100 ends above the lowest alpha, at "
        "every train ratio": bool(ratios) and all(large_alphas_higher(r) for r in ratios),
        "Fig. 4: alpha = 100 is best at little data (the paper; best epoch, ratio <= 0.1)": bool(
            little
        )
        and all(best(r) == 100 for r in little),
        "Fig. 4: with more data an alpha below 100 is best (the paper; best epoch, ratio >= 0.2)": (
            bool(more) and all(best(r) < 100 for r in more)
        ),
        "Fig. 4: best epoch: alphas 0.1 to 100 differ by less than the seed std at every ratio": (
            bool(ratios) and all(small_alphas_close(r) for r in ratios)
        ),
    }


def _fixed_k_claims(runs) -> dict:
    ((n, (ks, errors, utilities)),) = fixed_k_summary(runs).items()
    k_best = ks[int(np.argmin(errors))]
    wins_10, seeds_10 = paired_wins(runs, n, k_best, 10)
    return {
        "Fig. 5: some 1 < K < N beats both K = 1 and K = N": 1 < k_best < ks[-1],
        "Fig. 5: the lowest error is at K = 10 (the paper)": k_best == 10,
        "Fig. 5: the total utility rises with K, to its highest at K = N": bool(
            np.all(np.diff(utilities) > 0) and ks[-1] == n
        ),
        "Fig. 5: the lowest error is at a small K (at most N/4), not at maximum utility": (
            k_best <= n / 4 and k_best != ks[int(np.argmax(utilities))]
        ),
        "Fig. 5: that K beats the paper's K = 10 at every seed": k_best != 10
        and wins_10 == seeds_10 > 0,
    }


def _k_vs_n_claims(runs) -> dict:
    summary = fixed_k_summary(runs)
    beats = limited_beats_global(summary)
    done = [summary[n] for n in beats]
    margins = limited_k_margins(runs)
    small = min(margins, default=None)
    return {
        "Fig. 6: at every complete N some 1 < K < N beats K = 1 on the seed mean (the paper)": (
            bool(done) and all(beats.values())
        ),
        "Fig. 6: at every complete N, K = N (every client alone) has the highest error": bool(done)
        and all(int(np.argmax(errs)) == len(ks) - 1 for ks, errs, _ in done),
        "Fig. 6: the best limited K beats K = 1 at only some seeds at the smallest complete N, "
        "at every seed at each larger N": small is not None
        and 0 < margins[small][2] < margins[small][3]
        and all(w == s for n, (_, _, w, s) in margins.items() if n != small),
    }


def figure_claims(runs, grid: str) -> dict:
    """The notebook's claims about one figure grid of the paper, each True or False.

    Parameters
    ----------
    runs : list of result dicts of ``grid`` (seeds as in
        :func:`~hcct_lite.reproduction.report_tables.complete_seeds`)
    grid : ``"incoming-cifar10"``, ``"alpha-cifar10"``, ``"fixed-k-digit"`` or
        ``"k-vs-n-digit"`` (judged on the N that have every planned K)
    """
    if grid == "incoming-cifar10":
        finals = [curve[-1] for _, curve in sorted(incoming_curves(runs).items())]
        spread = np.ptp(list(fig4_incumbents(runs).values()))
        return {
            "Fig. 3: more arrivals end lower (the paper)": bool(np.all(np.diff(finals) < 0)),
            "Fig. 3: the first clients end within 1 point whatever the arrivals": bool(spread < 1),
        }
    if grid == "alpha-cifar10":
        return _alpha_claims(runs)
    if grid == "fixed-k-digit":
        return _fixed_k_claims(runs)
    if grid == "k-vs-n-digit":
        return _k_vs_n_claims(runs)
    raise ValueError(f"no claims for grid {grid!r}")

"""The notebooks' checkable exercises: what each asks, its right answer, its hints.

Each reference computes the right answer from the objects the notebook passes (its
``updates``, ``sizes``, ``results``, ...) or from the library alone, so it follows the
notebook's mode. Hints teach the method; none states the answer.
"""

from __future__ import annotations

import numpy as np

from ..partition import client_partition, optimal_partition
from ..partition.merge_steps import benefit_parts, break_even_alpha, merge_steps
from ..partition.synthetic import clustered_updates
from ..reproduction.motivating_example import selfish_choices
from ..theory import alpha_equivalent, join_gain, learning_rate_sum
from .checks import Exercise, feedback
from .decisions import truth_agreement
from .misleads import break_even_grid

__all__ = ["EXERCISES", "check"]


def _changed(sizes, client, samples):
    out = np.array(sizes).copy()
    out[client] = samples
    return out


def _first_paying(own, divergence, start=1):
    return next(d for d in range(start, 1_000_000) if join_gain(own, d, divergence) > 0)


def _one_group_from(updates, sizes, low=10.0, high=10_000.0):
    while high / low > 1.001:  # bisection: the number of groups never grows with alpha
        mid = (low * high) ** 0.5
        one = client_partition(updates, sizes, alpha=mid).n_groups == 1
        low, high = (low, mid) if one else (mid, high)
    return high


def _pair_order(updates, sizes):
    swapped = np.asarray(sizes)[[1, 0, 2]]
    pairs = [(0, 1), (0, 2), (1, 2)]
    alphas = {p: -np.divide(*benefit_parts(updates, swapped, [p[0]], [p[1]])) for p in pairs}
    return [f"({i + 1},{j + 1})" for i, j in sorted(pairs, key=alphas.get)]


def _first_merge(updates, sizes):
    step = merge_steps(updates, sizes, alpha=100.0)[0]
    return sorted(step.groups[k][0] for k in step.chosen)


def _recovers(partition, truth) -> bool:
    """Whether ``partition`` is exactly the true clusters (adjusted Rand index 1)."""
    return bool(truth_agreement([partition.groups], truth)[0] == 1.0)


def _noisy_recovered():
    u, d, truth = clustered_updates([3, 3, 2], dim=2000, noise=1.5, seed=0)
    return _recovers(client_partition(u, d, alpha=100.0), truth)


def _who_recovers():
    u, d, truth = clustered_updates([3, 3, 2], dim=2000, noise=1.5, seed=3)
    greedy = _recovers(client_partition(u, d, alpha=100.0), truth)
    optimum = _recovers(optimal_partition(u, d, alpha=100.0), truth)
    return {(True, True): "both", (False, False): "neither"}.get(
        (greedy, optimum), "greedy" if greedy else "optimum"
    )


def _fmnist_best():
    from ..runs.reading import by_scheme
    from .modes import Mode
    from .shipped import scheme_runs

    final = {s: v[0][0] for s, v in by_scheme(scheme_runs(Mode("shipped"), "fmnist")).items()}
    return min(final, key=final.get)


def _fig5_top_utility():
    from ..reproduction.figure_checks import fixed_k_summary
    from .modes import Mode
    from .shipped import grid_runs

    ks, _, utilities = fixed_k_summary(grid_runs(Mode("shipped"), "fixed-k-digit"))[20]
    return ks[int(np.argmax(utilities))]


def _protocol_gain(runs):
    from ..runs.reading import by_scheme

    final, best = by_scheme(runs["fmnist"])["hcct"]
    return final[0] - best[0]


def _best_digit_scheme(runs):
    from .shipped import best_epoch_means

    means = best_epoch_means(runs["digit"])
    return min(means, key=means.get)


def _pairs_above(ablation, threshold=0.9):
    out = []
    for label in ("buffers", "parameters"):
        cos = np.asarray(ablation[label]["cosines"])
        out.append(int((cos[np.triu_indices(len(cos), 1)] > threshold).sum()))
    return out


def _lowest_across(ablation):
    cos, rot = (
        np.asarray(ablation["buffers"]["cosines"]),
        np.asarray(ablation["buffers"]["domains"]),
    )
    return float(cos[rot[:, None] != rot[None, :]].min())


def _merge_cosine(samples=112, alpha=50.0):
    fine = np.linspace(0.0, 1.0, 10_001)
    return float(fine[np.argmax(break_even_grid([samples], fine)[0] < alpha)])


def _pooled_alpha(alphas):
    return min(alphas, key=lambda a: np.mean([alphas[a]["errors"][s] for s in (0, 1)]))


def _designer_pairs():
    from .designer import PRESETS, Designer

    designer, (silos, _) = Designer(seed=0), PRESETS["alpha's scale"]
    grid = np.arange(1.0, 20.01, 0.5)
    return float(next(a for a in grid if designer.picture(silos, a)["partition"].n_groups == 2))


_UNIT = np.array([[1.0, 0.0], [0.6, 0.8]])  # two updates of equal norm, cosine 0.6

_LIST = [
    Exercise("01.1", "your alpha (a number)", needs=("updates", "sizes"), wrong=-1.0,
             reference=lambda updates, sizes: break_even_alpha(
                 updates, _changed(sizes, 0, 180), [0], [1]),
             hint="Copy sizes, set its first entry to 180, and pass the copy to "
                  "break_even_alpha(updates, new_sizes, [0], [1]). More samples shrink the "
                  "data part 1/D_1 + 1/D_2 - 2/(D_1 + D_2)."),
    Exercise("01.2", "your alpha (a number)", needs=("updates", "sizes"), wrong=-1.0,
             reference=lambda updates, sizes: break_even_alpha(
                 updates, _changed(sizes, 2, 224), [0, 1], [2]),
             hint="Client 3 joins a group: the groups are [0, 1] and [2], with sizes[2] set "
                  "to 224 in a copy of sizes."),
    Exercise("01.3", "True or False: one pattern is best for every client", kind="bool",
             needs=("results",), wrong="maybe",
             reference=lambda results: bool(set.intersection(
                 *(set(b) for b in selfish_choices(results).values()))),
             hint="For each client, find the patterns with its lowest mean error in "
                  "pattern_means(results) (keep ties); then look for a pattern on every list."),
    Exercise("01.4", "True or False: client 3's error is the same at every seed", kind="bool",
             needs=("results",), wrong="maybe",
             reference=lambda results: all(
                 a["final"]["client_test_error"][2] == b["final"]["client_test_error"][2]
                 for a, b in zip(results["independent"], results["(1,2)"], strict=True)),
             hint="Compare r['final']['client_test_error'][2] of each seed's run under "
                  "'independent' and under '(1,2)'."),
    Exercise("01.5", 'the three pairs in order, e.g. ["(1,3)", "(1,2)", "(2,3)"]',
             kind="sequence", needs=("updates", "sizes"), wrong=["(9,9)"],
             reference=_pair_order,
             hint="Swap the first two entries of a copy of sizes, compute the break-even alpha "
                  "of each pair with it, and sort the pairs by it, smallest first."),
    Exercise("02.1", "the largest divergence (a number)", wrong=-1.0,
             reference=lambda: 4 / (0.1 * 200),
             hint="However large the group, joining removes at most the client's own sample "
                  "term 4L^2/(delta mu D_i); a larger divergence is never paid for."),
    Exercise("02.2", "the smallest group size (a number)", rtol=0.005, wrong=-1.0,
             reference=lambda: _first_paying(200, 0.1, start=200),
             hint="Scan D_G upwards from 200 until hl.join_gain(200, D_G, 0.1, delta=0.1) is "
                  "positive."),
    Exercise("02.3", "the alpha (a number)", wrong=-1.0,
             reference=lambda: alpha_equivalent(delta=0.01),
             hint="hl.alpha_equivalent(delta=...) gives 4L^2/(delta mu); delta appears in the "
                  "denominator."),
    Exercise("02.4", "True or False: the correlation keeps its sign", kind="bool",
             needs=("r",), wrong="maybe",
             reference=lambda r: bool(_label_r() * r > 0),
             hint="Run hl.label_mix_similarity(n_pairs=60, seed=1); its third value is the "
                  "correlation. Compare its sign with the r printed above."),
    Exercise("02.5", "a number of epochs", rtol=0.005, wrong=-1.0,
             reference=lambda: next(t for t in range(1, 10_000)
                                    if learning_rate_sum(t) >= learning_rate_sum() / 2),
             hint="hl.learning_rate_sum(T) is xi_T and hl.learning_rate_sum() its limit: find "
                  "the first T where the first reaches half the second."),
    Exercise("03.1", "the two clients merged first, e.g. [3, 5]", kind="set",
             needs=("updates", "sizes"), wrong=[99, 98], reference=_first_merge,
             hint="The first step printed above names the pair merged first: its clients are "
                  "the numbers in the two groups it joins."),
    Exercise("03.2", "the alpha (a number)", rtol=0.05, wrong=-1.0,
             reference=lambda: _one_group_from(
                 *clustered_updates([4, 2, 2], dim=2000, noise=0.5, seed=1)[:2]),
             hint="Bisect on alpha: client_partition(...).n_groups never grows with alpha, so "
                  "halve the interval between an alpha with several groups and one with one."),
    Exercise("03.3", "True or False: the three clusters are recovered", kind="bool",
             wrong="maybe", reference=_noisy_recovered,
             hint="Compare client_partition(noisy, noisy_sizes, alpha=100.0).groups with the "
                  "clients of each true cluster."),
    Exercise("03.4", '"greedy", "optimum", "both" or "neither"', kind="choice", wrong="all",
             reference=_who_recovers,
             hint="Compare each partition's groups with the true clusters, cluster by cluster."),
    Exercise("04.1", "the points gained (a number)", needs=("runs",), rtol=0.05, wrong=-1.0,
             reference=_protocol_gain,
             hint="hl.by_scheme(runs['fmnist'])['hcct'] gives (final, best), each (mean, std, "
                  "n): subtract the best-epoch mean from the final-epoch mean."),
    Exercise("04.2", "the scheme's name, e.g. \"ifca\"", kind="choice", needs=("runs",),
             wrong="none", reference=_best_digit_scheme,
             hint="hl.best_epoch_means(runs['digit']) maps each scheme to its best-epoch mean "
                  "error: take the scheme with the smallest."),
    Exercise("04.3", "[pairs with buffers, pairs over parameters], two whole numbers",
             kind="sequence", needs=("ablation",), wrong=[-1, -1], reference=_pairs_above,
             hint="Each ablation entry's 'cosines' is a 10 x 10 matrix: count the entries above "
                  "the diagonal (np.triu_indices) that exceed 0.9, with buffers, then without."),
    Exercise("04.4", "the alpha (a number)", needs=("ablation",), rtol=0.02, wrong=-1.0,
             reference=lambda ablation: float(
                 break_even_grid([185], [ablation["parameters"]["same"]])[0, 0]),
             hint="hl.break_even_grid([185], [cosine]) with the within-domain mean cosine "
                  "over parameters, ablation['parameters']['same']."),
    Exercise("05.1", "the cosine (a number)", rtol=0.01, wrong=-1.0, reference=_merge_cosine,
             hint="The break-even alpha falls as the cosine rises: on a fine grid of cosines, "
                  "find the first whose hl.break_even_grid([112], ...) is below 50."),
    Exercise("05.2", "groups per epoch (a number)", needs=("small",), rtol=0.02, wrong=-1.0,
             reference=lambda small: small["hcct", 1]["groups"],
             hint="small[('hcct', 1)]['groups'] is HCCT's mean number of groups per epoch with "
                  "one local epoch."),
    Exercise("05.3", "the cosine (a number)", needs=("ablation",), rtol=0.005, wrong=-1.0,
             reference=_lowest_across,
             hint="Mask ablation['buffers']['cosines'] where the two clients' rotations "
                  "(ablation['buffers']['domains']) differ, and take the minimum."),
    Exercise("05.4", "the alpha (a number)", needs=("alphas",), rtol=0.0, wrong=-1.0,
             reference=_pooled_alpha,
             hint="For each alpha, average alphas[alpha]['errors'] over seeds 0 and 1; choose "
                  "the alpha with the lowest average."),
    Exercise("05.5", "the alpha (a number)", rtol=0.25, wrong=-1.0, reference=_designer_pairs,
             hint="Scan alpha finely from 1 upwards (steps of 0.5) and watch the designer's "
                  "groups: the answer is where both pairs first form."),
    Exercise("06.1", "the alpha (a number)", wrong=-1.0,
             reference=lambda: break_even_alpha(_UNIT, [50, 200], [0], [1]),
             hint="hl.break_even_alpha(u, [50, 200], [0], [1]) with the two updates given."),
    Exercise("06.2", "the group size (a number)", rtol=0.005, wrong=-1.0,
             reference=lambda: _first_paying(150, 0.05, start=150),
             hint="Scan D_G upwards from 150 until hl.join_gain(150, D_G, 0.05) is positive."),
    Exercise("06.3", "the number of groups", rtol=0.0, wrong=-1,
             reference=lambda: client_partition(
                 *clustered_updates([2, 2, 2], dim=500, noise=0.5, seed=4)[:2],
                 alpha=100.0).n_groups,
             hint="Draw the updates, run hl.client_partition(updates, sizes, alpha=100.0) and "
                  "count its groups."),
    Exercise("06.4", "xi_T (a number)", wrong=-1.0,
             reference=lambda: learning_rate_sum(50, lr=0.05, decay=1.0),
             hint="Without decay every epoch adds the same learning rate."),
    Exercise("06.5", "the scheme's name, e.g. \"hcct\"", kind="choice", wrong="none",
             reference=_fmnist_best,
             hint="hl.by_scheme(runs)[scheme][0][0] is a scheme's final-epoch mean error."),
    Exercise("06.6", "K (a number)", rtol=0.0, wrong=-1,
             reference=_fig5_top_utility,
             hint="hl.fixed_k_summary(runs) maps N to (ks, errors, utilities): find the K of "
                  "the largest utility."),
]  # fmt: skip


def _label_r() -> float:
    from .gradient_similarity import label_mix_similarity

    return label_mix_similarity(n_pairs=60, seed=1)[2]


EXERCISES = {ex.key: ex for ex in _LIST}


def check(key: str, answer, **data) -> bool:
    """Judge a student's ``answer`` to exercise ``key``; print right, or a hint. Return it.

    The right answer is computed now, from ``data``: the notebook's objects the exercise
    needs (its check cell passes them). ``...`` (the placeholder) prints what to fill in
    and returns False.
    """
    if key not in EXERCISES:
        raise ValueError(f"no exercise {key!r}; choose from {sorted(EXERCISES)}")
    ex = EXERCISES[key]
    missing = [n for n in ex.needs if n not in data]
    if missing:
        raise ValueError(f"exercise {key} needs {', '.join(missing)}: pass them to check()")
    if answer is Ellipsis:
        print(f"Exercise {key}: replace ... with {ex.asks}, then run this cell again.")
        return False
    ok, message = feedback(ex, answer, ex.reference(**{n: data[n] for n in ex.needs}))
    print(message)
    return ok

"""The right answers of the practice exercises (01-05), each computed from the mode's data.

Each function builds its data as the notebook did (same seeds, files and settings), never
from a student's variables, which a student may have changed (``new = sizes; new[0] = 180``
changes ``sizes`` too). In ``quick`` mode, retrained data come from the notebook's run cache.
"""

from __future__ import annotations

import functools

import numpy as np

from ..partition import client_partition, optimal_partition
from ..partition.merge_steps import benefit_parts, break_even_alpha, merge_steps
from ..partition.synthetic import clustered_updates
from ..reproduction.motivating_example import selfish_choices
from ..theory import join_gain, learning_rate_sum
from .decisions import truth_agreement
from .misleads import break_even_grid
from .modes import Mode, current_mode

__all__ = ["ANSWERS", "best_epoch_gain", "break_even_with"]


@functools.cache
def _first_updates(mode_name: str):
    """Notebook 01's updates and sizes: its quick set-up, or CIFAR-10 in full mode."""
    from ..training.config import make_config
    from .gradient_similarity import first_updates
    from .modes import task_settings

    mode = Mode(mode_name) if mode_name == "full" else Mode("quick")
    settings, _ = task_settings(mode, "motivating")
    updates, sizes, _ = first_updates(make_config("motivating", "hcct", 0, **settings))
    return updates, np.asarray(sizes)


def _motivating():
    updates, sizes = _first_updates(current_mode().name)
    return updates, sizes.copy()


def break_even_with(changes: dict, group_a, group_b) -> float:
    """The break-even alpha of two groups with some clients' sample counts changed."""
    updates, sizes = _motivating()
    for client, samples in changes.items():
        sizes[client] = samples
    return break_even_alpha(updates, sizes, group_a, group_b)


def _changed(sizes, client, samples):
    out = np.array(sizes).copy()
    out[client] = samples
    return out


def _pattern_results():
    from .shipped import motivating_results

    return motivating_results(current_mode())


def _errors(run, client):
    return run["final"]["client_test_error"][client]


def _first_paying(own, divergence, start):
    return next(d for d in range(start, 1_000_000) if join_gain(own, d, divergence) > 0)


def _pair_order():
    updates, sizes = _motivating()
    swapped = sizes[[1, 0, 2]]
    pairs = [(0, 1), (0, 2), (1, 2)]
    alphas = {p: -np.divide(*benefit_parts(updates, swapped, [p[0]], [p[1]])) for p in pairs}
    return [f"({i + 1},{j + 1})" for i, j in sorted(pairs, key=alphas.get)]


def _first_merge_when_bigger(client=2, samples=300):
    updates, sizes, _ = clustered_updates([3, 3, 2], dim=2000, noise=0.5, seed=0)
    step = merge_steps(updates, _changed(sizes, client, samples), alpha=100.0)[0]
    return sorted(step.groups[k][0] + 1 for k in step.chosen)


def _one_group_from(low=10.0, high=10_000.0):
    updates, sizes, _ = clustered_updates([4, 2, 2], dim=2000, noise=0.5, seed=1)
    while high - low > 1e-3:  # bisection: the number of groups never grows with alpha
        mid = (low + high) / 2
        one = client_partition(updates, sizes, alpha=mid).n_groups == 1
        low, high = (low, mid) if one else (mid, high)
    return high


def _recovers(partition, truth) -> bool:
    """Whether ``partition`` is exactly the true clusters (adjusted Rand index 1)."""
    return bool(truth_agreement([partition.groups], truth)[0] == 1.0)


def _recovered_seeds(seeds=range(10)):
    found = 0
    for seed in seeds:
        u, d, truth = clustered_updates([3, 3, 2], dim=2000, noise=1.5, seed=seed)
        found += _recovers(client_partition(u, d, alpha=100.0), truth)
    return found


def _who_recovers():
    u, d, truth = clustered_updates([3, 3, 2], dim=2000, noise=1.5, seed=3)
    greedy = _recovers(client_partition(u, d, alpha=100.0), truth)
    optimum = _recovers(optimal_partition(u, d, alpha=100.0), truth)
    return {(True, True): "both", (False, False): "neither"}.get(
        (greedy, optimum), "greedy" if greedy else "optimum"
    )


def _scheme_runs(task):
    from .shipped import scheme_runs

    return scheme_runs(current_mode(), task)


def best_epoch_gain(task: str, scheme: str) -> float:
    """Table IV's final-epoch mean error of ``scheme`` on ``task`` minus its best-epoch one.

    The best-epoch protocol takes each client's own lowest error over the epochs.
    """
    from ..runs.reading import by_scheme

    (final, _, _), (best, _, _) = by_scheme(_scheme_runs(task))[scheme]
    return final - best


def _one_epoch_gain(task="cifar10", scheme="maxfl"):
    """The final-epoch mean error minus that of one best epoch for the whole federation.

    Per seed: the final mean minus the lowest of the epochs' means; averaged over seeds.
    """
    gains = []
    for r in _scheme_runs(task):
        if r["scheme"] == scheme:
            per_epoch = [np.mean(h["client_test_error"]) for h in r["history"]]
            gains.append(r["final"]["mean"] - min(per_epoch))
    return float(np.mean(gains))


def _global_wins(task="digit"):
    final = {}
    for r in _scheme_runs(task):
        final.setdefault(r["seed"], {})[r["scheme"]] = r["final"]["mean"]
    return sum(v["global"] < v["hcct"] for v in final.values() if {"global", "hcct"} <= set(v))


def _grid(name):
    from .shipped import grid_runs

    return grid_runs(current_mode(), name)


def _ablation(grid):
    from ..reproduction.report_tables import ablation_summary

    return ablation_summary(_grid(grid), seed=0)


def _across_above_within():
    """Per update (buffers, parameters): the pairs across domains that beat one within.

    A pair across two domains counts when its cosine exceeds that of the least similar
    pair within one domain.
    """
    ablation, out = _ablation("ablation-digit"), []
    for label in ("buffers", "parameters"):
        cos = np.asarray(ablation[label]["cosines"])
        dom = np.asarray(ablation[label]["domains"])
        upper = np.triu(np.ones(cos.shape, dtype=bool), 1)
        same = dom[:, None] == dom[None, :]
        out.append(int((cos[upper & ~same] > cos[upper & same].min()).sum()))
    return out


def _digit_pair_alpha():
    same = _ablation("ablation-digit")["parameters"]["same"]
    return float(break_even_grid([185], [same])[0, 0])


def _largest_merging(cosine=0.5, alpha=50.0):
    """The most samples two equal clients at ``cosine`` may hold each and merge at ``alpha``.

    Their break-even alpha grows with the sample count; they merge while it is below.
    """
    size = 1
    while break_even_grid([size + 1], [cosine])[0, 0] < alpha:
        size += 1
    return size


def _small_groups():
    from .misleads import scheme_summary

    return float(scheme_summary(_grid("small-clients-rotated"))["hcct", 1]["groups"])


def _lowest_across():
    ablation = _ablation("buffers-rotated")["buffers"]
    cos, rot = np.asarray(ablation["cosines"]), np.asarray(ablation["domains"])
    return float(cos[rot[:, None] != rot[None, :]].min())


def _pooled_alpha():
    from .misleads import alpha_summary

    alphas = alpha_summary(_grid("alpha-scale-rotated"))
    return min(alphas, key=lambda a: np.mean([alphas[a]["errors"][s] for s in (0, 1)]))


def _designer_pairs(low=1.0, high=40.0):
    """The smallest alpha at which the "alpha's scale" preset forms its two pairs.

    By bisection: the number of groups never grows with alpha.
    """
    from .designer import PRESETS, Designer

    designer, (silos, _) = Designer(seed=0), PRESETS["alpha's scale"]

    def pairs(alpha):
        return designer.picture(silos, alpha)["partition"].n_groups <= 2

    if pairs(low) or not pairs(high):
        raise RuntimeError(f"the designer's preset does not form its pairs in ({low}, {high})")
    while high - low > 1e-6:
        mid = (low + high) / 2
        low, high = (low, mid) if pairs(mid) else (mid, high)
    return high


ANSWERS = {
    "01.1": lambda: break_even_with({0: 180}, [0], [1]),
    "01.2": lambda: break_even_with({2: 224}, [0, 1], [2]),
    "01.3": lambda: bool(
        set.intersection(*(set(b) for b in selfish_choices(_pattern_results()).values()))
    ),
    "01.4": lambda: all(_errors(r, 0) == _errors(r, 1) for r in _pattern_results()["(1,2)"]),
    "01.5": _pair_order,
    "02.1": lambda: 4 / (0.1 * 200),
    "02.2": lambda: _first_paying(200, 0.1, start=200),
    "02.3": lambda: 4.0,  # 4 L^2 / (delta mu) as delta -> 1, its largest admissible value
    "02.4": lambda: 0.5 * np.abs(np.r_[np.full(5, 0.2), np.zeros(5)] - np.full(10, 0.1)).sum(),
    "02.5": lambda: next(
        t for t in range(1, 10_000) if learning_rate_sum(t) >= learning_rate_sum() / 2
    ),
    "03.1": _first_merge_when_bigger,
    "03.2": _one_group_from,
    "03.3": _recovered_seeds,
    "03.4": _who_recovers,
    "04.1": _one_epoch_gain,
    "04.2": _global_wins,
    "04.3": _across_above_within,
    "04.4": _digit_pair_alpha,
    "05.1": _largest_merging,
    "05.2": _small_groups,
    "05.3": _lowest_across,
    "05.4": _pooled_alpha,
    "05.5": _designer_pairs,
}

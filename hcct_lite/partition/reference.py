"""The paper's Algorithm 2 written out directly: flattened vectors, cached benefits.

This is the algorithm as a reader of the paper would code it, kept deliberately apart
from the Gram-matrix implementation in :mod:`hcct_lite.partition` (it shares no code with
it): the tests check that both make the same decisions, the notebooks and
``benchmarks/bench_partition.py`` time one against the other.
"""

import numpy as np

ZERO_GROUP_RTOL = 1e-12
BENEFIT_RTOL = 1e-12  # benefits this close to 0 (relative to the utilities) are no gain


def group_utility(vectors, sizes, alpha, members):
    """Summed utility of the clients in ``members`` when they form one group."""
    d_group = sum(sizes[i] for i in members)
    if len(members) == 1:
        i = members[0]
        return 1.0 - alpha[i] / sizes[i]
    mean = sum(sizes[i] * vectors[i] for i in members) / d_group
    mean_norm = np.linalg.norm(mean)
    scale = sum(sizes[i] * np.linalg.norm(vectors[i]) for i in members) / d_group
    total = 0.0
    for i in members:
        if mean_norm <= ZERO_GROUP_RTOL * scale:
            cos = 0.0
        else:
            cos = float(vectors[i] @ mean) / (np.linalg.norm(vectors[i]) * mean_norm)
        total += -alpha[i] / d_group + cos
    return total


def naive_partition(vectors, sizes, alpha, num_groups=None):
    """Greedy merge on (N, M) ``vectors``; ``alpha`` is an (N,) array.

    Returns ``(groups, benefits)``: the final groups (lists of client indices, ordered by
    smallest member) and the benefit of each merge.
    """
    vectors = [np.asarray(v, dtype=np.float64).ravel() for v in vectors]
    sizes = [float(s) for s in sizes]
    n = len(vectors)
    groups = [[i] for i in range(n)]
    util = {(i,): group_utility(vectors, sizes, alpha, [i]) for i in range(n)}
    cache = {}
    benefits = []
    target = 1 if num_groups is None else num_groups
    while len(groups) > target:
        best, best_pair = -np.inf, None
        for x in range(len(groups)):  # groups stay sorted by smallest member
            for y in range(x + 1, len(groups)):
                key = (tuple(groups[x]), tuple(groups[y]))
                if key not in cache:
                    merged = sorted(groups[x] + groups[y])
                    u = group_utility(vectors, sizes, alpha, merged)
                    cache[key] = u - util[key[0]] - util[key[1]]
                if cache[key] > best:
                    best, best_pair = cache[key], (x, y)
        if num_groups is None and not _gains(best, best_pair, groups, util):
            break
        x, y = best_pair
        merged = sorted(groups[x] + groups[y])
        util[tuple(merged)] = util[tuple(groups[x])] + util[tuple(groups[y])] + best
        groups[x] = merged
        del groups[y]
        benefits.append(best)
    return groups, benefits


def _gains(best, pair, groups, util) -> bool:
    """Whether merging ``pair`` gains more than the float noise of the utilities involved."""
    if pair is None:
        return False
    a, b = (groups[i] for i in pair)
    noise = abs(util[tuple(a)]) + abs(util[tuple(b)]) + len(a) + len(b)
    return best > BENEFIT_RTOL * noise


def compare_speed(n, m, alpha=100.0, noise=0.5, seed=0, run_naive=True):
    """Time :func:`naive_partition` against ``client_partition`` on a clustered federation.

    Parameters
    ----------
    n : int
        Clients, in ``max(2, n // 5)`` clusters of nearly equal size
        (:func:`~hcct_lite.partition.synthetic.clustered_updates`).
    m : int
        Update dimension.
    alpha : float >= 0, default=100.0
        The trade-off given to both implementations.
    noise : float >= 0, default=0.5
        Within-cluster spread.
    seed : int, default=0
        Seeds the updates and sizes.
    run_naive : bool, default=True
        Also time :func:`naive_partition` (slow for large ``n``).

    Returns
    -------
    dict
        ``N``, ``M``, ``groups``, ``fast`` and ``gram`` seconds (the bare float64 Gram
        matrix, for scale) and, with ``run_naive``, ``naive`` seconds and ``same``
        (identical groups).
    """
    import time

    from .greedy import client_partition
    from .synthetic import clustered_updates

    k = max(2, n // 5)
    cluster_sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
    updates, sizes, _ = clustered_updates(cluster_sizes, m, noise=noise, seed=seed)
    t0 = time.perf_counter()
    updates @ updates.T
    t1 = time.perf_counter()
    p = client_partition(updates, sizes, alpha)
    t2 = time.perf_counter()
    row = {"N": n, "M": m, "groups": p.n_groups, "gram": t1 - t0, "fast": t2 - t1}
    if run_naive:
        groups, _ = naive_partition(updates, sizes, np.full(n, float(alpha)))
        row["naive"] = time.perf_counter() - t2
        row["same"] = groups == p.groups
    return row

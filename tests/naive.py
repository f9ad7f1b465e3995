"""The paper's Algorithm 2 written out directly: flattened vectors, cached benefits.

Independent of the library's Gram-matrix implementation: the tests check that both
make the same decisions, and benchmarks/bench_partition.py times one against the other.
"""

import numpy as np

ZERO_GROUP_RTOL = 1e-12


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
    """Return (groups, benefits) of the greedy merge. ``alpha`` is an (N,) array."""
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
        if num_groups is None and not best > 0:
            break
        x, y = best_pair
        merged = sorted(groups[x] + groups[y])
        util[tuple(merged)] = util[tuple(groups[x])] + util[tuple(groups[y])] + best
        groups[x] = merged
        del groups[y]
        benefits.append(best)
    return groups, benefits

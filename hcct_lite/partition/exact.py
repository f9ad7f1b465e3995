"""The exact optimum of the paper's problem P1, for small federations.

P1 maximises the summed client utility over every partition of the clients (there are
B_N of them, the Bell number). For N <= 10 this module finds the optimum exactly, so the
greedy merge of :func:`hcct_lite.partition.client_partition` can be compared with it.
"""

from __future__ import annotations

import numpy as np

from .updates import gram_matrix, validate_alpha, validate_sizes
from .utility import ZERO_GROUP_RTOL, GramContext, Partition, make_partition

__all__ = ["optimal_partition", "subset_utilities", "MAX_CLIENTS"]

MAX_CLIENTS = 10


def subset_utilities(gram: np.ndarray, sizes: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Summed utility of every possible group, from the Gram matrix.

    Parameters
    ----------
    gram : (N, N) float64 Gram matrix of the updates
    sizes, alpha : (N,) float64

    Returns
    -------
    numpy.ndarray (2**N,)
        Entry ``mask`` is the summed utility of the group whose members are the set bits
        of ``mask`` (entry 0, the empty group, is 0).
    """
    n = sizes.shape[0]
    masks = (np.arange(1 << n)[:, None] >> np.arange(n)[None, :]) & 1  # (2^N, N)
    weights = masks * sizes  # D_j for members, 0 otherwise
    c = weights @ gram  # c[S, i] = <g_i, sum_{j in S} D_j g_j>
    q = np.einsum("si,si->s", weights, c)
    norms = np.sqrt(np.diag(gram))
    scale = weights @ norms
    y = (masks * c / norms).sum(axis=1)
    safe = q > (ZERO_GROUP_RTOL * scale) ** 2
    cos_sum = np.where(safe, y / np.sqrt(np.where(safe, q, 1.0)), 0.0)
    d_group = weights.sum(axis=1)
    util = np.zeros(1 << n)
    nonempty = d_group > 0
    util[nonempty] = -(masks @ alpha)[nonempty] / d_group[nonempty] + cos_sum[nonempty]
    singles = 1 << np.arange(n)
    util[singles] = 1.0 - alpha / sizes  # a singleton's cosine is exactly 1
    return util


def optimal_partition(updates, sizes, alpha=1.0) -> Partition:
    """Return the partition with the largest total utility (problem P1), exactly.

    Every set partition of the N <= 10 clients is considered: dynamic programming over
    subsets (the best partition of a set is its best first group, the one holding its
    smallest client, plus the best partition of the rest) covers all B_N partitions in
    3^N steps instead of listing them.

    Parameters
    ----------
    updates : array-like or Tensor of shape (n_clients, n_params), or sequence of mappings
        Client updates, in any format of :func:`~hcct_lite.partition.client_partition`;
        ``n_clients <= 10`` (:data:`MAX_CLIENTS`).
    sizes : array-like of shape (n_clients,)
        Positive integer sample counts ``D_i``.
    alpha : float >= 0, array-like of shape (n_clients,), or "size", default=1.0
        Trade-off between data volume and similarity; ``"size"`` means ``alpha_i = D_i``.

    Returns
    -------
    Partition
        ``groups``, ``labels`` of shape (n_clients,) and ``utilities`` of shape
        (n_clients,); ``merges`` is empty and ``linkage()`` raises (there is no merge
        history); ``total_utility`` is the optimum of P1.

    Raises
    ------
    ValueError
        If there are more than 10 clients, or for any input
        :func:`~hcct_lite.partition.client_partition` refuses.

    See Also
    --------
    client_partition : The greedy merge (Algorithm 2), for any number of clients.

    Examples
    --------
    >>> import numpy as np
    >>> from hcct_lite import optimal_partition
    >>> updates = np.array([[1.0, 0.1], [0.9, 0.2], [0.1, 1.0], [0.2, 0.9]])
    >>> best = optimal_partition(updates, sizes=[100, 120, 80, 90], alpha=10.0)
    >>> best.groups
    [[0, 1], [2, 3]]
    >>> round(best.total_utility, 3)
    3.784
    >>> optimal_partition(np.eye(11), sizes=[1] * 11)
    Traceback (most recent call last):
    ...
    ValueError: optimal_partition enumerates all B_N partitions and supports N <= 10 ...
    """
    gram = gram_matrix(updates)
    n = gram.shape[0]
    if n > MAX_CLIENTS:
        raise ValueError(
            f"optimal_partition enumerates all B_N partitions and supports N <= {MAX_CLIENTS} "
            f"clients; got N = {n}"
        )
    d = validate_sizes(sizes, n)
    a = validate_alpha(alpha, d)
    util = subset_utilities(gram, d, a)
    full = (1 << n) - 1
    best = np.full(1 << n, -np.inf)
    choice = np.zeros(1 << n, dtype=np.int64)
    best[0] = 0.0
    for mask in range(1, full + 1):
        low = mask & -mask
        rest = mask ^ low
        sub = rest
        while True:  # every subset of `rest`, joined with the lowest client
            group = sub | low
            value = util[group] + best[mask ^ group]
            if value > best[mask]:
                best[mask], choice[mask] = value, group
            if sub == 0:
                break
            sub = (sub - 1) & rest
    groups, mask = [], full
    while mask:
        g = int(choice[mask])
        groups.append([i for i in range(n) if g >> i & 1])
        mask ^= g
    groups.sort(key=lambda g: g[0])
    result = make_partition(GramContext(gram=gram, sizes=d, alpha=a), groups, [])
    result._ctx = None  # no merge history: linkage() is undefined for the optimum
    return result


def greedy_vs_optimal(n_instances=50, n_clients=8, alpha=100.0, dim=200, seed=0) -> dict:
    """How close the greedy merge comes to the optimum of P1 on random clustered federations.

    Parameters
    ----------
    n_instances : int, default=50
        Federations drawn, each with 1 to ``max(2, n_clients // 2)`` clusters
        (:func:`~hcct_lite.partition.synthetic.clustered_updates`).
    n_clients : int in [1, 10], default=8
        Clients per federation.
    alpha : float >= 0, default=100.0
        The trade-off given to both partitions.
    dim : int, default=200
        Update dimension.
    seed : int, default=0
        Seeds every draw.

    Returns
    -------
    dict
        ``instances``, ``same_partition`` (count where greedy finds the optimum's groups),
        ``same_utility`` (count within 1e-9), ``mean_gap`` and ``max_gap`` (optimum total
        utility minus greedy's, >= 0) and ``gaps`` of shape (n_instances,).

    Raises
    ------
    ValueError
        If ``n_clients`` is outside [1, 10].
    """
    from .greedy import client_partition
    from .synthetic import clustered_updates

    if not 1 <= n_clients <= MAX_CLIENTS:
        raise ValueError(f"n_clients must be in [1, {MAX_CLIENTS}]; got {n_clients}")
    rng = np.random.default_rng(seed)
    gaps, same = [], 0
    for _ in range(n_instances):
        k = int(rng.integers(1, max(2, n_clients // 2) + 1))
        cuts = np.sort(rng.choice(np.arange(1, n_clients), size=k - 1, replace=False))
        sizes_k = np.diff(np.concatenate([[0], cuts, [n_clients]])).tolist()
        u, d, _ = clustered_updates(
            sizes_k,
            dim,
            noise=float(rng.uniform(0.2, 1.5)),
            samples=(20, 300),
            seed=int(rng.integers(2**31)),
        )
        g = client_partition(u, d, alpha)
        o = optimal_partition(u, d, alpha)
        gaps.append(o.total_utility - g.total_utility)
        same += g.groups == o.groups
    gaps = np.array(gaps)
    return {
        "instances": n_instances,
        "same_partition": int(same),
        "same_utility": int((gaps <= 1e-9).sum()),
        "mean_gap": float(gaps.mean()),
        "max_gap": float(gaps.max()),
        "gaps": gaps,
    }

"""HCCT's client partition: the paper's Algorithm 2, exact and fast.

Client ``i`` in group ``S`` has utility ``U_i = -alpha_i / D_S + cos(g_i, g_S)``, where
``g_S`` is the group's D-weighted mean update (a singleton has ``cos = 1``). From singletons,
the pair whose merge raises the summed utility most is merged while that benefit is > 0.
Every quantity comes from the Gram matrix, updated in O(N) per merge (``_GroupSums``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .updates import gram_matrix, validate_alpha, validate_sizes
from .utility import ZERO_GROUP_RTOL, GramContext, Merge, Partition, make_partition, no_gain

__all__ = ["client_partition"]


def client_partition(updates, sizes, alpha=1.0, num_groups=None) -> Partition:
    """Partition clients by HCCT's greedy merge (the paper's Algorithm 2).

    Parameters
    ----------
    updates : array-like or Tensor of shape (n_clients, n_params), or sequence of mappings
        Client updates ``g_i = (w_start - w_end) / lr``; or one mapping name -> tensor per
        client, flattened in key order (every client's keys and shapes the same). No
        update may be all zeros or hold NaN or Inf.
    sizes : array-like of shape (n_clients,)
        Positive integer sample counts ``D_i``.
    alpha : float >= 0, array-like of shape (n_clients,), or "size", default=1.0
        Trade-off between data volume and similarity; ``"size"`` means ``alpha_i = D_i``.
    num_groups : int in [1, n_clients] or None, default=None
        ``None``: stop when no pair has benefit > 0 (the paper's rule; a benefit within
        float noise of 0 is no gain, see :func:`~hcct_lite.partition.utility.no_gain`). An
        int K: keep merging the best pair, even at negative benefit, until exactly K groups
        remain.

    Returns
    -------
    Partition
        ``groups`` (lists of client indices), ``labels`` of shape (n_clients,),
        ``utilities`` of shape (n_clients,), ``merges`` (the merges made, in order) and
        ``linkage()`` of shape (n_clients - 1, 4).

    Raises
    ------
    ValueError
        If ``updates`` is empty, not 2-D, or a client's update is all zeros, NaN or Inf;
        if ``sizes`` or an ``alpha`` array has the wrong shape, a size is not a positive
        integer or an alpha is negative; if ``num_groups`` is outside [1, n_clients].
    TypeError
        If ``updates`` or ``sizes`` are not real numbers, or ``num_groups`` not an int.

    See Also
    --------
    optimal_partition : The exact optimum of the same objective, for n_clients <= 10.

    Notes
    -----
    Ties between pairs with equal benefit go to the pair whose smaller group has the
    smallest member, then to the other group with the smallest member. The constant
    beta of the paper's utility cancels in every benefit and is omitted.

    Examples
    --------
    Four clients whose updates point two ways form two groups:

    >>> import numpy as np
    >>> from hcct_lite import client_partition
    >>> updates = np.array([[1.0, 0.1], [0.9, 0.2], [0.1, 1.0], [0.2, 0.9]])
    >>> part = client_partition(updates, sizes=[100, 120, 80, 90], alpha=10.0)
    >>> part.groups
    [[0, 1], [2, 3]]
    >>> part.labels
    array([0, 0, 1, 1])
    >>> part.utilities.round(3)
    array([0.953, 0.953, 0.939, 0.939])
    >>> part.linkage().shape
    (3, 4)

    With ``alpha=0`` data volume is worth nothing and every client stays alone; a fixed
    number of groups forces merges:

    >>> client_partition(updates, [100, 120, 80, 90], alpha=0.0).groups
    [[0], [1], [2], [3]]
    >>> client_partition(updates, [100, 120, 80, 90], num_groups=1).groups
    [[0, 1, 2, 3]]
    """
    gram = gram_matrix(updates)
    n = gram.shape[0]
    d = validate_sizes(sizes, n)
    a = validate_alpha(alpha, d)
    if num_groups is not None:
        if isinstance(num_groups, bool) or not isinstance(num_groups, (int, np.integer)):
            raise TypeError(f"num_groups must be an int or None; got {num_groups!r}")
        if not 1 <= num_groups <= n:
            raise ValueError(f"num_groups must be in [1, N={n}]; got {num_groups}")
    ctx = GramContext(gram=gram, sizes=d, alpha=a)
    merges = _greedy(ctx, num_groups)
    groups = _groups_after(n, merges)
    return make_partition(ctx, groups, merges, complete=lambda: _greedy(ctx, num_groups=1))


def _groups_after(n: int, merges) -> list:
    members = {i: [i] for i in range(n)}
    for m in merges:
        lo, hi = sorted((m.left[0], m.right[0]))
        members[lo] = sorted(members[lo] + members.pop(hi))
    return [members[k] for k in sorted(members)]


@dataclass
class _GroupSums:
    """The additive sums of every current group, indexed by the group's smallest member.

    From the Gram matrix ``G = [<g_i, g_j>]``, ``cos(g_i, g_S) = c_S[i] / (||g_i||
    sqrt(q_S))`` with ``c_S[i] = sum_{j in S} D_j G[i, j]``. So a group's summed cosine is
    ``Y_SS / sqrt(q_S)``, with ``Y_ST = sum_{i in S, j in T} D_j G[i, j] / ||g_i||``. ``X``
    and ``Y`` add up when groups merge: one row and column per merge, identical decisions.

    For group S: ``size`` D_S, ``alpha`` sum of alpha_i, ``norm_sum`` sum D_i ||g_i||,
    ``sq_norm`` q_S = ||sum D_i g_i||^2, ``cos_num`` Y_SS, ``utility`` the summed utility;
    between groups (N, N): ``cross`` X_ST = sum D_i D_j G[i, j] and ``cross_cos`` Y_ST.
    """

    size: np.ndarray
    alpha: np.ndarray
    norm_sum: np.ndarray
    sq_norm: np.ndarray
    cos_num: np.ndarray
    utility: np.ndarray
    cross: np.ndarray
    cross_cos: np.ndarray

    @classmethod
    def singletons(cls, ctx: GramContext):
        gram, d, a = ctx.gram, ctx.sizes, ctx.alpha
        norms = np.sqrt(np.diag(gram))
        return cls(
            size=d.copy(),
            alpha=a.copy(),
            norm_sum=d * norms,
            sq_norm=(d * norms) ** 2,
            cos_num=d * norms,  # sum_i c_S[i] / ||g_i|| for a singleton: D_i ||g_i||
            utility=1.0 - a / d,  # singleton: cos = 1 exactly
            cross=gram * np.outer(d, d),
            cross_cos=gram * d[None, :] / norms[:, None],
        )

    def pair_benefits(self, s, rows):
        """Benefits of merging group ``s`` with each group in ``rows`` (1-D index array)."""
        q = self.sq_norm[s] + self.sq_norm[rows] + 2.0 * self.cross[s, rows]
        y = self.cos_num[s] + self.cos_num[rows] + self.cross_cos[s, rows] + self.cross_cos[rows, s]
        scale = self.norm_sum[s] + self.norm_sum[rows]
        dd = self.size[s] + self.size[rows]
        aa = self.alpha[s] + self.alpha[rows]
        safe = q > (ZERO_GROUP_RTOL * scale) ** 2
        cos_sum = np.where(safe, y / np.sqrt(np.where(safe, q, 1.0)), 0.0)
        u_new = -aa / dd + cos_sum
        return u_new - self.utility[s] - self.utility[rows]

    def merge(self, s: int, t: int, benefit: float) -> None:
        """Merge group t into group s (s < t): the sums add; t's entries retire."""
        q_new = self.sq_norm[s] + self.sq_norm[t] + 2.0 * self.cross[s, t]
        y_new = self.cos_num[s] + self.cos_num[t] + self.cross_cos[s, t] + self.cross_cos[t, s]
        u_new = self.utility[s] + self.utility[t] + benefit
        for v in (self.size, self.alpha, self.norm_sum):
            v[s] += v[t]
        self.sq_norm[s], self.cos_num[s], self.utility[s] = q_new, y_new, u_new
        self.cross[s, :] += self.cross[t, :]
        self.cross[:, s] = self.cross[s, :]
        self.cross_cos[s, :] += self.cross_cos[t, :]
        self.cross_cos[:, s] += self.cross_cos[:, t]


def _greedy(ctx: GramContext, num_groups=None) -> list:
    """Run the greedy merge; return the list of Merge records."""
    n = ctx.sizes.shape[0]
    target = 1 if num_groups is None else num_groups
    if n <= target:
        return []
    sums = _GroupSums.singletons(ctx)
    # Benefit matrix on the upper triangle (row = smaller group id); -inf elsewhere.
    benefit = np.full((n, n), -np.inf)
    for s in range(n - 1):
        rows = np.arange(s + 1, n)
        benefit[s, rows] = sums.pair_benefits(s, rows)
    row_arg = np.argmax(benefit, axis=1)
    row_max = benefit[np.arange(n), row_arg]
    active = np.ones(n, dtype=bool)
    members = {i: (i,) for i in range(n)}
    total = float(sums.utility.sum())
    merges = []
    for _ in range(n - target):
        s = int(np.argmax(row_max))  # first maximum: smallest group id wins ties
        t = int(row_arg[s])
        best = float(benefit[s, t])
        members_st = len(members[s]) + len(members[t])
        if num_groups is None and no_gain(best, sums.utility[s], sums.utility[t], members_st):
            break
        sums.merge(s, t, best)
        active[t] = False
        benefit[t, :] = -np.inf
        benefit[:, t] = -np.inf
        row_max[t] = -np.inf
        total += best
        merges.append(Merge(members[s], members[t], best, total))
        members[s] = tuple(sorted(members[s] + members.pop(t)))
        # New benefits of s with every other active group.
        others = np.flatnonzero(active)
        others = others[others != s]
        if others.size:
            new_b = sums.pair_benefits(s, others)
            lower, upper = others < s, others > s
            benefit[s, others[upper]] = new_b[upper]
            benefit[others[lower], s] = new_b[lower]
        _refresh_row_max(benefit, row_max, row_arg, active, s, t)
    return merges


def _refresh_row_max(benefit, row_max, row_arg, active, s, t) -> None:
    """Keep each row's (max, first argmax) exact after merging t into s."""
    row = benefit[s]
    row_arg[s] = int(np.argmax(row))
    row_max[s] = row[row_arg[s]]
    rows = np.flatnonzero(active[:t])
    rows = rows[rows != s]
    stale = (row_arg[rows] == s) | (row_arg[rows] == t)
    for r in rows[stale]:
        row_arg[r] = int(np.argmax(benefit[r]))
        row_max[r] = benefit[r, row_arg[r]]
    # Rows above s whose best was elsewhere: only B[r, s] changed, compare it.
    fresh = rows[~stale & (rows < s)]
    if fresh.size:
        v = benefit[fresh, s]
        better = (v > row_max[fresh]) | ((v == row_max[fresh]) & (s < row_arg[fresh]))
        row_max[fresh[better]] = v[better]
        row_arg[fresh[better]] = s

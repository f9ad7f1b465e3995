"""Algorithm 2 step by step: the benefit of every pair of groups at every merge.

For teaching and plotting: :func:`merge_steps` replays :func:`client_partition` and, at
each step, reports the full benefit matrix the algorithm chose from. It recomputes group
utilities from the Gram matrix directly (O(K^2) groups per step), which is fine for the
small federations one draws as heatmaps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .greedy import client_partition
from .updates import gram_matrix, validate_alpha, validate_sizes
from .utility import GramContext, group_utilities

__all__ = [
    "MergeStep",
    "merge_steps",
    "pair_benefits",
    "benefit_parts",
    "pair_benefit_parts",
    "break_even_alpha",
]


@dataclass
class MergeStep:
    """The state of the greedy merge before one step.

    Attributes
    ----------
    groups : list[list[int]], the current groups, ordered by smallest member
    benefits : numpy.ndarray (K, K), symmetric; ``benefits[a, b]`` is the benefit of merging
        groups a and b (NaN on the diagonal)
    chosen : (a, b) indices into ``groups`` of the merged pair, or None where the
        algorithm stops (no benefit > 0, or one group left)
    benefit : the chosen benefit (NaN where it stops)
    """

    groups: list
    benefits: np.ndarray
    chosen: tuple | None
    benefit: float


def _benefit_matrix(ctx, groups):
    util = [float(group_utilities(ctx, g).sum()) for g in groups]
    k = len(groups)
    out = np.full((k, k), np.nan)
    for a in range(k):
        for b in range(a + 1, k):
            merged = sorted(groups[a] + groups[b])
            out[a, b] = out[b, a] = float(group_utilities(ctx, merged).sum()) - util[a] - util[b]
    return out


def merge_steps(updates, sizes, alpha=1.0, num_groups=None) -> list:
    """Replay the greedy merge; return one :class:`MergeStep` per step, the stop included.

    Parameters
    ----------
    updates : array-like or Tensor of shape (n_clients, n_params), or sequence of mappings
        Client updates, in any format of :func:`~hcct_lite.partition.client_partition`.
    sizes : array-like of shape (n_clients,)
        Positive integer sample counts ``D_i``.
    alpha : float >= 0, array-like of shape (n_clients,), or "size", default=1.0
        Trade-off between data volume and similarity.
    num_groups : int in [1, n_clients] or None, default=None
        As in :func:`~hcct_lite.partition.client_partition`.

    Returns
    -------
    list of MergeStep
        ``len(partition.merges) + 1`` steps: before step k, ``groups`` (K groups) and
        ``benefits`` of shape (K, K); the last step is where the algorithm stops.

    Raises
    ------
    ValueError, TypeError
        For any input :func:`~hcct_lite.partition.client_partition` refuses.

    Examples
    --------
    >>> import numpy as np
    >>> from hcct_lite.partition import merge_steps
    >>> updates = np.array([[1.0, 0.1], [0.9, 0.2], [0.1, 1.0], [0.2, 0.9]])
    >>> steps = merge_steps(updates, sizes=[100, 120, 80, 90], alpha=10.0)
    >>> [(step.groups, step.chosen) for step in steps]
    [([[0], [1], [2], [3]], (2, 3)), ([[0], [1], [2, 3]], (0, 1)), ([[0, 1], [2, 3]], None)]
    >>> steps[-1].benefits.round(3)  # merging the last two groups would lose utility
    array([[   nan, -0.665],
           [-0.665,    nan]])
    """
    p = client_partition(updates, sizes, alpha, num_groups)
    gram = gram_matrix(updates)
    d = validate_sizes(sizes, gram.shape[0])
    ctx = GramContext(gram=gram, sizes=d, alpha=validate_alpha(alpha, d))
    groups = [[i] for i in range(gram.shape[0])]
    steps = []
    for m in p.merges:
        a = next(k for k, g in enumerate(groups) if g[0] == m.left[0])
        b = next(k for k, g in enumerate(groups) if g[0] == m.right[0])
        steps.append(
            MergeStep([list(g) for g in groups], _benefit_matrix(ctx, groups), (a, b), m.benefit)
        )
        groups[a] = sorted(groups[a] + groups[b])
        del groups[b]
    steps.append(
        MergeStep([list(g) for g in groups], _benefit_matrix(ctx, groups), None, float("nan"))
    )
    return steps


def pair_benefits(updates, sizes, alpha=1.0) -> np.ndarray:
    """The benefit of merging each pair of single clients: the greedy's first choice.

    Parameters
    ----------
    updates, sizes, alpha
        As in :func:`merge_steps` (``alpha`` default=1.0).

    Returns
    -------
    numpy.ndarray of shape (n_clients, n_clients)
        Symmetric, NaN on the diagonal; > 0 where merging the two clients raises their
        summed utility.

    Examples
    --------
    >>> import numpy as np
    >>> from hcct_lite.partition import pair_benefits
    >>> updates = np.array([[1.0, 0.1], [0.9, 0.2], [0.1, 1.0], [0.2, 0.9]])
    >>> pair_benefits(updates, [100, 120, 80, 90], alpha=10.0).round(3)
    array([[   nan,  0.089, -0.345, -0.278],
           [ 0.089,    nan, -0.282, -0.22 ],
           [-0.345, -0.282,    nan,  0.115],
           [-0.278, -0.22 ,  0.115,    nan]])
    """
    return merge_steps(updates, sizes, alpha, num_groups=None)[0].benefits


def benefit_parts(updates, sizes, group_a, group_b) -> tuple:
    """Split the benefit of merging ``group_a`` with ``group_b`` into its two parts.

    The benefit is linear in alpha, ``benefit(alpha) = similarity + alpha * data``:
    ``similarity`` is the change in the members' summed cosines (<= 0: a merged group's mean
    update is never closer to a member than the member itself) and ``data`` =
    ``|A|/D_A + |B|/D_B - |A u B|/D_AuB`` > 0 what the sample-size term gains per unit of
    alpha. Small clients make ``data`` large: it is the central trade-off of the utility.

    Parameters
    ----------
    updates : array-like or Tensor of shape (n_clients, n_params), or sequence of mappings
        Client updates, in any format of :func:`~hcct_lite.partition.client_partition`.
    sizes : array-like of shape (n_clients,)
        Positive integer sample counts ``D_i``.
    group_a, group_b : list of int
        Non-empty, disjoint lists of client indices in ``0..n_clients - 1``.

    Returns
    -------
    similarity, data : float
        ``benefit(alpha) = similarity + alpha * data``.

    Raises
    ------
    ValueError
        If a group is empty, the groups overlap or an index is out of range, or for any
        ``updates`` or ``sizes`` :func:`~hcct_lite.partition.client_partition` refuses.

    Examples
    --------
    >>> import numpy as np
    >>> from hcct_lite.partition.merge_steps import benefit_parts
    >>> updates = np.array([[1.0, 0.1], [0.9, 0.2], [0.1, 1.0], [0.2, 0.9]])
    >>> similarity, data = benefit_parts(updates, [100, 120, 80, 90], [0], [1])
    >>> round(similarity, 6), round(data, 6)  # a little similarity lost, data gained
    (-0.003547, 0.009242)
    """
    a, b = sorted(group_a), sorted(group_b)
    if not a or not b or set(a) & set(b):
        raise ValueError(f"group_a {a} and group_b {b} must be non-empty and disjoint")
    gram = gram_matrix(updates)
    d = validate_sizes(sizes, gram.shape[0])
    if max(a + b) >= gram.shape[0] or min(a + b) < 0:
        raise ValueError(f"client indices must lie in 0..{gram.shape[0] - 1}; got {a} and {b}")
    ctx = GramContext(gram=gram, sizes=d, alpha=validate_alpha(0.0, d))
    utility = [float(group_utilities(ctx, g).sum()) for g in (a + b, a, b)]
    similarity = utility[0] - utility[1] - utility[2]
    data = len(a) / d[a].sum() + len(b) / d[b].sum() - len(a + b) / d[a + b].sum()
    return similarity, float(data)


def pair_benefit_parts(updates, sizes, alpha=1.0) -> tuple:
    """The two parts of :func:`pair_benefits`, for every pair of single clients.

    Parameters
    ----------
    updates, sizes, alpha
        As in :func:`pair_benefits` (``alpha`` default=1.0).

    Returns
    -------
    similarity, data : numpy.ndarray of shape (n_clients, n_clients)
        NaN on the diagonal, with ``similarity + data == pair_benefits(updates, sizes,
        alpha)``; for a scalar ``alpha``, ``data`` is ``alpha`` times the data gain of
        :func:`benefit_parts`.
    """
    total = pair_benefits(updates, sizes, alpha)  # validates every argument
    n = total.shape[0]
    sim = np.full((n, n), np.nan)
    for i in range(n):
        for j in range(i + 1, n):
            sim[i, j] = sim[j, i] = benefit_parts(updates, sizes, [i], [j])[0]
    return sim, total - sim


def break_even_alpha(updates, sizes, group_a, group_b) -> float:
    """The alpha at which merging ``group_a`` with ``group_b`` starts to pay off.

    With the parts of :func:`benefit_parts`, ``benefit(alpha) = similarity + alpha * data``
    crosses 0 at ``-similarity / data``: the merge's benefit is positive for every larger
    alpha (0 when it pays off at any alpha).

    Parameters
    ----------
    updates, sizes, group_a, group_b
        As in :func:`benefit_parts` (which says what raises).

    Returns
    -------
    float >= 0

    Examples
    --------
    Clients 0 and 1 merge for any alpha above about 0.384:

    >>> import numpy as np
    >>> from hcct_lite.partition import client_partition
    >>> from hcct_lite.partition.merge_steps import break_even_alpha
    >>> updates, sizes = np.array([[1.0, 0.1], [0.9, 0.2]]), [100, 120]
    >>> round(break_even_alpha(updates, sizes, [0], [1]), 3)
    0.384
    >>> client_partition(updates, sizes, 0.38).groups, client_partition(updates, sizes, 0.39).groups
    ([[0], [1]], [[0, 1]])
    """
    similarity, data = benefit_parts(updates, sizes, group_a, group_b)
    return max(0.0, -similarity / data)

"""Group utilities from the Gram matrix, and the :class:`Partition` they describe.

Client ``i`` in group ``S`` has utility ``U_i = -alpha_i / D_S + cos(g_i, g_S)`` (the
paper's Eq. (6) without its constant beta); everything is computed from the Gram matrix of
the updates (see :mod:`hcct_lite.partition.greedy`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "ZERO_GROUP_RTOL",
    "BENEFIT_RTOL",
    "no_gain",
    "Merge",
    "GramContext",
    "Partition",
    "group_utilities",
    "make_partition",
]

# A group whose mean update is this small relative to its members' norms has no
# direction: its cosine term is taken as 0 (documented in docs/partition.md).
ZERO_GROUP_RTOL = 1e-12
# A benefit is a difference of summed utilities, each rounded to about 1e-16 of its size:
# a benefit within this share of the utilities involved is float noise around 0 and counts
# as no gain (two identical clients at alpha = 0 have a true benefit of exactly 0).
BENEFIT_RTOL = 1e-12


def no_gain(benefit: float, u_left: float, u_right: float, members: int) -> bool:
    """Whether merging two groups gains nothing: ``benefit`` is not above float noise.

    ``u_left``, ``u_right``: the groups' summed utilities; ``members``: their clients in
    all. The tolerance is ``BENEFIT_RTOL * (|u_left| + |u_right| + members)``.
    """
    return not benefit > BENEFIT_RTOL * (abs(u_left) + abs(u_right) + members)


@dataclass(frozen=True)
class Merge:
    """One step of the greedy merge.

    Attributes
    ----------
    left, right : tuple[int, ...]
        Members of the two merged groups (``min(left) < min(right)``).
    benefit : float
        Summed utility after the merge minus before.
    total_utility : float
        Sum of all clients' utilities right after this merge.
    """

    left: tuple
    right: tuple
    benefit: float
    total_utility: float


@dataclass
class GramContext:
    """The inputs of every utility: Gram matrix (N, N), sizes D (N,) and alpha (N,)."""

    gram: np.ndarray  # (N, N)
    sizes: np.ndarray  # (N,) float64
    alpha: np.ndarray  # (N,) float64


@dataclass
class Partition:
    """A partition of clients into groups, with HCCT's utilities.

    Returned by :func:`~hcct_lite.partition.client_partition` and
    :func:`~hcct_lite.partition.optimal_partition`; not meant to be built by hand.

    Attributes
    ----------
    groups : list of list of int
        Each group's client indices ascending; groups ordered by their smallest member.
    labels : numpy.ndarray of shape (n_clients,), int64
        ``labels[i]`` is the index in ``groups`` of client i's group.
    utilities : numpy.ndarray of shape (n_clients,), float64
        Each client's utility ``-alpha_i / D_S + cos(g_i, g_S)`` in this partition.
    merges : list of Merge, default=[]
        The greedy merges that produced it, in order (empty for ``optimal_partition``).
    n_clients, n_groups : int
        The number of clients and of groups.
    total_utility : float
        The sum of ``utilities``, the objective of problem P1.

    Examples
    --------
    >>> import numpy as np
    >>> from hcct_lite import client_partition
    >>> updates = np.array([[1.0, 0.1], [0.9, 0.2], [0.1, 1.0], [0.2, 0.9]])
    >>> part = client_partition(updates, sizes=[100, 120, 80, 90], alpha=10.0)
    >>> part.n_clients, part.n_groups, len(part.merges)
    (4, 2, 2)
    >>> [(m.left, m.right) for m in part.merges]  # the most beneficial merge first
    [((2,), (3,)), ((0,), (1,))]
    >>> part.linkage()[:, [0, 1, 3]]  # merged clusters and new size (heights omitted)
    array([[2., 3., 2.],
           [0., 1., 2.],
           [4., 5., 4.]])
    >>> part.virtual_rows  # the last row completes the tree: the greedy did not merge it
    array([2])
    """

    groups: list
    labels: np.ndarray
    utilities: np.ndarray
    merges: list = field(default_factory=list)
    _ctx: GramContext | None = field(default=None, repr=False)
    # () -> list[Merge]: the merge history continued to one group (for ``linkage``)
    _complete: object = field(default=None, repr=False)
    _tree: list | None = field(default=None, repr=False)

    @property
    def n_clients(self) -> int:
        """N, the number of clients."""
        return int(self.labels.shape[0])

    @property
    def n_groups(self) -> int:
        """The number of groups."""
        return len(self.groups)

    @property
    def total_utility(self) -> float:
        """Sum of all clients' utilities (the objective of the paper's problem P1)."""
        return float(self.utilities.sum())

    @property
    def virtual_rows(self) -> np.ndarray:
        """Indices of ``linkage()`` rows that are virtual: merges the algorithm did not make.

        They complete the tree above the last real merge, continuing the same greedy
        rule, so a dendrogram can be drawn; a plot should hide or grey them.
        """
        return np.arange(len(self.merges), max(self.n_clients - 1, 0))

    def _full_tree(self) -> list:
        if self._tree is None:
            if self.n_groups == 1 or self._complete is None:
                self._tree = list(self.merges)
            else:
                self._tree = self._complete()
        return self._tree

    def _heights(self):
        tree = self._full_tree()
        benefits = np.array([m.benefit for m in tree], dtype=np.float64)
        ref = max(float(benefits.max(initial=0.0)), 0.0)
        raw = ref - benefits
        pad = 0.02 * (float(raw.max(initial=0.0)) or 1.0)
        return np.maximum.accumulate(raw) + pad if raw.size else raw, ref + pad

    def stop_height(self) -> float:
        """Height in ``linkage()`` that corresponds to benefit 0 (the paper's stopping level).

        Real merges with positive benefit lie below it; merges at negative benefit (forced
        by ``num_groups``) and virtual rows lie at or above it.
        """
        if self._ctx is None and not self.merges:
            raise ValueError("this partition has no merge history (e.g. optimal_partition)")
        return self._heights()[1]

    def linkage(self) -> np.ndarray:
        """Return the merge history as a scipy linkage matrix, shape (N - 1, 4).

        Row k merges clusters ``Z[k, 0]`` and ``Z[k, 1]`` (ids >= N are earlier rows)
        at height ``Z[k, 2]``; ``Z[k, 3]`` is the new cluster's size. Heights are
        ``max benefit - benefit``, made monotone with a running maximum, so the most
        beneficial merges are lowest. Rows in ``virtual_rows`` complete the tree.
        """
        if self._ctx is None and not self.merges:
            raise ValueError("this partition has no merge history (e.g. optimal_partition)")
        n = self.n_clients
        tree = self._full_tree()
        heights, _ = self._heights()
        cluster_id = {i: i for i in range(n)}  # keyed by a group's smallest member
        z = np.zeros((len(tree), 4))
        for k, m in enumerate(tree):
            a, b = cluster_id.pop(m.left[0]), cluster_id.pop(m.right[0])
            z[k] = (min(a, b), max(a, b), heights[k], len(m.left) + len(m.right))
            cluster_id[min(m.left[0], m.right[0])] = n + k
        return z


def group_utilities(ctx: GramContext, group) -> np.ndarray:
    """Utilities (len(group),) of the members of one group."""
    idx = np.asarray(group)
    d, a, gram = ctx.sizes, ctx.alpha, ctx.gram
    d_group = d[idx].sum()
    if idx.size == 1:
        return np.array([1.0 - a[idx[0]] / d_group])
    sub = gram[np.ix_(idx, idx)]
    c = sub @ d[idx]  # c[i] = <g_i, sum_j D_j g_j>
    q = float(d[idx] @ c)
    norms = np.sqrt(np.diag(sub))
    if q <= (ZERO_GROUP_RTOL * float(d[idx] @ norms)) ** 2:
        cos = np.zeros(idx.size)
    else:
        cos = c / (norms * np.sqrt(q))
    return -a[idx] / d_group + cos


def make_partition(ctx: GramContext, groups, merges, complete=None) -> Partition:
    """The :class:`Partition` of ``groups`` (lists of client indices), with utilities.

    ``complete`` (optional, ``() -> list[Merge]``) continues the merge history to one group,
    so that ``Partition.linkage`` can draw the whole tree.
    """
    n = ctx.sizes.shape[0]
    labels = np.empty(n, dtype=np.int64)
    utilities = np.empty(n)
    for k, g in enumerate(groups):
        labels[g] = k
        utilities[g] = group_utilities(ctx, g)
    return Partition(
        groups=groups,
        labels=labels,
        utilities=utilities,
        merges=merges,
        _ctx=ctx,
        _complete=complete,
    )

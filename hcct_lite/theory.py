"""Theorems 1 and 2 of the paper made computable.

Theorem 1 bounds a client's test error in a group by a *sample-size* term that shrinks as
the group grows plus a *divergence* term (:func:`error_bound`); HCCT's :func:`utility` is
its computable stand-in. Theorem 2 divides its bound by :func:`learning_rate_sum`. No
training here (:mod:`hcct_lite.lessons.gradient_similarity` checks the key assumption).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "sample_term",
    "error_bound",
    "join_gain",
    "utility",
    "alpha_equivalent",
    "learning_rate_sum",
]


def _positive(name, value):
    arr = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be > 0; got {value}")
    return arr


def _in_range(name, value, low, high=np.inf):
    arr = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(arr)) or np.any(arr < low) or np.any(arr > high):
        span = f">= {low:g}" if high == np.inf else f"in [{low:g}, {high:g}]"
        raise ValueError(f"{name} must be a finite number {span}; got {value}")
    return arr


def sample_term(group_size, lipschitz=1.0, mu=1.0, delta=0.1):
    """Theorem 1's sample-size term ``4 L^2 / (delta mu D_G)``.

    Parameters
    ----------
    group_size : float > 0 or array-like
        ``D_G``, the group's number of samples; the result broadcasts over it.
    lipschitz : float > 0, default=1.0
        ``L``, the loss's Lipschitz constant.
    mu : float > 0, default=1.0
        ``mu``, the loss's strong-convexity constant.
    delta : float in (0, 1), default=0.1
        The bound holds with probability ``1 - delta``.

    Returns
    -------
    numpy.ndarray or float
        Of ``group_size``'s shape.

    Raises
    ------
    ValueError
        Naming an argument that is not finite and in its range.

    Examples
    --------
    >>> from hcct_lite.theory import sample_term
    >>> sample_term([100, 400]).round(6)
    array([0.4, 0.1])
    """
    if not np.isfinite(delta) or not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1); got {delta}")
    d = _positive("group_size", group_size)
    return 4.0 * _positive("lipschitz", lipschitz) ** 2 / (delta * _positive("mu", mu) * d)


def error_bound(group_size, divergence, lipschitz=1.0, mu=1.0, delta=0.1, lam=0.0):
    """Theorem 1's bound on a client's test error in a group of ``group_size`` samples.

    With probability 1 - delta, client i's test error in group G is at most
    ``4 L^2 / (delta mu D_G) + d_1(P_G, P_i) + lambda``.

    Parameters
    ----------
    group_size : float > 0 or array-like
        ``D_G``, the group's number of samples.
    divergence : float >= 0 or array-like
        ``d_1(P_G, P_i)``: how far the group's data diverge from the client's.
    lipschitz, mu, delta : float
        As in :func:`sample_term` (default=1.0, 1.0 and 0.1).
    lam : float >= 0, default=0.0
        ``lambda``, how far the group's and the client's labelling functions differ (the
        smaller of their expected differences under the two distributions).

    Returns
    -------
    numpy.ndarray or float
        ``sample_term + divergence + lam``, broadcast over the array arguments.

    Raises
    ------
    ValueError
        Naming the argument out of its range, as :func:`sample_term` does, or a
        ``divergence`` or ``lam`` that is negative or not finite.

    Examples
    --------
    >>> from hcct_lite.theory import error_bound
    >>> error_bound([100, 400], [0.0, 0.05]).round(6)
    array([0.4 , 0.15])
    """
    div = _in_range("divergence", divergence, 0.0)
    return sample_term(group_size, lipschitz, mu, delta) + div + _in_range("lam", lam, 0.0)


def join_gain(own_size, group_size, divergence, lipschitz=1.0, mu=1.0, delta=0.1):
    """Bound alone (own data, divergence 0) minus bound in the group: > 0 means joining helps.

    Parameters
    ----------
    own_size : float > 0 or array-like
        The client's own number of samples.
    group_size, divergence, lipschitz, mu, delta
        As in :func:`error_bound` (``lam`` cancels).

    Returns
    -------
    numpy.ndarray or float
        Broadcast over the array arguments.

    Examples
    --------
    Quadrupling the data pays for a small divergence, not a large one:

    >>> from hcct_lite.theory import join_gain
    >>> round(float(join_gain(100, 400, divergence=0.05)), 6)
    0.25
    >>> round(float(join_gain(100, 400, divergence=0.5)), 6)
    -0.2
    """
    alone = error_bound(own_size, 0.0, lipschitz, mu, delta)
    return alone - error_bound(group_size, divergence, lipschitz, mu, delta)


def alpha_equivalent(lipschitz=1.0, mu=1.0, delta=0.1):
    """The alpha for which ``alpha / D`` equals the bound's sample-size term.

    Parameters
    ----------
    lipschitz, mu, delta : float
        As in :func:`sample_term` (default=1.0, 1.0 and 0.1).

    Returns
    -------
    float
        ``4 L^2 / (delta mu)``.

    Examples
    --------
    >>> from hcct_lite.theory import alpha_equivalent
    >>> round(alpha_equivalent(), 6), round(alpha_equivalent(lipschitz=2.0), 6)
    (40.0, 160.0)
    """
    return float(sample_term(1.0, lipschitz, mu, delta))


def utility(alpha, group_size, cosine):
    """HCCT's utility ``-alpha / D_G + cos`` of a client in a group.

    Theorem 1's computable stand-in: ``alpha`` plays ``4 L^2 / (delta mu)``, and the update
    cosine stands in for minus the divergence, which the server cannot measure.

    Parameters
    ----------
    alpha : float >= 0 or array-like
        The trade-off between data volume and similarity.
    group_size : float > 0 or array-like
        ``D_G``, the group's number of samples.
    cosine : float in [-1, 1] or array-like
        The cosine between the client's update and the group's.

    Returns
    -------
    numpy.ndarray or float
        Broadcast over the array arguments.

    Raises
    ------
    ValueError
        Naming an argument out of its range or not finite.

    Examples
    --------
    >>> from hcct_lite.theory import utility
    >>> utility(10.0, [100, 400], 0.9).round(6)
    array([0.8  , 0.875])
    """
    a = _in_range("alpha", alpha, 0.0)
    return -a / _positive("group_size", group_size) + _in_range("cosine", cosine, -1.0, 1.0)


def learning_rate_sum(epochs=None, lr=0.1, decay=0.995) -> float:
    """``xi_T``: the sum of the first T epochs' learning rates (Theorem 2's divisor).

    Epochs count from 1, as the training does: epoch ``t`` trains at
    ``eta^t = lr * decay**(t - 1)``, so the first at ``lr``, and
    ``xi_T = eta^1 + ... + eta^T``. (The paper sums ``t = 0 .. T-1`` but writes Table III's
    rate as ``0.1 * 0.995^(t-1)``: an indexing clash. Here the sum has T terms, from ``lr``.)

    ``epochs`` None gives the limit as T grows: ``lr / (1 - decay)`` for ``decay < 1``
    (finite: the geometric schedule of Table III does not meet the Corollary's condition
    that the sum diverge), infinite for ``decay == 1``.

    Parameters
    ----------
    epochs : int >= 0 or None, default=None
        ``T``; ``None`` for the limit.
    lr : float > 0, default=0.1
        The first epoch's learning rate (Table III's).
    decay : float in (0, 1], default=0.995
        The learning rate's factor per epoch (Table III's).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Naming an argument out of its range.

    Examples
    --------
    >>> from hcct_lite.theory import learning_rate_sum
    >>> learning_rate_sum(1), round(learning_rate_sum(2), 6)  # 0.1, then 0.1 + 0.0995
    (0.1, 0.1995)
    >>> round(learning_rate_sum(3, lr=0.1, decay=0.5), 6)  # 0.1 + 0.05 + 0.025
    0.175
    >>> round(learning_rate_sum(), 6), learning_rate_sum(decay=1.0)
    (20.0, inf)
    """
    lr = float(_positive("lr", lr))
    if not np.isfinite(decay) or not 0 < decay <= 1:
        raise ValueError(f"decay must be in (0, 1]; got {decay}")
    if epochs is None:
        return np.inf if decay == 1 else lr / (1.0 - decay)
    if int(epochs) != epochs or epochs < 0:
        raise ValueError(f"epochs must be a whole number >= 0; got {epochs}")
    return float(lr * epochs) if decay == 1 else float(lr * (1 - decay**epochs) / (1 - decay))

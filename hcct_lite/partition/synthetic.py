"""Synthetic client updates with a known cluster structure, for demos, tests and benchmarks."""

from __future__ import annotations

import numpy as np

__all__ = ["clustered_updates"]


def clustered_updates(
    cluster_sizes,
    dim: int,
    noise: float = 0.5,
    samples=(50, 150),
    seed: int = 0,
    dtype=np.float64,
):
    """Draw client updates around random cluster directions.

    Client ``i`` of cluster ``k`` gets ``g_i = c_k + noise * e_i`` with ``c_k`` and ``e_i``
    independent standard normal vectors scaled by ``1/sqrt(dim)``, so that every update
    has norm about ``sqrt(1 + noise^2)`` and two clusters are nearly orthogonal.

    Parameters
    ----------
    cluster_sizes : sequence of int >= 1
        Number of clients in each cluster (clients are numbered cluster by cluster);
        ``n_clients`` is their sum.
    dim : int >= 1
        Update dimension M.
    noise : float >= 0, default=0.5
        Within-cluster spread; the expected cosine between two clients of one cluster is
        ``1 / (1 + noise^2)``.
    samples : tuple (low, high), default=(50, 150)
        Client sample counts ``D_i`` are drawn uniformly from ``[low, high]``, 1 <= low.
    seed : int, default=0
        Seeds every draw.
    dtype : numpy dtype, default=numpy.float64
        The updates' dtype.

    Returns
    -------
    updates : numpy.ndarray of shape (n_clients, dim)
    sizes : numpy.ndarray of shape (n_clients,), int64
    truth : numpy.ndarray of shape (n_clients,), int64
        The cluster of each client.

    Raises
    ------
    ValueError
        Naming the argument out of its range.

    Examples
    --------
    >>> from hcct_lite.partition import client_partition
    >>> from hcct_lite.partition.synthetic import clustered_updates
    >>> updates, sizes, truth = clustered_updates([2, 2], dim=50, noise=0.3, seed=0)
    >>> updates.shape, sizes.shape, truth
    ((4, 50), (4,), array([0, 0, 1, 1]))
    >>> client_partition(updates, sizes, alpha=10.0).groups
    [[0, 1], [2, 3]]
    """
    sizes_k = [int(c) for c in cluster_sizes]
    if not sizes_k or min(sizes_k) < 1:
        raise ValueError(f"cluster_sizes must be positive ints; got {cluster_sizes!r}")
    if int(dim) < 1:
        raise ValueError(f"dim must be >= 1; got {dim}")
    if noise < 0:
        raise ValueError(f"noise must be >= 0; got {noise}")
    low, high = samples
    if not 1 <= low <= high:
        raise ValueError(f"samples must satisfy 1 <= low <= high; got {samples}")
    rng = np.random.default_rng(seed)
    truth = np.repeat(np.arange(len(sizes_k)), sizes_k)
    n = truth.size
    scale = 1.0 / np.sqrt(dim)
    centers = rng.standard_normal((len(sizes_k), dim), dtype=np.float64) * scale
    updates = centers[truth]
    updates += noise * scale * rng.standard_normal((n, dim), dtype=np.float64)
    sizes = rng.integers(low, high + 1, size=n)
    return updates.astype(dtype, copy=False), sizes, truth

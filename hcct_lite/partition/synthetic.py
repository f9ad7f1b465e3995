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
    cluster_sizes : sequence of int
        Number of clients in each cluster (clients are numbered cluster by cluster).
    dim : int
        Update dimension M.
    noise : float >= 0
        Within-cluster spread; the expected cosine between two clients of one cluster is
        ``1 / (1 + noise^2)``.
    samples : (low, high)
        Client sample counts ``D_i`` are drawn uniformly from ``[low, high]``.
    seed : int

    Returns
    -------
    updates : numpy.ndarray (N, dim)
    sizes : numpy.ndarray (N,) int64
    truth : numpy.ndarray (N,) int64, the cluster of each client
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

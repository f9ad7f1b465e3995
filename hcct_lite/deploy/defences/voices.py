"""One voice: updates so alike that they count as one member.

In cross-silo training each silo trains on its own data, so no two honest silos send the
same update. Sybils that send one vector, or near copies of it, would otherwise back each
other in every rule that counts heads. The robust rules (:mod:`.robust`) hear them as one.
"""

from __future__ import annotations

import torch

__all__ = ["SAME_VOICE", "one_voice", "mean_of", "squared_distances"]

# Updates closer than this share of the longer one's norm are one voice (:func:`one_voice`):
# honest silos' nearest neighbours sit about twice as far or more (benchmarks/voices.py)
SAME_VOICE = 0.1


def squared_distances(deltas: list) -> tuple:
    """``(sq_norms, sq_dists)`` of ``deltas`` (n mappings name -> tensor): (n,) and (n, n).

    From one float64 Gram matrix on the CPU, whatever the tensors' device.
    """
    n = len(deltas)
    gram = torch.zeros(n, n, dtype=torch.float64)
    for k in deltas[0]:
        x = torch.stack([d[k] for d in deltas]).reshape(n, -1).double()
        gram += (x @ x.T).cpu()
    sq = torch.diag(gram)
    return sq, (sq[:, None] + sq[None, :] - 2 * gram).clamp(min=0)


def one_voice(deltas: list) -> list:
    """The members of ``deltas`` that speak with one voice: lists of indices, in order.

    Two deltas closer than :data:`SAME_VOICE` times the longer one's norm are one voice;
    so is any chain of such pairs. In cross-silo training no two honest silos send the
    same update: each trains on its own data. Sybils that send one vector, or near copies
    of it, would otherwise back each other in every rule that counts heads (Krum's nearest
    neighbours, a median, the history's majority). FoolsGold (Fung et al., 2020) treats
    them alike.

    Parameters
    ----------
    deltas : list of n mappings name -> tensor

    Returns
    -------
    list of lists of int
        A partition of ``range(n)``; each list ascending, the lists by their first member.
    """
    n = len(deltas)
    if n < 2:
        return [list(range(n))]
    sq, squared = squared_distances(deltas)
    dist, norm = squared.sqrt(), sq.clamp(min=0).sqrt()
    close = dist <= SAME_VOICE * torch.maximum(norm[:, None], norm[None, :])
    root = list(range(n))

    def find(i):
        while root[i] != i:
            i = root[i]
        return i

    for i in range(n):
        for j in range(i + 1, n):
            if close[i, j]:
                a, b = sorted((find(i), find(j)))
                root[b] = a
    voices = {}
    for i in range(n):
        voices.setdefault(find(i), []).append(i)
    return list(voices.values())


def mean_of(deltas: list) -> dict:
    """The mean of ``deltas`` (mappings name -> tensor); the one itself if alone."""
    return (
        deltas[0]
        if len(deltas) == 1
        else {k: sum(d[k] for d in deltas) / len(deltas) for k in deltas[0]}
    )

"""How a robust rule combines a group's clipped deltas: one function per rule.

Each rule takes the members' clipped ``deltas`` (name -> tensor), their weights ``w``
(summing 1, capped by :func:`capped_weights`) and the
:class:`~hcct_lite.deploy.defences.robust.Aggregator`, and returns the combined delta.
:data:`COMBINE` maps each ``aggregator`` name to its rule (described in :mod:`.robust`).
"""

from __future__ import annotations

import numpy as np
import torch

from .norms import norm_reference, per_step_norms
from .voices import squared_distances

__all__ = ["COMBINE", "CENTERED_CLIP_STEPS", "capped_weights"]

CENTERED_CLIP_STEPS = 3


def capped_weights(weights) -> np.ndarray:
    """(n,) ``weights`` capped at their reference (the median; of two, the smaller), summing 1.

    A robust rule gives no member more weight than a typical one: a count or an accuracy
    a silo reports buys at most the median's weight.
    """
    w = np.asarray(weights, dtype=np.float64)
    positive = w[w > 0]
    if len(positive):
        w = np.minimum(w, norm_reference(positive))
    return w / w.sum()


def _stack(deltas: list, k: str) -> torch.Tensor:
    return torch.stack([d[k] for d in deltas])


def _weights_like(w, x: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(w, dtype=x.dtype, device=x.device).view(-1, *([1] * (x.dim() - 1)))


def _mean(deltas, w, agg) -> dict:
    """``clipped-mean``: the D-weighted mean."""
    out = {}
    for k in deltas[0]:
        x = _stack(deltas, k)
        out[k] = (x * _weights_like(w, x)).sum(0)
    return out


def _trimmed_mean(deltas, w, agg) -> dict:
    """``trimmed-mean`` (Yin et al., 2018): per coordinate, D-weighted, ends dropped (>= 1 each)."""
    n = len(deltas)
    b = min(max(1, int(agg.trim_fraction * n)), (n - 1) // 2)
    out = {}
    for k in deltas[0]:
        x = _stack(deltas, k)
        values, order = x.sort(dim=0)
        ws = torch.as_tensor(w, dtype=x.dtype, device=x.device)[order]  # each value's weight
        kept, wk = values[b : n - b], ws[b : n - b]
        out[k] = (kept * wk).sum(0) / wk.sum(0)
    return out


def _median(deltas, w, agg) -> dict:
    """``median`` (Yin et al., 2018): the coordinate-wise median, unweighted."""
    n = len(deltas)
    out = {}
    for k in deltas[0]:
        values = _stack(deltas, k).sort(dim=0).values
        # halves first: two values near float32's maximum overflow when summed
        out[k] = values[(n - 1) // 2] / 2 + values[n // 2] / 2
    return out


def _centered_clip(deltas, w, agg) -> dict:
    """``centered-clip`` (Karimireddy et al., 2021): steps from zero, clipped at the median."""
    v = {k: torch.zeros_like(t) for k, t in deltas[0].items()}
    for _ in range(CENTERED_CLIP_STEPS):
        diffs = [{k: d[k] - v[k] for k in v} for d in deltas]
        norms = per_step_norms(diffs, np.ones(len(diffs)))
        tau = float(np.median(norms))
        scales = [min(1.0, tau / x) if x > 0 else 1.0 for x in norms]
        for k in v:
            v[k] = v[k] + sum(wi * si * d[k] for wi, si, d in zip(w, scales, diffs, strict=True))
    return v


def _multi_krum(deltas, w, agg) -> dict:
    """``multi-krum`` (Blanchard et al., 2017), a baseline: the mean of the ``n - f`` closest."""
    chosen = _krum_choice(deltas, (len(deltas) - 3) // 2)
    wc = np.asarray(w)[chosen]
    return _mean([deltas[i] for i in chosen], wc / wc.sum(), agg)


def _krum_mean(deltas, w, agg) -> dict:
    # of three, leaving the farthest out would leave out an honest odd one every round (a
    # silo of another domain): centred clipping instead; of more, at least one is left out
    if len(deltas) == 3:
        return _centered_clip(deltas, w, agg)
    chosen = _krum_choice(deltas, max(1, (len(deltas) - 3) // 2))
    return _mean([deltas[i] for i in chosen], capped_weights(np.asarray(w)[chosen]), agg)


def _krum_choice(deltas, f: int) -> np.ndarray:
    """The indices of the ``n - f`` deltas closest to the others (Blanchard et al., 2017).

    A delta's score is its summed squared distance to its nearest ``max(1, n - f - 2)``
    others; the ``n - f`` lowest scores are kept, in order of score.
    """
    n = len(deltas)
    dist = squared_distances(deltas)[1]
    near = max(1, n - f - 2)
    scores = [float(dist[i][torch.arange(n) != i].sort().values[:near].sum()) for i in range(n)]
    return np.argsort(scores, kind="stable")[: n - f]


COMBINE = {
    "clipped-mean": _mean,
    "trimmed-mean": _trimmed_mean,
    "median": _median,
    "centered-clip": _centered_clip,
    "multi-krum": _multi_krum,
    "krum-mean": _krum_mean,
}

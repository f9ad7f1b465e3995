"""HCCT-E: measure client similarity on one layer only (the paper's Section IV-C).

After the first epoch the server picks the layer whose client updates vary most
relative to their mean, ``l* = argmax_l Var(g_1[l], ..., g_N[l]) / Mean(...)``, and
computes every cosine on that layer alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .updates import stack_mapping_updates

__all__ = ["layer_scores", "select_layer", "layer_of"]


def layer_of(name: str, by: str = "module") -> str:
    """The layer an entry belongs to: ``"fc1.weight" -> "fc1"`` (``by="module"``)."""
    if by == "entry":
        return name
    if by != "module":
        raise ValueError(f"by must be 'module' or 'entry'; got {by!r}")
    return name.rsplit(".", 1)[0] if "." in name else name


def layer_scores(updates_by_layer: Sequence[Mapping], by: str = "module") -> dict:
    """Relative variance across clients of each layer's updates.

    Parameters
    ----------
    updates_by_layer : sequence of n_clients mappings name -> tensor or array
        Each client's update, entry by entry (e.g. ``weight`` and ``bias`` of each layer).
    by : {"module", "entry"}, default="module"
        ``"module"`` pools the entries of one module (``fc1.weight`` and ``fc1.bias``).

    Returns
    -------
    dict layer -> float
        ``mean over coordinates of the variance across clients / |mean of all values|``.
        The paper writes Var/Mean; the mean of an update can be negative, so its absolute
        value is used. A layer whose mean is exactly 0 scores ``inf`` if it varies and 0
        if it does not.
    """
    blocks = stack_mapping_updates(list(updates_by_layer))
    pooled: dict = {}
    for name, block in blocks.items():
        arr = block.detach().cpu().double().numpy() if hasattr(block, "detach") else block
        pooled.setdefault(layer_of(name, by), []).append(np.asarray(arr, dtype=np.float64))
    scores = {}
    for layer, parts in pooled.items():
        x = np.concatenate(parts, axis=1)  # (N, m_layer)
        if not np.isfinite(x).all():
            raise ValueError(f"layer {layer!r}: updates contain NaN or Inf")
        var = float(x.var(axis=0).mean())
        mean = abs(float(x.mean()))
        if mean > 0.0:
            scores[layer] = var / mean
        else:
            scores[layer] = float("inf") if var > 0.0 else 0.0
    return scores


def select_layer(updates_by_layer: Sequence[Mapping], by: str = "module") -> str:
    """Return HCCT-E's layer: the one whose updates vary most across clients.

    Parameters
    ----------
    updates_by_layer : sequence of n_clients mappings name -> tensor or array
        Each client's update entry by entry (e.g. ``fc1.weight`` and ``fc1.bias``); every
        client's keys and shapes the same.
    by : {"module", "entry"}, default="module"
        ``"module"`` pools the entries of one module (``fc1.weight`` and ``fc1.bias`` make
        layer ``fc1``); ``"entry"`` scores each entry alone.

    Returns
    -------
    str
        The layer with the largest :func:`layer_scores` (the first in key order on ties).

    Raises
    ------
    ValueError
        If ``by`` is neither value, the mappings' keys or shapes differ, or an update
        holds NaN or Inf.

    Examples
    --------
    Two clients agree on ``fc2`` and disagree on ``fc1``'s weight:

    >>> import torch
    >>> from hcct_lite import select_layer
    >>> a = {"fc1.weight": torch.tensor([[1.0, 0.0]]), "fc1.bias": torch.tensor([0.1]),
    ...      "fc2.weight": torch.tensor([[1.0, 1.0]])}
    >>> b = {"fc1.weight": torch.tensor([[-1.0, 0.0]]), "fc1.bias": torch.tensor([0.1]),
    ...      "fc2.weight": torch.tensor([[1.0, 1.0]])}
    >>> select_layer([a, b])
    'fc1'
    >>> select_layer([a, b], by="entry")
    'fc1.weight'
    """
    scores = layer_scores(updates_by_layer, by)
    names = list(scores)
    return names[int(np.argmax([scores[k] for k in names]))]

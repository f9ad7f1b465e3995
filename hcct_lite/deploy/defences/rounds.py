"""What a robust rule reads of the whole round, and the norm band it holds each update to.

A group's own members are a poor judge of how long an honest update is. Of two, the
shorter sets the clip, so a silo that sends almost nothing (its own update x 10^-3) cuts
its partner to almost nothing too. The round's replies, across every group, are an honest
majority's: :class:`RoundView` carries their norms, and :func:`banded` holds each update
between the round's reference and ``clip_factor`` times it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .norms import l2_norm, norm_bound, per_step_norms
from .voices import mean_of, one_voice

__all__ = ["RoundView", "round_reference", "round_view", "delta_norm", "banded", "SILENT"]

# A delta shorter than this share of its band's floor says nothing (it is not raised 10^4
# times, which would overflow half precision and turn zeros into NaN): it counts as idle
SILENT = 1e-4


@dataclass(frozen=True)
class RoundView:
    """The round a robust rule aggregates (:func:`round_view`).

    Attributes
    ----------
    centre : mapping name -> tensor, or None; :func:`round_reference` of the round's updates
    norms : dict client -> float, the Euclidean norm of each accepted reply's delta (its
        trained model minus its start, every floating entry: batch-norm buffers too);
        replies that said nothing, or whose start is unknown, are not held
    steps : dict client -> int, each one's local SGD steps
    """

    centre: dict | None
    norms: dict
    steps: dict


def round_reference(updates: list):
    """The coordinate-wise median of a round's accepted ``updates`` as a delta, or None.

    ``updates`` are mappings name -> tensor of ``(w_start - w_end) / lr``; the result maps
    each name to minus their median (the direction the models moved). Updates of one voice
    (:func:`one_voice`) count once, as their mean. None for fewer than three voices: no
    majority.
    """
    if len(updates) < 3:
        return None
    floats = [{k: u[k].float() for k in updates[0]} for u in updates]
    voices = [mean_of([floats[i] for i in v]) for v in one_voice(floats)]
    if len(voices) < 3:
        return None
    return {k: -torch.stack([u[k] for u in voices]).median(dim=0).values for k in updates[0]}


def delta_norm(state: dict, start: dict) -> float:
    """The Euclidean norm of ``state - start`` over their floating entries, in float64."""
    return l2_norm(state[k] - v for k, v in start.items() if v.is_floating_point())


def round_view(updates: dict, norms: dict, steps) -> RoundView | None:
    """The :class:`RoundView` of a round, or None for fewer than three replies that moved.

    Replies that said nothing (a delta of at most :data:`SILENT` times the median norm,
    such as a silo's that sent back its start) are left out of it.
    ``updates`` maps each client of the round's accepted replies to its update (name ->
    tensor), ``norms`` each of them (or those whose start is known) to its
    :func:`delta_norm`; ``steps`` (N,) every client's local SGD steps
    (:func:`~.norms.local_steps`).
    """
    positive = [n for n in norms.values() if n > 0]
    quiet = SILENT * float(np.median(positive)) if positive else 0.0
    idle = {i for i, n in norms.items() if n <= quiet}  # said nothing: no evidence
    norms = {int(i): float(n) for i, n in norms.items() if i not in idle}
    if len(norms) < 3:
        return None
    return RoundView(
        round_reference([u for i, u in updates.items() if i not in idle]),
        norms,
        {i: int(steps[i]) for i in norms},
    )


def banded(deltas: list, steps, clip_factor: float, ids=None, view=None) -> list:
    """Each delta scaled into its band, between a reference norm and ``clip_factor`` times it.

    The references are :func:`~.norms.norm_bound`'s: a median (of two, the smaller), as it
    stands and per local step. They come from the round where ``view`` holds every one of
    ``ids``, else from the ``deltas`` that moved. A delta's top is ``clip_factor *
    max(reference, per-step reference * its steps)``. Its floor is ``min(reference,
    per-step reference * its steps)``. An honest delta is rarely outside. One that sends
    almost nothing then speaks with an honest length, in its own direction. One under
    :data:`SILENT` times its floor, too short to raise, is returned as zero: it said nothing.

    Parameters
    ----------
    deltas : list of n mappings name -> tensor, over every floating entry
    steps : (n,) each one's local SGD steps
    clip_factor : float >= 1
    ids : n client ids, or None (the deltas' own references)
    view : RoundView, or None (the deltas' own references)

    Returns
    -------
    list of n mappings name -> tensor (the same objects where nothing changes)
    """
    steps = np.asarray(steps, dtype=np.float64)
    norms = per_step_norms(deltas, steps) * steps  # rounded as stored results were
    if view is not None and ids is not None and all(i in view.norms for i in ids):
        round_steps = [view.steps[c] for c in view.norms]
        bound = norm_bound(list(view.norms.values()), round_steps, 1.0)
    elif (norms > 0).any():
        bound = norm_bound(norms[norms > 0], steps[norms > 0], 1.0)
    else:
        return deltas
    per_step = bound.per_step_reference * steps
    tops = clip_factor * np.maximum(bound.reference, per_step)
    floors = np.minimum(bound.reference, per_step)
    out = []
    for d, norm, top, floor in zip(deltas, norms, tops, floors, strict=True):
        if norm <= SILENT * floor:
            out.append(d if norm == 0 else {k: torch.zeros_like(v) for k, v in d.items()})
            continue
        scale = float(np.clip(norm, floor, top) / norm)  # at most 1 / SILENT: finite in half
        out.append(d if scale == 1.0 else {k: v * scale for k, v in d.items()})
    return out

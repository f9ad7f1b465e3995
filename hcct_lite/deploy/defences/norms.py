"""The one norm bound: how long a round's updates may be before a defence acts.

:func:`norm_bound` is the rule both defences share. The norm rule
(:class:`~hcct_lite.deploy.defences.layer.NormRule`) refuses an update longer than its
limit; the robust aggregators hold each delta in a band of it
(:func:`~hcct_lite.deploy.defences.rounds.banded`). :func:`local_steps` and the norms it
reads live here too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

__all__ = [
    "local_steps",
    "l2_norm",
    "norm_reference",
    "NormBound",
    "norm_bound",
    "per_step_norms",
    "update_norm",
]


def local_steps(sizes, batch_size: int, local_epochs: int) -> np.ndarray:
    """(N,) local SGD steps a silo of D_i samples takes in one epoch: ``E * ceil(D_i / B)``."""
    d = np.asarray(sizes, dtype=np.int64)
    return local_epochs * np.maximum(1, -(-d // int(batch_size)))


def l2_norm(tensors) -> float:
    """The Euclidean norm of ``tensors`` taken as one vector, in float64 (1e37 entries square)."""
    return math.sqrt(sum(float(v.double().pow(2).sum()) for v in tensors))


def norm_reference(norms) -> float:
    """The median of three or more norms; of fewer, the smallest.

    ``norms`` is a mapping (its values count) or a sequence. Of two replies the median is
    their mean, which a reply 10^6 times longer than the other makes its own; no majority
    can be told from two, so the shorter one is the reference (and either silo can have
    the other refused by replying with almost nothing).
    """
    values = list(norms.values()) if isinstance(norms, Mapping) else list(norms)
    return float(np.median(values)) if len(values) >= 3 else float(min(values))


@dataclass(frozen=True)
class NormBound:
    """A round's norm bound (:func:`norm_bound`).

    Attributes
    ----------
    reference : float, the norms' reference (:func:`norm_reference`)
    per_step_reference : float, the reference of the norms per local step
    basis : str, what the references are: ``"median"``, or ``"smaller"`` of two
    limits : (n,) each update's bound, ``factor * max(reference, per_step_reference * steps)``
    """

    reference: float
    per_step_reference: float
    basis: str
    limits: np.ndarray


def norm_bound(norms, steps, factor: float) -> NormBound:
    """How long each of a round's updates may be: ``factor`` x the larger of two references.

    The one rule both defences use: :class:`~hcct_lite.training.replies.ReplyScreen`
    refuses a reply to be averaged whose update is longer than its limit (``factor`` is the
    run's ``norm_limit``), and :func:`~hcct_lite.deploy.defences.rounds.banded` holds each
    delta between its references and ``clip_factor`` times them. One silo's long update
    moves an average wherever it likes; the round's updates themselves say how long an
    honest one is.

    The references are :func:`norm_reference`'s (the median, so an honest majority's; of
    two the shorter) of the ``norms`` as they stand and of the norms per local SGD step;
    an update's limit is ``factor * max(reference, per_step_reference * steps_i)``. A silo
    with more data takes more steps and sends a longer honest update: the per-step
    reference times its own steps keeps it from being refused or cut short; a silo with
    few steps sends a longer update per step: the plain reference keeps it. Every limit is
    at least ``factor`` times the median, so with ``factor >= 2`` fewer than half of three
    or more updates can exceed their limits: every such update lies above the median, and
    in an even round the upper middle value cannot exceed twice the mean of the two middle
    values. Of two, at most the longer one.

    Parameters
    ----------
    norms : (n,) the updates' Euclidean norms, n >= 1
    steps : (n,) each update's local SGD steps (:func:`local_steps`)
    factor : float, the multiple of the reference allowed

    Returns
    -------
    NormBound, with ``limits`` (n,) in the order of ``norms``
    """
    norms = np.asarray(norms, dtype=np.float64)
    steps = np.asarray(steps, dtype=np.float64)
    ref, ref_step = norm_reference(norms), norm_reference(norms / steps)
    limits = np.array([factor * max(ref, ref_step * s) for s in steps], dtype=np.float64)
    return NormBound(ref, ref_step, "median" if len(norms) >= 3 else "smaller", limits)


def per_step_norms(deltas: list, steps) -> np.ndarray:
    """(n,) each delta's Euclidean norm over its floating entries, divided by its steps."""
    norms = [l2_norm(v for v in d.values() if v.is_floating_point()) for d in deltas]
    return np.asarray(norms) / np.asarray(steps, dtype=np.float64)


def update_norm(update) -> float:
    """The Euclidean norm of an update (name -> tensor), in float64 (1e37 entries square)."""
    import torch

    flat = getattr(update, "flat", None)
    return l2_norm([flat] if isinstance(flat, torch.Tensor) else update.values())

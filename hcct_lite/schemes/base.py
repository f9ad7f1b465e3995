"""Server-side schemes: who trains with whom each epoch, and how models are averaged.

A scheme sees only what clients send (sizes, updates, losses, accuracies), never data.
Each epoch the engine asks it for a :class:`Plan` (the model each client starts from and
the groups, for the record), runs local training, and hands it the clients' results; the
scheme returns the model each client holds (and is evaluated with) after the epoch.

This module has the contracts every scheme follows; :mod:`~hcct_lite.schemes.hcct` and
:mod:`~hcct_lite.schemes.baselines` have the schemes, :mod:`~hcct_lite.schemes.registry`
builds one by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

__all__ = ["Plan", "ServerView", "Scheme", "GroupScheme", "weighted_average"]


@dataclass
class Plan:
    """One epoch's plan: ``start[i]`` is the state client i trains from; ``groups`` is a
    list of client-index lists (disjoint except for FLSC's soft clusters)."""

    start: dict
    groups: list
    info: dict = field(default_factory=dict)


@dataclass
class ServerView:
    """What the server knows and can ask, handed to a scheme by the engine.

    ``probe(i, state)`` asks client i for ``(loss, accuracy)`` of ``state`` on its own
    training data; ``fresh_state(k)`` is a new random initialisation (seeded by k);
    ``train(starts, lr, epoch)`` asks clients for local training outside an epoch.
    """

    cfg: object
    active: list
    new: set
    sizes: np.ndarray
    states: dict
    updates: dict
    init_state: dict
    head: list
    probe: object
    fresh_state: object
    absent: set = field(default_factory=set)  # did not answer last epoch
    # train(starts, lr, epoch) -> {i: LocalResult}: local training outside the epoch loop
    # (MAXFL's one-off reference models)
    train: object = None
    trainable: list = field(default_factory=list)  # names of the trainable state entries


def weighted_average(states: list, weights) -> dict:
    """Weighted average of state dicts; weights are normalised to sum 1.

    Floating entries (parameters, batch-norm running statistics) are averaged; integer
    entries (batch counters) get the rounded weighted average.
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or len(w) != len(states) or not np.isfinite(w).all() or (w < 0).any():
        raise ValueError(f"weights must be {len(states)} finite numbers >= 0; got {weights}")
    if w.sum() <= 0:
        raise ValueError("weights sum to 0")
    w = w / w.sum()
    if len(states) == 1:
        return {k: v.clone() for k, v in states[0].items()}
    out = {}
    for k, v0 in states[0].items():
        # Floating entries accumulate in their own dtype (float32 models: 14M-entry states
        # average fast enough); integer counters go through float64 and are rounded.
        dtype = v0.dtype if v0.is_floating_point() else torch.float64
        acc = torch.zeros_like(v0, dtype=dtype)
        for wi, s in zip(w, states, strict=True):
            acc.add_(s[k].to(dtype), alpha=float(wi))
        out[k] = acc if v0.is_floating_point() else acc.round().to(v0.dtype)
    return out


class Scheme:
    """Base class: subclasses implement :meth:`plan` and :meth:`aggregate`."""

    name = "scheme"

    def setup(self, server: ServerView) -> None:  # noqa: B027 - optional hook
        """Called once before epoch 0."""

    def plan(self, t: int, server: ServerView) -> Plan:
        raise NotImplementedError

    def aggregate(self, t: int, server: ServerView, plan: Plan, results: dict) -> dict:
        raise NotImplementedError


class GroupScheme(Scheme):
    """Disjoint groups; each group's model is the weighted average of its members' models.

    As in Algorithm 1, a group starts from the D-weighted average of its members' current
    models, members train locally, and the group model becomes the weighted average of
    their trained models, which every member then holds.
    """

    keep_head = False

    def groups(self, t: int, server: ServerView) -> list:
        raise NotImplementedError

    def weights(self, members, server: ServerView, results: dict) -> np.ndarray:
        return server.sizes[members].astype(np.float64)

    def plan(self, t, server):
        if t == 0 and server.cfg.authors_round0:
            groups = [list(server.active)]  # the authors' code: a FedAvg round first
        else:
            groups = self.groups(t, server)
        start = {}
        for g in groups:
            model = weighted_average([server.states[i] for i in g], server.sizes[g])
            for i in g:
                start[i] = self._personal(model, server.states[i], server.head)
        return Plan(start, groups, getattr(self, "info", {}))

    def aggregate(self, t, server, plan, results):
        out = {}
        for g in plan.groups:
            model = weighted_average(
                [results[i].state for i in g], self.weights(g, server, results)
            )
            for i in g:
                out[i] = self._personal(model, results[i].state, server.head)
        return out

    def _personal(self, shared: dict, own: dict, head: list) -> dict:
        if not self.keep_head:
            return shared
        personal = dict(shared)
        for k in head:
            personal[k] = own[k].clone()
        return personal

"""Server-side schemes: who trains with whom each epoch, and how models are averaged.

A scheme sees only what clients send (sizes, updates, losses, accuracies), never data.
Each epoch the engine asks it for a :class:`Plan` (the model each client starts from and
the groups, for the record), runs local training, and hands it the clients' results; the
scheme returns the model each client holds (and is evaluated with) after the epoch.

This module has the partition-based schemes (Independent, Global, FedFA and the HCCT
family); :mod:`hcct_lite.baselines` has MAXFL, IFCA and FLSC.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .partition import client_partition, select_layer

__all__ = ["Plan", "ServerView", "Scheme", "GroupScheme", "weighted_average", "make_scheme"]


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


class Independent(GroupScheme):
    name = "independent"

    def groups(self, t, server):
        return [[i] for i in server.active]


class Global(GroupScheme):
    name = "global"

    def groups(self, t, server):
        return [list(server.active)]


class FedFA(Global):
    """Global training with aggregation weights ``-log2 A_i`` (A_i: training accuracy).

    Accuracies are clipped to [1e-3, 1 - 1e-3] so that a perfect client keeps a small
    positive weight instead of a zero one (and a zero accuracy no infinite weight).
    """

    name = "fedfa"

    def weights(self, members, server, results):
        acc = np.clip([results[i].train_acc for i in members], 1e-3, 1 - 1e-3)
        return -np.log2(acc)


class HCCT(GroupScheme):
    """HCCT: epoch 0 singletons (Algorithm 1); then :func:`client_partition` on the
    previous epoch's updates. Clients without an update yet (newcomers) are singletons."""

    name = "hcct"

    def __init__(self):
        self.info = {}

    def similarity_updates(self, server, clients):
        return [server.updates[i] for i in clients]

    def groups(self, t, server):
        known = [
            i
            for i in server.active
            if i in server.updates and i not in server.new and i not in server.absent
        ]
        if t == 0 or len(known) == 0:
            self.info = {}
            return [[i] for i in server.active]
        k = server.cfg.fixed_groups
        p = client_partition(
            self.similarity_updates(server, known),
            server.sizes[known],
            alpha=server.cfg.alpha,
            num_groups=None if k is None else min(k, len(known)),
        )
        groups = [[known[j] for j in g] for g in p.groups]
        groups += [[i] for i in server.active if i not in known]
        groups.sort(key=lambda g: g[0])
        self.info = {"total_utility": p.total_utility}
        return groups


class HCCTE(HCCT):
    """HCCT-E: similarity on the one layer with the largest relative variance, chosen once
    from the first updates the server sees."""

    name = "hcct-e"

    def __init__(self):
        super().__init__()
        self.keys = None

    def similarity_updates(self, server, clients):
        ups = [server.updates[i] for i in clients]
        if self.keys is None:
            layer = select_layer(ups)
            self.keys = [k for k in ups[0] if k == layer or k.startswith(layer + ".")]
            self.layer = layer
        return [{k: u[k] for k in self.keys} for u in ups]

    def groups(self, t, server):
        groups = super().groups(t, server)
        if self.keys is not None:
            self.info["layer"] = self.layer
        return groups


class HCCTP(HCCT):
    """HCCT-P: HCCT whose classifier (the last linear layer) stays with each client."""

    name = "hcct-p"
    keep_head = True


class Fixed(GroupScheme):
    """A partition given by hand (``partition``), kept for the whole run (Table 1)."""

    name = "fixed"

    def groups(self, t, server):
        return [
            [i for i in g if i in server.active]
            for g in server.cfg.partition
            if any(i in server.active for i in g)
        ]


def make_scheme(name: str) -> Scheme:
    """A fresh scheme object by name (see :data:`hcct_lite.tasks.SCHEMES`)."""
    from .baselines import FLSC, IFCA, MAXFL

    schemes = (Independent, Global, FedFA, HCCT, HCCTE, HCCTP, MAXFL, IFCA, FLSC, Fixed)
    table = {c.name: c for c in schemes}
    if name not in table:
        raise ValueError(f"unknown scheme {name!r}; choose from {sorted(table)}")
    return table[name]()

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

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np
import torch
from typing_extensions import override

__all__ = ["Plan", "ServerView", "Scheme", "GroupScheme", "weighted_average"]


@dataclass
class Plan:
    """One epoch's plan, made by a scheme before local training.

    Attributes
    ----------
    start : dict client -> state dict
        The model each client trains from (a client absent from it sits the epoch out).
    groups : list of lists of int
        Who trains with whom, for the record and for aggregation (disjoint except for
        FLSC's soft clusters).
    info : dict
        What the engine records in the epoch's history (JSON-able: e.g. ``total_utility``,
        ``layer``, ``participants``).
    per_client : dict client -> object
        What the scheme needs per client at aggregation (e.g. the clusters it chose).
    """

    start: dict
    groups: list
    info: dict = field(default_factory=dict)
    per_client: dict = field(default_factory=dict)

    def without(self, missing) -> Plan:
        """Restrict the plan to the clients that answered.

        ``missing`` is dropped from ``start``, every group (empty groups vanish),
        ``per_client`` and every list of client indices in ``info``. The engine calls this
        once, for every scheme.
        """
        missing = set(missing)
        if not missing:
            return self

        def keep(v):
            if isinstance(v, list) and all(isinstance(i, int) for i in v):
                return [i for i in v if i not in missing]
            return v

        groups = [[i for i in g if i not in missing] for g in self.groups]
        return Plan(
            {i: s for i, s in self.start.items() if i not in missing},
            [g for g in groups if g],
            {k: keep(v) for k, v in self.info.items()},
            {i: v for i, v in self.per_client.items() if i not in missing},
        )


def _read_only(mapping) -> MappingProxyType:
    return mapping if isinstance(mapping, MappingProxyType) else MappingProxyType(mapping)


@dataclass(frozen=True, kw_only=True, eq=False)  # eq: a view is itself, not its values
class ServerView:
    """What the server knows and can ask, handed to a scheme by the engine: read only.

    The engine builds a view for :meth:`Scheme.setup` and one each epoch (for
    :meth:`Scheme.plan` and :meth:`Scheme.aggregate`); the epoch itself is their argument
    ``t``. Assigning a field raises ``FrozenInstanceError``, and an item of ``states``,
    ``updates`` or ``init_state`` ``TypeError``: what a scheme needs to remember it keeps on
    itself. The engine's own state (the dicts behind ``states`` and ``updates``) is apart.

    Attributes
    ----------
    sizes : numpy.ndarray (N,) int, not writeable
        D_i of every client.
    init_state : mapping name -> tensor
        The common initial model (every newcomer's).
    head : tuple of str
        State entries of the classifier (HCCT-P keeps them local).
    trainable : tuple of str
        Names of the trainable state entries.
    probe : callable ``(i, state) -> (loss, accuracy in [0, 1])``, or None (not offered)
        Evaluates ``state`` on client i's training data (None: no answer, or an answer
        refused and recorded at this view's epoch).
    fresh_state : callable ``k -> state``, or None (not offered)
        A new random initialisation, seeded by k.
    train : callable ``(starts, lr, epoch) -> {i: LocalResult}``, or None (not offered)
        Local training outside an epoch (MAXFL's one-off reference models); its replies
        pass the same screen as the epoch's, recorded at this view's epoch.
    active : tuple of int
        Clients taking part this epoch, in index order.
    new, absent : frozenset of int
        Those arriving this epoch, and those that did not answer last epoch.
    states, updates : mapping client -> state dict (read only)
        Each client's current model and its last accepted update: windows onto the
        engine's records, which show what the engine has recorded so far (at
        :meth:`Scheme.aggregate`, this epoch's updates).
    """

    sizes: np.ndarray
    init_state: Mapping
    head: tuple
    trainable: tuple
    probe: Callable | None = None
    fresh_state: Callable | None = None
    train: Callable | None = None
    active: tuple = ()
    new: frozenset = frozenset()
    absent: frozenset = frozenset()
    states: Mapping = field(default_factory=dict)
    updates: Mapping = field(default_factory=dict)

    def __post_init__(self):
        sizes = np.asarray(self.sizes).view()  # the engine's array stays its own
        sizes.flags.writeable = False
        fixed = {
            "sizes": sizes,
            "head": tuple(self.head),
            "trainable": tuple(self.trainable),
            "active": tuple(self.active),
            "new": frozenset(self.new),
            "absent": frozenset(self.absent),
        }
        for name in ("init_state", "states", "updates"):
            fixed[name] = _read_only(getattr(self, name))
        for name, value in fixed.items():  # a frozen dataclass sets its fields this way
            object.__setattr__(self, name, value)


def weighted_average(states: list, weights) -> dict:
    """Weighted average of state dicts; weights are normalised to sum 1.

    Floating entries (parameters, batch-norm running statistics) are averaged; integer
    entries (batch counters) get the rounded weighted average.
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or len(w) != len(states) or not np.isfinite(w).all() or (w < 0).any():
        raise ValueError(f"weights must be {len(states)} finite numbers >= 0; got {weights}")
    if len(states) == 1:  # any weight, 0 included (a silo that never enrolled)
        return {k: v.clone() for k, v in states[0].items()}
    if w.sum() <= 0:
        raise ValueError("weights sum to 0")
    w = w / w.sum()
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
    """Base class: subclasses implement :meth:`plan` and :meth:`aggregate`.

    A scheme is configured by its constructor. ``keep_head`` says whether clients keep
    their classifier local (HCCT-P); a Flower ClientApp reads it.
    """

    name = "scheme"
    keep_head = False
    # bumped on purpose when a change alters what this scheme computes (the canary test
    # says when): stored results of the older version are then rerun
    compute_version = 1
    # how members' models become one: None is FedAvg, exactly weighted_average; the
    # deployment's defence layer sets a robust rule here where a run asks for one
    aggregator = None
    # whether a model trained by one client alone may be taken up by others later (cluster
    # models), and whether a loner's model is carried into the group it joins (HCCT): the
    # deployment's norm rule then judges a loner's reply too (Defence.judges_loners)
    models_shared = False
    loners_rejoin = False

    def average(
        self, states, starts, weights, sizes, members, *, epoch, reference=None, model=None
    ) -> dict:
        """One model from members' trained ``states``: FedAvg, or the run's aggregator.

        ``starts`` (n,) the models they trained from, ``weights`` (n,) aggregation
        weights, ``sizes`` (n,) their D_i, ``members`` their client ids; ``epoch`` and
        ``reference`` (:meth:`dispute_reference`) the round being aggregated. ``model``: a
        hashable name of the model they trained from (a cluster's, the global one, a
        group's), or None; a robust aggregator remembers how each named model moved
        (:meth:`~hcct_lite.deploy.defences.robust.Aggregator.combine_named`).
        """
        if self.aggregator is None:
            return weighted_average(states, weights)
        return self.aggregator.combine_named(
            states, starts, weights, sizes, members, epoch=epoch, reference=reference, model=model
        )

    def dispute_reference(self, results: dict, starts: dict, sizes):
        """The round's reference for the aggregator, from its accepted ``results``, or None.

        ``results`` maps client -> LocalResult (every reply the engine accepted this
        epoch), ``starts`` client -> the model it trained from, ``sizes`` (N,) every
        client's D_i; None under FedAvg (no aggregator, or ``mean``).
        """
        if self.aggregator is None:
            return None
        return self.aggregator.dispute_reference(results, starts, sizes)

    def setup(self, server: ServerView) -> None:  # noqa: B027 - optional hook
        """Called once before epoch 0."""

    def local_objective(self):
        """What this scheme adds to each client's local step, or None (plain SGD).

        Return a :class:`~hcct_lite.training.local.LocalObjective` (FedProx's proximal
        term, say): every client of the scheme's runs trains with it, wherever it runs.
        """
        return None

    def plan(self, t: int, server: ServerView) -> Plan:
        """Who trains from which model in epoch ``t``."""
        raise NotImplementedError

    def aggregate(self, t: int, server: ServerView, plan: Plan, results: dict) -> dict:
        """The model each client holds after epoch ``t``, client -> state dict.

        ``plan`` and ``results`` (client -> LocalResult) cover the same clients: the
        engine has dropped those that did not answer. A client left out keeps its model.
        """
        raise NotImplementedError


class GroupScheme(Scheme):
    """Disjoint groups; each group's model is the weighted average of its members' models.

    As in Algorithm 1, a group starts from the D-weighted average of its members' current
    models, members train locally, and the group model becomes the weighted average of
    their trained models, which every member then holds.
    """

    def __init__(self, authors_round0: bool = False):
        self.authors_round0 = authors_round0
        self.info = {}

    def groups(self, t: int, server: ServerView) -> list:
        """The disjoint groups of epoch ``t``: a list of lists of active clients."""
        raise NotImplementedError

    def weights(self, members, server: ServerView, results: dict) -> np.ndarray:
        """Aggregation weights of ``members`` (default: their sample counts D_i)."""
        return server.sizes[members].astype(np.float64)

    @override
    def plan(self, t, server):
        if t == 0 and self.authors_round0:
            groups = [list(server.active)]  # the authors' code: a FedAvg round first
        else:
            groups = self.groups(t, server)
        start = {}
        for g in groups:
            # a member missing last epoch holds a stale model: it receives the group's
            # model but does not pull it back (all missing: their own average)
            present = [i for i in g if i not in server.absent] or g
            model = weighted_average([server.states[i] for i in present], server.sizes[present])
            for i in g:
                start[i] = self._personal(model, server.states[i], server.head)
        return Plan(start, groups, dict(self.info))

    @override
    def aggregate(self, t, server, plan, results):
        out, reference = {}, self.dispute_reference(results, plan.start, server.sizes)
        for g in plan.groups:
            model = self.average(
                [results[i].state for i in g],
                [plan.start.get(i) for i in g],
                self.weights(g, server, results),
                server.sizes[g],
                g,
                epoch=t,
                reference=reference,
                model=frozenset(g),
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

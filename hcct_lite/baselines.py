"""Baselines that keep server-side models: MAXFL, IFCA and FLSC (the paper's Section VII-A)."""

from __future__ import annotations

import numpy as np

from .schemes import Plan, Scheme, weighted_average

__all__ = ["MAXFL", "IFCA", "FLSC"]


class MAXFL(Scheme):
    """A client trains the global model only when that model beats its own on its data.

    The server keeps one global model. Epoch 0 every client trains alone from the common
    initialisation, and the global model takes its first FedAvg step from those models
    (D-weighted average). From epoch 1, client i joins iff the global model's training
    loss on its data is strictly below that of the model it holds; members train from the
    global model and it becomes their D-weighted average; the others train their own.
    """

    name = "maxfl"

    def setup(self, server):
        self.global_state = None

    def plan(self, t, server):
        if self.global_state is None:
            return Plan(
                {i: server.states[i] for i in server.active},
                [[i] for i in server.active],
                {"participants": []},
            )
        joined = []
        for i in server.active:
            loss_global, _ = server.probe(i, self.global_state)
            loss_own, _ = server.probe(i, server.states[i])
            if loss_global < loss_own:
                joined.append(i)
        start = {i: (self.global_state if i in joined else server.states[i]) for i in server.active}
        groups = ([joined] if joined else []) + [[i] for i in server.active if i not in joined]
        groups.sort(key=lambda g: g[0])
        return Plan(start, groups, {"participants": joined})

    def aggregate(self, t, server, plan, results):
        out = {i: results[i].state for i in results}
        joined = plan.info["participants"]
        if self.global_state is None:
            members = sorted(results)
            self.global_state = weighted_average(
                [results[i].state for i in members], server.sizes[members]
            )
        elif joined:
            self.global_state = weighted_average(
                [results[i].state for i in joined], server.sizes[joined]
            )
            for i in joined:
                out[i] = self.global_state
        return out


class _ClusterModels(Scheme):
    """K server-side cluster models; clients pick by their training loss on each."""

    def setup(self, server):
        k = server.cfg.cluster_models
        # Distinct initialisations break the symmetry between cluster models (with one
        # shared initialisation every client picks the same model and this is FedAvg).
        self.models = [server.init_state] + [server.fresh_state(j) for j in range(1, k)]

    def losses(self, server, i):
        return np.array([server.probe(i, m)[0] for m in self.models])

    def chosen(self, server) -> dict:
        raise NotImplementedError

    def record(self, choice):
        k = len(self.models)
        groups = [sorted(i for i, c in choice.items() if j in c) for j in range(k)]
        return sorted((g for g in groups if g), key=lambda g: (g[0], len(g)))

    def aggregate(self, t, server, plan, results):
        choice = plan.info["clusters"]
        for j in range(len(self.models)):
            members = sorted(i for i, c in choice.items() if j in c)
            if members:
                self.models[j] = weighted_average(
                    [results[i].state for i in members], server.sizes[members]
                )
        return {i: self.client_model(c) for i, c in choice.items()}


class IFCA(_ClusterModels):
    """IFCA: each client trains the cluster model with the lowest loss on its data."""

    name = "ifca"

    def plan(self, t, server):
        choice = {i: [int(np.argmin(self.losses(server, i)))] for i in server.active}
        start = {i: self.models[c[0]] for i, c in choice.items()}
        return Plan(start, self.record(choice), {"clusters": choice})

    def client_model(self, c):
        return self.models[c[0]]


class FLSC(_ClusterModels):
    """FLSC: each client averages its ``soft_groups`` best cluster models, trains from that,
    and its trained model joins the average of every cluster it chose. Groups overlap."""

    name = "flsc"

    def plan(self, t, server):
        n_g = server.cfg.soft_groups
        choice = {
            i: sorted(np.argsort(self.losses(server, i), kind="stable")[:n_g].tolist())
            for i in server.active
        }
        start = {i: self.client_model(c) for i, c in choice.items()}
        return Plan(start, self.record(choice), {"clusters": choice})

    def client_model(self, c):
        return weighted_average([self.models[j] for j in c], np.ones(len(c)))

"""The paper's baselines (Section VII-A): Independent, Global, FedFA, MAXFL, IFCA and FLSC,
and ``fixed``, a partition given by hand (Table 1)."""

from __future__ import annotations

import numpy as np

from .base import GroupScheme, Plan, Scheme, weighted_average

__all__ = ["Independent", "Global", "FedFA", "Fixed", "MAXFL", "IFCA", "FLSC"]


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


class Fixed(GroupScheme):
    """A partition given by hand (``partition``), kept for the whole run (Table 1)."""

    name = "fixed"

    def groups(self, t, server):
        return [
            [i for i in g if i in server.active]
            for g in server.cfg.partition
            if any(i in server.active for i in g)
        ]


class MAXFL(Scheme):
    """MAXFL: a client trains the global model only while that model is appealing to it.

    Each client first trains a reference model alone, once, for ``maxfl_reference_epochs``
    local epochs (50, as the authors' code) at the initial learning rate from the common
    initialisation: a one-off cost of that many local epochs per client. The global model
    is appealing to client i when its training loss on i's data is below a threshold
    built from that reference (``maxfl_threshold``):

    - ``"distance"`` (default): ``||w_ref - w_glob||^2`` over trainable parameters, the
      paper's Section II ("the difference between the current global model and a local
      model optimized in an independent training process") and the authors' code;
    - ``"reference-loss"``: the reference's own training loss, fixed once (Cho et al.'s
      MaxFL compares two losses).

    Either way the threshold does not depend on the model the client currently holds, so a
    client that joined stays while the global model stays appealing.

    Epoch 0 every client trains alone from the common initialisation and the global model
    takes its first FedAvg step from all of them (D-weighted; without it no client could
    find the untrained model appealing). From epoch 1 the members train from the global
    model, which becomes the D-weighted average of their trained models and is what they
    hold; the others continue their own models (independent training).
    """

    name = "maxfl"

    def setup(self, server):
        self.global_state = None
        self.reference = {}  # client -> reference state (trained once)
        self.threshold = {}  # client -> fixed training loss of its reference

    def _train_references(self, server, clients):
        """Train the reference of each client in ``clients`` (skips those already done)."""
        cfg = server.cfg
        todo = [i for i in clients if i not in self.reference]
        if not todo:
            return
        states = {i: server.init_state for i in todo}
        rounds = -(-cfg.maxfl_reference_epochs // cfg.local_epochs)  # ceil
        for r in range(rounds):
            # Negative epoch numbers: shuffling streams apart from the run's own epochs.
            res = server.train(states, cfg.lr, -(r + 1))
            states = {i: res[i].state for i in states if i in res}
        for i, st in states.items():
            self.reference[i] = st
            self.threshold[i] = float(server.probe(i, st)[0])

    def appealing(self, server, i) -> bool:
        loss_global = float(server.probe(i, self.global_state)[0])
        if server.cfg.maxfl_threshold == "distance":
            ref = self.reference[i]
            dist = sum(
                float(((ref[k].float() - self.global_state[k].float()) ** 2).sum())
                for k in server.trainable
            )
            return loss_global < dist
        return loss_global < self.threshold[i]

    def plan(self, t, server):
        self._train_references(server, server.active)
        if self.global_state is None:
            return Plan(
                {i: server.states[i] for i in server.active},
                [[i] for i in server.active],
                {"participants": []},
            )
        ready = [i for i in server.active if i in self.threshold]
        joined = [i for i in ready if self.appealing(server, i)]
        start = {i: (self.global_state if i in joined else server.states[i]) for i in server.active}
        groups = ([joined] if joined else []) + [[i] for i in server.active if i not in joined]
        groups.sort(key=lambda g: g[0])
        return Plan(start, groups, {"participants": joined})

    def aggregate(self, t, server, plan, results):
        out = {i: results[i].state for i in results}
        if self.global_state is None:
            members = sorted(results)
        else:
            members = [i for i in plan.info["participants"] if i in results]
        if members:
            self.global_state = weighted_average(
                [results[i].state for i in members], server.sizes[members]
            )
        if plan.info["participants"]:
            for i in members:
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

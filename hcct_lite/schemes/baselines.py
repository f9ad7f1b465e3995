"""The paper's baselines (Section VII-A), and a partition given by hand.

Independent, Global, FedFA, MAXFL, IFCA and FLSC; ``fixed`` keeps a hand-made partition
(Table II's patterns).
"""

from __future__ import annotations

import numpy as np
from typing_extensions import override

from .base import GroupScheme, Plan, Scheme, weighted_average

__all__ = ["Independent", "Global", "FedFA", "Fixed", "MAXFL", "IFCA", "FLSC"]


class Independent(GroupScheme):
    """Every client is its own group: independent training."""

    name = "independent"

    @override
    def groups(self, t, server):
        return [[i] for i in server.active]


class Global(GroupScheme):
    """One group of every client: FedAvg, D-weighted."""

    name = "global"

    @override
    def groups(self, t, server):
        return [list(server.active)]


class FedFA(Global):
    """Global training with aggregation weights ``-log2 A_i`` (A_i: training accuracy).

    Accuracies are clipped to [1e-3, 1 - 1e-3] so that a perfect client keeps a small
    positive weight instead of a zero one (and a zero accuracy no infinite weight).
    """

    name = "fedfa"

    @override
    def weights(self, members, server, results):
        acc = np.clip([results[i].train_acc for i in members], 1e-3, 1 - 1e-3)
        return -np.log2(acc)


class Fixed(GroupScheme):
    """A partition given by hand (``partition``), kept for the whole run (Table II)."""

    name = "fixed"

    def __init__(self, partition, authors_round0: bool = False):
        super().__init__(authors_round0)
        self.partition = [list(g) for g in partition]

    @override
    def groups(self, t, server):
        return [
            [i for i in g if i in server.active]
            for g in self.partition
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

    def __init__(self, lr, local_epochs, reference_epochs=50, threshold="distance"):
        if threshold not in ("distance", "reference-loss"):
            raise ValueError(f"threshold must be 'distance' or 'reference-loss'; got {threshold!r}")
        self.lr, self.local_epochs = lr, local_epochs
        self.reference_epochs, self.threshold_kind = reference_epochs, threshold

    @override
    def setup(self, server):
        self.global_state = None
        self.reference = {}  # client -> reference state (trained once)
        self.threshold = {}  # client -> fixed training loss of its reference
        self.reference_rounds_sent = 0  # reference epochs -1, -2, ... used so far

    def _train_references(self, server, clients):
        """Train the reference of each client in ``clients`` (skips those already done)."""
        todo = [i for i in clients if i not in self.reference]
        if not todo:
            return
        states = {i: server.init_state for i in todo}
        rounds = -(-self.reference_epochs // self.local_epochs)  # ceil
        for r in range(rounds):
            # Negative epoch numbers: shuffling streams apart from the run's own epochs. A
            # retry takes fresh ones: a silo trains each epoch number once (it refuses a
            # second training for a number it has answered, even if the reply was lost).
            res = server.train(states, self.lr, -(self.reference_rounds_sent + r + 1))
            states = {i: res[i].state for i in states if i in res}
        self.reference_rounds_sent += rounds
        for i, st in states.items():
            probed = server.probe(i, st)
            if probed is not None:  # a client that does not answer is retried next epoch
                self.reference[i] = st
                self.threshold[i] = float(probed[0])

    def appealing(self, server, i) -> bool:
        """Whether the global model is appealing to client i (False if it does not answer)."""
        probed = server.probe(i, self.global_state)
        if probed is None:
            return False
        loss_global = float(probed[0])
        if self.threshold_kind == "distance":
            ref = self.reference[i]
            dist = sum(
                float(((ref[k].float() - self.global_state[k].float()) ** 2).sum())
                for k in server.trainable
            )
            return loss_global < dist
        return loss_global < self.threshold[i]

    @override
    def plan(self, t, server):
        self._train_references(server, server.active)
        if self.global_state is None:
            start = {i: server.states[i] for i in server.active}
            return Plan(start, [[i] for i in start], {"participants": []}, dict.fromkeys(start))
        ready = [i for i in server.active if i in self.threshold]
        joined = [i for i in ready if self.appealing(server, i)]
        start = {i: (self.global_state if i in joined else server.states[i]) for i in server.active}
        groups = ([joined] if joined else []) + [[i] for i in server.active if i not in joined]
        groups.sort(key=lambda g: g[0])
        return Plan(start, groups, {"participants": joined}, {i: i in joined for i in start})

    @override
    def aggregate(self, t, server, plan, results):
        out = {i: results[i].state for i in results}
        bootstrap = self.global_state is None
        members = sorted(results) if bootstrap else [i for i in results if plan.per_client[i]]
        if members:
            self.global_state = self.average(
                [results[i].state for i in members],
                [plan.start.get(i) for i in members],
                server.sizes[members],
                server.sizes[members],
                members,
                epoch=t,
                reference=self.dispute_reference(results, plan.start, server.sizes),
                model="global",
            )
        if not bootstrap:
            for i in members:
                out[i] = self.global_state
        return out


class _ClusterModels(Scheme):
    """K server-side cluster models; clients pick by their training loss on each."""

    models_shared = True  # a cluster model one client trained alone, others may pick next

    def __init__(self, k: int):
        if k < 1:
            raise ValueError(f"k (cluster models) must be >= 1; got {k}")
        self.k = k

    def setup(self, server):
        k = self.k
        # Distinct initialisations break the symmetry between cluster models (with one
        # shared initialisation every client picks the same model and this is FedAvg).
        self.models = [server.init_state] + [server.fresh_state(j) for j in range(1, k)]

    def losses(self, server, i):
        """(K,) training losses of the cluster models on client i, or None (no answer)."""
        out = []
        for m in self.models:
            probed = server.probe(i, m)
            if probed is None:
                return None
            out.append(probed[0])
        return np.array(out)

    def choose(self, server, pick) -> dict:
        """Map client -> chosen cluster indices, by ``pick(losses)``; silent clients sit out."""
        choice = {}
        for i in server.active:
            losses = self.losses(server, i)
            if losses is not None:
                choice[i] = pick(losses)
        return choice

    def chosen(self, server) -> dict:
        raise NotImplementedError

    def record(self, choice):
        k = len(self.models)
        groups = [sorted(i for i, c in choice.items() if j in c) for j in range(k)]
        return sorted((g for g in groups if g), key=lambda g: (g[0], len(g)))

    def aggregate(self, t, server, plan, results):
        choice, reference = (
            plan.per_client,
            self.dispute_reference(results, plan.start, server.sizes),
        )
        for j in range(len(self.models)):
            members = sorted(i for i, c in choice.items() if j in c)
            if members:
                self.models[j] = self.average(
                    [results[i].state for i in members],
                    [plan.start.get(i) for i in members],
                    server.sizes[members],
                    server.sizes[members],
                    members,
                    epoch=t,
                    reference=reference,
                    model=j,
                )
        return {i: self.client_model(c) for i, c in choice.items()}


class IFCA(_ClusterModels):
    """IFCA: each client trains the cluster model with the lowest loss on its data."""

    name = "ifca"

    @override
    def plan(self, t, server):
        choice = self.choose(server, lambda losses: [int(np.argmin(losses))])
        start = {i: self.models[c[0]] for i, c in choice.items()}
        return Plan(start, self.record(choice), {}, choice)

    def client_model(self, c):
        """The model a client holding clusters ``c`` trains from and keeps."""
        return self.models[c[0]]


class FLSC(_ClusterModels):
    """FLSC: soft clusters, each client in its ``soft`` best cluster models.

    Each client averages its ``soft`` best cluster models, trains from that, and its trained
    model joins the average of every cluster it chose. Groups overlap.
    """

    name = "flsc"

    def __init__(self, k: int, soft: int):
        super().__init__(k)
        if not 1 <= soft <= k:
            raise ValueError(f"soft (clusters per client) must be in [1, k={k}]; got {soft}")
        self.soft = soft

    @override
    def plan(self, t, server):
        choice = self.choose(
            server, lambda losses: sorted(np.argsort(losses, kind="stable")[: self.soft].tolist())
        )
        start = {i: self.client_model(c) for i, c in choice.items()}
        return Plan(start, self.record(choice), {}, choice)

    def client_model(self, c):
        """The uniform average of the cluster models ``c``."""
        return weighted_average([self.models[j] for j in c], np.ones(len(c)))

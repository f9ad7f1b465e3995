"""HCCT and its variants HCCT-E (one layer) and HCCT-P (a local head).

The paper's Algorithm 1 with Algorithm 2's partition every epoch.
"""

from __future__ import annotations

from typing_extensions import override

from ..partition import client_partition, select_layer
from ..partition.updates import all_zero
from .base import GroupScheme

__all__ = ["HCCT", "HCCTE", "HCCTP"]


class HCCT(GroupScheme):
    """HCCT: a new partition every epoch, from the previous epoch's updates.

    Epoch 0 trains singletons (Algorithm 1); then :func:`client_partition` partitions the
    clients on the previous epoch's updates with ``alpha`` (and exactly ``num_groups``
    groups when given, Figs. 5/6). Clients without an update yet (newcomers), and clients
    whose update is all zeros (listed in the epoch's ``unchanged``), are singletons.
    """

    name = "hcct"
    loners_rejoin = True  # a singleton's model is averaged into the group it joins next

    def __init__(self, alpha, num_groups=None, authors_round0: bool = False):
        super().__init__(authors_round0)
        self.alpha, self.num_groups = alpha, num_groups

    def similarity_updates(self, server, clients):
        """The updates the partition compares, one mapping per client in ``clients``."""
        return [server.updates[i] for i in clients]

    @override
    def groups(self, t, server):
        known = [
            i
            for i in server.active
            if i in server.updates and i not in server.new and i not in server.absent
        ]
        if t == 0 or len(known) == 0:
            self.info = {}
            return [[i] for i in server.active]
        ups = self.similarity_updates(server, known)
        # a client whose model did not move has no direction to compare: it stays alone
        still = [i for i, u in zip(known, ups, strict=True) if all_zero(u)]
        ups = [u for i, u in zip(known, ups, strict=True) if i not in still]
        known = [i for i in known if i not in still]
        self.info = {"unchanged": still} if still else {}
        if not known:
            return [[i] for i in server.active]
        k = self.num_groups
        p = client_partition(
            ups,
            server.sizes[known],
            alpha=self.alpha,
            num_groups=None if k is None else min(k, len(known)),
        )
        groups = [[known[j] for j in g] for g in p.groups]
        groups += [[i] for i in server.active if i not in known]
        groups.sort(key=lambda g: g[0])
        self.info["total_utility"] = p.total_utility
        return groups


class HCCTE(HCCT):
    """HCCT-E: HCCT with the similarity computed on one layer.

    The layer with the largest relative variance across clients, chosen once from the
    first updates the server sees.
    """

    name = "hcct-e"

    def __init__(self, alpha, num_groups=None, authors_round0: bool = False):
        super().__init__(alpha, num_groups, authors_round0)
        self.keys = None

    @override
    def similarity_updates(self, server, clients):
        ups = [server.updates[i] for i in clients]
        if self.keys is None:
            layer = select_layer(ups)
            self.keys = [k for k in ups[0] if k == layer or k.startswith(layer + ".")]
            self.layer = layer
        return [{k: u[k] for k in self.keys} for u in ups]

    @override
    def groups(self, t, server):
        groups = super().groups(t, server)
        if self.keys is not None:
            self.info["layer"] = self.layer
        return groups


class HCCTP(HCCT):
    """HCCT-P: HCCT whose classifier (the last linear layer) stays with each client."""

    name = "hcct-p"
    keep_head = True

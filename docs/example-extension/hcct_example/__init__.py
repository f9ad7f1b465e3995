"""An example extension of hcct-lite: a scheme, a task and a network, found by entry point.

- ``fedprox``: FedAvg with FedProx's proximal term (Li et al., MLSys 2020), a
  client-side method through :class:`hcct_lite.LocalObjective`; its ``fedprox_mu``
  setting is a run's option (``--fedprox-mu`` on the command line).
- ``breast-cancer``: scikit-learn's breast-cancer data (30 features, 2 classes) over 6
  clients in two label skews: clients 0-2 hold mostly malignant samples, 3-5 mostly benign.
- ``tabular_mlp``: a small network for 30 features.

``pip install -e docs/example-extension`` in a checkout of hcct-lite installs it; then
``hcct-lite run --task breast-cancer --scheme fedprox --fedprox-mu 0.1`` runs it.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

import hcct_lite as hl
from hcct_lite.parts import register as add_part
from hcct_lite.schemes import GroupScheme

__all__ = ["FedProx", "Proximal", "SETTINGS", "register"]

# this extension's settings of a run, and their defaults
SETTINGS = {"fedprox_mu": 0.01}
SKEW = 0.85  # the share of a client's samples from its skew's label
CLIENTS, SAMPLES = 6, 60


class Proximal(hl.LocalObjective):
    """FedProx's term ``mu / 2 * ||w - w_start||^2``, added to every local step's loss."""

    def __init__(self, mu: float):
        self.mu = mu
        self.anchor = None

    def begin(self, model, start, client, epoch):
        """Keep the weights the client starts from: the term's anchor."""
        self.anchor = [p.detach().clone() for p in model.parameters()]

    def extra_loss(self, model, outputs, labels):
        """``mu / 2`` times the squared distance of the weights from the anchor."""
        pairs = zip(model.parameters(), self.anchor, strict=True)
        return self.mu / 2 * sum(((p - a) ** 2).sum() for p, a in pairs)


class FedProx(GroupScheme):
    """One group of every client, as FedAvg; each client's step adds the proximal term."""

    name = "fedprox"

    def __init__(self, mu: float = SETTINGS["fedprox_mu"], authors_round0: bool = False):
        super().__init__(authors_round0)
        self.mu = mu

    def groups(self, t, server):
        """Every active client in one group."""
        return [list(server.active)]

    def local_objective(self):
        """The proximal term of this run's ``mu``."""
        return Proximal(self.mu)


def check_config(cfg) -> None:
    """Refuse a ``fedprox_mu`` below 0 or not finite, in one line."""
    mu = cfg.option("fedprox_mu", SETTINGS["fedprox_mu"])
    if not np.isfinite(mu) or mu < 0:
        raise ValueError(f"fedprox_mu must be a finite number >= 0; got {mu}")


def add_options(parser) -> None:
    """The command line's ``--fedprox-mu``: it sets the option ``fedprox_mu``."""
    group = parser.add_argument_group("FedProx (the example extension)")
    group.add_argument("--fedprox-mu", type=float, metavar="X", help="its mu, default 0.01")


def breast_cancer(cfg) -> list:
    """``cfg.n_clients`` clients in two label skews, seeded by ``cfg.seed``."""
    from sklearn.datasets import load_breast_cancer

    x, y = load_breast_cancer(return_X_y=True)
    x = (x - x.mean(0)) / x.std(0)  # the features' own scales differ by 10^4
    rng = np.random.default_rng([cfg.seed, 7])
    pools = [list(rng.permutation(np.flatnonzero(y == k))) for k in (0, 1)]
    clients = []
    for i in range(cfg.n_clients):
        major = int(i >= cfg.n_clients // 2)  # the first half's skew, then the second's
        counts = {major: round(SKEW * cfg.samples), 1 - major: cfg.samples}
        counts[1 - major] -= counts[major]
        if any(len(pools[k]) < n for k, n in counts.items()):
            raise ValueError(f"breast-cancer: too few samples for {cfg.n_clients} clients")
        idx = rng.permutation([pools[k].pop() for k, n in counts.items() for _ in range(n)])
        n_train = round(cfg.train_ratio * len(idx))
        xs = torch.tensor(x[idx], dtype=torch.float32)
        ys = torch.tensor(y[idx], dtype=torch.int64)
        name = "malignant" if major == 0 else "benign"  # scikit-learn: 0 is malignant
        clients.append(hl.ClientData(xs[:n_train], ys[:n_train], xs[n_train:], ys[n_train:], name))
    return clients


def tabular_mlp(num_classes: int) -> nn.Module:
    """30 features -> 32 hidden units -> ``num_classes`` logits."""
    return nn.Sequential(nn.Linear(30, 32), nn.ReLU(), nn.Linear(32, num_classes))


def register() -> None:
    """Add the scheme, the task, the network and FedProx's setting (the entry point)."""
    hl.register_scheme(
        FedProx, build=lambda cfg: FedProx(cfg.option("fedprox_mu", 0.01), cfg.authors_round0)
    )
    hl.register_model("tabular_mlp", tabular_mlp, input_shape=(30,))
    defaults = dict(
        model="tabular_mlp",
        dataset="breast-cancer",
        n_clients=CLIENTS,
        samples=SAMPLES,
        epochs=20,
        batch_size=8,  # 30 training samples a client: a few steps an epoch
        cluster_models=2,
        alpha={"hcct": 10.0},
    )
    hl.register_task("breast-cancer", defaults, breast_cancer, classes=2)
    add_part("settings", "example", "hcct_example:SETTINGS", "example")
    add_part("check", "example", "hcct_example:check_config", "example")
    add_part("options", "fedprox", "hcct_example:add_options", "example")

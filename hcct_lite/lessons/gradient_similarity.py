"""The key assumption behind HCCT's utility, measured, and the updates HCCT first sees.

Clients whose label distributions differ more should have less similar updates (the
paper's stand-in for Theorem 1's divergence); :func:`first_updates` gives the updates
Algorithm 2 partitions at epoch 1.
"""

from __future__ import annotations

import numpy as np
import torch

from ..partition.updates import cosine_matrix
from ..training.data import load_dataset
from ..training.local import SGDTrainer
from ..training.models import build_model
from ..training.splits import ClientData, to_float

__all__ = ["label_mix_similarity", "first_updates"]


def label_mix_similarity(n_pairs=40, samples=200, concentration=0.5, lr=0.1, seed=0):
    """Update cosine against label-distribution distance for random pairs of clients.

    Each pair draws two label distributions from a Dirichlet(``concentration``) over the 10
    classes of scikit-learn's digits, samples ``samples`` images from each, and trains the
    same freshly initialised small network for one local epoch (batch 64, plain SGD) on
    each client; the update is ``(w_start - w_end) / lr``.

    Returns
    -------
    distance : (n_pairs,) total-variation distance between the two label distributions
    cosine : (n_pairs,) cosine similarity of the two clients' updates
    r : Pearson correlation between them (the paper's assumption predicts r < 0)
    """
    if n_pairs < 3:
        raise ValueError(f"n_pairs must be >= 3 to give a correlation; got {n_pairs}")
    if samples < 1:
        raise ValueError(f"samples must be >= 1 per client; got {samples}")
    ds = load_dataset("digits")
    x, y = to_float(ds.x), ds.y.numpy()
    by_class = [np.flatnonzero(y == c) for c in range(10)]
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    model = build_model("small_digits")
    start = {k: v.clone() for k, v in model.state_dict().items()}
    trainer = SGDTrainer(model, 1, 64, seed=seed)
    dist, cos = np.empty(n_pairs), np.empty(n_pairs)
    for k in range(n_pairs):
        mixes = rng.dirichlet(np.full(10, concentration), size=2)
        clients = {}
        for j, mix in enumerate(mixes):
            labels = rng.choice(10, size=samples, p=mix)
            idx = np.array([rng.choice(by_class[c]) for c in labels])
            t = torch.from_numpy(idx)
            clients[j] = ClientData(x[t], ds.y[t], x[t[:1]], ds.y[t[:1]])
        res = trainer.train({0: start, 1: start}, clients, lr, epoch=k)
        cos[k] = cosine_matrix([res[0].update, res[1].update])[0, 1]
        dist[k] = 0.5 * np.abs(mixes[0] - mixes[1]).sum()
    return dist, cos, float(np.corrcoef(dist, cos)[0, 1])


def first_updates(cfg):
    """Compute the updates HCCT partitions at epoch 1.

    Every client trains one epoch alone from the common initialisation (Algorithm 1's
    epoch 0).

    Returns
    -------
    updates : list of N mappings name -> tensor
    sizes : numpy.ndarray (N,) D_i
    clients : list of ClientData
    """
    from ..training.engine import LocalBackend, init_model, resolve_device
    from ..training.local import clone_state
    from ..training.tasks import build_clients

    device = resolve_device(cfg.device)
    model = init_model(cfg, 0, device)
    init = clone_state(model.state_dict())
    backend = LocalBackend(cfg, build_clients(cfg), model, device)
    res = backend.train({i: init for i in range(cfg.n_clients)}, cfg.lr, 0)
    return [res[i].update for i in range(cfg.n_clients)], backend.sizes, backend.clients

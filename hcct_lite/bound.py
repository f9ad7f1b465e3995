"""Theorem 1 of the paper made computable, and a check of its key assumption.

With probability 1 - delta, client i's test error in group G is at most

    4 L^2 / (delta mu D_G)  +  d_1(P_G, P_i)  +  lambda

a *sample-size* term that shrinks as the group grows and a *divergence* term that grows
as the group's data drift from the client's. HCCT's utility ``-alpha / D_G + cos(g_i,
g_G)`` is its computable stand-in: ``alpha`` plays ``4 L^2 / (delta mu)`` and the
update cosine stands in for (minus) the divergence, which the server cannot measure.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = [
    "sample_term",
    "error_bound",
    "join_gain",
    "utility",
    "alpha_equivalent",
    "label_mix_similarity",
]


def _positive(name, value):
    arr = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be > 0; got {value}")
    return arr


def sample_term(group_size, lipschitz=1.0, mu=1.0, delta=0.1):
    """``4 L^2 / (delta mu D_G)``; broadcasts over ``group_size``."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1); got {delta}")
    d = _positive("group_size", group_size)
    return 4.0 * _positive("lipschitz", lipschitz) ** 2 / (delta * _positive("mu", mu) * d)


def error_bound(group_size, divergence, lipschitz=1.0, mu=1.0, delta=0.1, lam=0.0):
    """Theorem 1's bound on a client's test error in a group of ``group_size`` samples
    whose data diverge by ``divergence`` (>= 0) from the client's."""
    div = np.asarray(divergence, dtype=np.float64)
    if np.any(div < 0):
        raise ValueError(f"divergence must be >= 0; got {divergence}")
    return sample_term(group_size, lipschitz, mu, delta) + div + lam


def join_gain(own_size, group_size, divergence, lipschitz=1.0, mu=1.0, delta=0.1):
    """Bound alone (own data, divergence 0) minus bound in the group: > 0 means joining helps."""
    alone = error_bound(own_size, 0.0, lipschitz, mu, delta)
    return alone - error_bound(group_size, divergence, lipschitz, mu, delta)


def alpha_equivalent(lipschitz=1.0, mu=1.0, delta=0.1):
    """The alpha for which ``alpha / D`` equals the bound's sample-size term."""
    return float(sample_term(1.0, lipschitz, mu, delta))


def utility(alpha, group_size, cosine):
    """HCCT's utility ``-alpha / D_G + cos``; broadcasts."""
    if np.any(np.asarray(alpha) < 0):
        raise ValueError(f"alpha must be >= 0; got {alpha}")
    return -np.asarray(alpha, dtype=np.float64) / _positive("group_size", group_size) + cosine


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
    from .client import SGDTrainer
    from .data import load_dataset
    from .federation import ClientData, to_float
    from .models import build_model
    from .updates import cosine_matrix

    if n_pairs < 3:
        raise ValueError(f"n_pairs must be >= 3 to give a correlation; got {n_pairs}")
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

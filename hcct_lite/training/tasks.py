"""The paper's training tasks: Table III's settings, and the seeded federation of a run.

:data:`TASKS` holds each task's defaults (the paper's Table III); :func:`build_clients` builds
the clients of one run from its configuration; :func:`available_source` says what a task
can run on with the data this machine has.
"""

from __future__ import annotations

import numpy as np
import torch

from .data import load_dataset
from .models import MODEL_INPUT
from .splits import (
    domain_split,
    even_split,
    iid_halfnormal,
    make_clients,
    motivating_split,
    shards_halfnormal,
)

__all__ = ["PAPER_DOMAINS", "TASKS", "TASK_VERSIONS", "build_clients", "available_source"]

PAPER_DOMAINS = ["mnist", "svhn", "usps", "synthdigits", "mnistm"]

# Table III of the paper; `alpha` per scheme of the HCCT family.
TASKS = {
    "digit": dict(
        model="digit_cnn",
        dataset="digit",
        domains=PAPER_DOMAINS,
        n_clients=10,
        samples=370,
        local_epochs=5,
        epochs=20,
        cluster_models=10,
        soft_groups=2,
        alpha={"hcct": 1.0, "hcct-e": 100.0, "hcct-p": 1.0},
    ),
    "fmnist": dict(
        model="fmnist_mlp",
        dataset="fashion_mnist",
        n_clients=20,
        samples=240,
        local_epochs=1,
        epochs=50,
        cluster_models=5,
        soft_groups=3,
        alpha={"hcct": 100.0, "hcct-e": 100.0, "hcct-p": 100.0},
    ),
    "cifar10": dict(
        model="cifar_cnn",
        dataset="cifar10",
        n_clients=10,
        samples=1900,
        local_epochs=1,
        epochs=50,
        cluster_models=10,
        soft_groups=3,
        alpha={"hcct": 1.0, "hcct-e": 10.0, "hcct-p": 1.0},
    ),
    "motivating": dict(
        model="cifar_cnn",
        dataset="cifar10",
        n_clients=3,
        samples=0,
        local_epochs=1,
        epochs=10,
        cluster_models=3,
        soft_groups=2,
        alpha={"hcct": 1.0, "hcct-e": 1.0, "hcct-p": 1.0},
    ),
    "rotated-digits": dict(
        model="small_digits",
        dataset="digits",
        n_clients=8,
        samples=224,
        local_epochs=1,
        epochs=30,
        cluster_models=4,
        soft_groups=2,
        alpha={"hcct": 50.0, "hcct-e": 50.0, "hcct-p": 50.0},
    ),
}


# Each task's compute version: bumped on purpose when a change alters the federation it
# builds (the canary test says when); stored results of the older version are then rerun.
TASK_VERSIONS = {"digit": 1, "fmnist": 1, "cifar10": 1, "motivating": 1, "rotated-digits": 1}


def _rotate(i, x, n_clients):
    k = (i * 4) // n_clients  # two clients per rotation with 8 clients
    return torch.rot90(x, k, dims=(2, 3)).contiguous()


def build_clients(cfg) -> list:
    """Build the seeded federation of ``cfg`` (a RunConfig): ``n_clients`` ClientData."""
    rng = np.random.default_rng([cfg.seed, 7])  # the data's own stream
    n, kw = cfg.n_clients, dict(data_root=cfg.data_root, download=cfg.download)
    if cfg.task == "digit":
        sets = {d: load_dataset(d, **kw) for d in cfg.domains}
        if not sets:
            raise ValueError("the digit task needs at least one domain")
        parts = domain_split({d: len(s) for d, s in sets.items()}, n, cfg.samples, rng)
        size, channels = MODEL_INPUT[cfg.model]
        return [
            make_clients(sets[dom], [idx], cfg.train_ratio, rng, size, channels, [dom])[0]
            for dom, idx in parts
        ]
    if cfg.task == "rotated-digits":
        ds = load_dataset(cfg.dataset, **kw)
        parts = even_split(len(ds), n, cfg.samples, rng)
        doms = [f"rot{90 * ((i * 4) // n)}" for i in range(n)]
        return make_clients(
            ds,
            parts,
            cfg.train_ratio,
            rng,
            *MODEL_INPUT[cfg.model],
            doms,
            transform=lambda i, x: _rotate(i, x, n),
        )
    ds = load_dataset(cfg.dataset, **kw)
    size, channels = MODEL_INPUT[cfg.model]
    if cfg.task == "fmnist":
        parts = iid_halfnormal(len(ds), n, n * cfg.samples, rng)
    elif cfg.task == "cifar10":
        parts = shards_halfnormal(ds.y.numpy(), n, n * cfg.samples, rng)
    elif cfg.task == "motivating":
        if n != 3:
            raise ValueError(f"the motivating example has 3 clients; got n_clients={n}")
        fraction = 1.0 if cfg.samples <= 0 else min(1.0, cfg.samples * 3 / len(ds))
        parts = motivating_split(ds.y.numpy(), rng, fraction)
    else:  # pragma: no cover - make_config rejects unknown tasks
        raise ValueError(f"unknown task {cfg.task!r}")
    return make_clients(ds, parts, cfg.train_ratio, rng, size, channels)


def _found(name, data_root=None) -> bool:
    from .data import DataNotFoundError, find_npz

    if find_npz(name, data_root) is not None:  # present offline: no need to load it here
        return True
    try:
        load_dataset(name, data_root=data_root, download=True)
        return True
    except DataNotFoundError:
        return False


def available_source(task: str, data_root=None):
    """Settings that let ``task`` run on the data this machine has, and a note saying so.

    The Digit task keeps the paper's domains that are found; FMNIST falls back to MNIST;
    CIFAR-10 and the motivating example fall back to scikit-learn's digits (with the small
    network). Returns ``(overrides, note)``; ``note`` is empty when nothing was swapped.
    """
    if task == "digit":
        found = [d for d in PAPER_DOMAINS if _found(d, data_root)]
        if not found:
            return {"domains": ["digits"], "model": "digit_cnn"}, (
                "no Digit domain found: using scikit-learn's digits as the only domain"
            )
        missing = [d for d in PAPER_DOMAINS if d not in found]
        note = f"Digit domains found: {', '.join(found)}" + (
            f"; missing (not downloadable here): {', '.join(missing)}" if missing else ""
        )
        return {"domains": found}, note if missing else ""
    if task == "fmnist":
        for name, note in (
            ("fashion_mnist", ""),
            ("mnist", "Fashion-MNIST not found: MNIST in its place"),
        ):
            if _found(name, data_root):
                return {"dataset": name}, note
        return {"dataset": "digits", "model": "small_digits"}, (
            "neither Fashion-MNIST nor MNIST found: scikit-learn's digits in their place"
        )
    if task in ("cifar10", "motivating"):
        if _found("cifar10", data_root):
            return {}, ""
        return {"dataset": "digits", "model": "small_digits"}, (
            "CIFAR-10 not found: scikit-learn's digits (and the small network) in its place"
        )
    if task in TASKS:
        return {}, ""
    raise ValueError(f"unknown task {task!r}; choose from {sorted(TASKS)}")

"""Training tasks with the paper's Table 2 settings as defaults, and the run configuration.

A :class:`RunConfig` holds every setting of one experiment; :func:`make_config` fills it
from a task's defaults and validates overrides; :func:`build_clients` builds the seeded
federation.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import torch

from .data import load_dataset
from .federation import (
    domain_split,
    even_split,
    iid_halfnormal,
    make_clients,
    motivating_split,
    shards_halfnormal,
)
from .models import MODEL_INPUT

__all__ = ["RunConfig", "TASKS", "SCHEMES", "make_config", "build_clients"]

SCHEMES = ("independent", "global", "hcct", "hcct-e", "hcct-p", "maxfl", "fedfa", "ifca", "flsc")
# Not a scheme of the paper: a partition given by hand (`partition=`), e.g. Table 1's patterns.
EXTRA_SCHEMES = ("fixed",)
PAPER_DOMAINS = ["mnist", "svhn", "usps", "synthdigits", "mnistm"]


@dataclass
class RunConfig:
    """Every setting of one experiment (written to the result JSON as ``config``)."""

    task: str
    scheme: str
    seed: int = 0
    model: str = "small_digits"
    dataset: str = "digits"
    domains: list = field(default_factory=list)
    n_clients: int = 8
    samples: int = 224  # average samples assigned per client, before its train/test split
    train_ratio: float = 0.5
    batch_size: int = 64
    lr: float = 0.1
    lr_decay: float = 0.995
    local_epochs: int = 1
    epochs: int = 30
    alpha: float = 1.0
    cluster_models: int = 4  # IFCA / FLSC number of cluster models
    soft_groups: int = 2  # FLSC: cluster models each client averages
    maxfl_reference_epochs: int = 50  # MAXFL: local epochs of each client's reference model
    maxfl_threshold: str = "distance"  # the paper's; or "reference-loss" (Cho et al.)
    fixed_groups: int | None = None  # HCCT family: force exactly K groups (Fig. 6/7)
    update_includes_buffers: bool = False
    authors_round0: bool = False
    partition: list | None = None  # the "fixed" scheme's groups, e.g. [[0, 1], [2]]
    record_cosines: bool = False  # store each epoch's pairwise update cosines in the history
    initial_clients: int | None = None  # incoming clients (Fig. 4): clients at epoch 0
    new_clients: int = 0  # ... and this many join every `join_every` epochs
    join_every: int = 10
    data_root: str | None = None
    download: bool = True
    device: str = "cpu"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# Table 2 of the paper; `alpha` per scheme of the HCCT family.
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


def make_config(task: str, scheme: str, seed: int = 0, **overrides) -> RunConfig:
    """Build a validated :class:`RunConfig` from a task's defaults and overrides.

    ``None`` overrides are ignored. ``alpha`` defaults to the task's value for HCCT,
    HCCT-E or HCCT-P (Table 2). Raises ``ValueError`` naming the bad setting.
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose from {sorted(TASKS)}")
    if scheme not in SCHEMES + EXTRA_SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}; choose from {list(SCHEMES + EXTRA_SCHEMES)}")
    spec = dict(TASKS[task])
    alphas = spec.pop("alpha")
    spec["alpha"] = alphas.get(scheme, alphas["hcct"])
    spec["domains"] = list(spec.get("domains", []))
    spec.update({k: v for k, v in overrides.items() if v is not None})
    names = {f.name for f in dataclasses.fields(RunConfig)}
    unknown = set(spec) - names
    if unknown:
        raise ValueError(f"unknown settings {sorted(unknown)}")
    cfg = RunConfig(task=task, scheme=scheme, seed=int(seed), **spec)
    _validate(cfg)
    return cfg


def _validate(cfg: RunConfig) -> None:
    def need(ok, what):
        if not ok:
            raise ValueError(what)

    need(isinstance(cfg.seed, int) and cfg.seed >= 0, f"seed must be an int >= 0; got {cfg.seed}")
    need(cfg.epochs >= 1, f"epochs must be >= 1; got {cfg.epochs}")
    need(np.isfinite(cfg.alpha) and cfg.alpha >= 0, f"alpha must be >= 0; got {cfg.alpha}")
    need(cfg.local_epochs >= 1, f"local_epochs must be >= 1; got {cfg.local_epochs}")
    need(cfg.batch_size >= 1, f"batch_size must be >= 1; got {cfg.batch_size}")
    need(cfg.lr > 0, f"lr must be > 0; got {cfg.lr}")
    need(0 < cfg.lr_decay <= 1, f"lr_decay must be in (0, 1]; got {cfg.lr_decay}")
    need(0 < cfg.train_ratio < 1, f"train_ratio must be in (0, 1); got {cfg.train_ratio}")
    need(cfg.n_clients >= 1, f"n_clients must be >= 1; got {cfg.n_clients}")
    need(cfg.cluster_models >= 1, f"cluster_models must be >= 1; got {cfg.cluster_models}")
    need(
        1 <= cfg.soft_groups <= cfg.cluster_models,
        f"soft_groups must be in [1, cluster_models={cfg.cluster_models}]; got {cfg.soft_groups}",
    )
    need(
        cfg.maxfl_reference_epochs >= 1,
        f"maxfl_reference_epochs must be >= 1; got {cfg.maxfl_reference_epochs}",
    )
    need(
        cfg.maxfl_threshold in ("distance", "reference-loss"),
        f"maxfl_threshold must be 'distance' or 'reference-loss'; got {cfg.maxfl_threshold!r}",
    )
    need(cfg.new_clients >= 0, f"new_clients must be >= 0; got {cfg.new_clients}")
    need(cfg.join_every >= 1, f"join_every must be >= 1; got {cfg.join_every}")
    if cfg.initial_clients is not None:
        need(
            1 <= cfg.initial_clients <= cfg.n_clients,
            f"initial_clients must be in [1, n_clients={cfg.n_clients}]; got {cfg.initial_clients}",
        )
    if cfg.fixed_groups is not None:
        need(
            1 <= cfg.fixed_groups <= cfg.n_clients,
            f"fixed_groups must be in [1, n_clients={cfg.n_clients}]; got {cfg.fixed_groups}",
        )
    if cfg.scheme == "fixed" or cfg.partition is not None:
        flat = sorted(i for g in (cfg.partition or []) for i in g)
        need(
            flat == list(range(cfg.n_clients)),
            f"partition must split clients 0..{cfg.n_clients - 1} into disjoint groups; "
            f"got {cfg.partition}",
        )
    need(
        cfg.device in ("cpu", "cuda", "auto") or cfg.device.startswith("cuda:"),
        f"device must be auto, cpu or cuda; got {cfg.device!r}",
    )


def arrival_epochs(cfg: RunConfig) -> np.ndarray:
    """(n_clients,) epoch at which each client joins (0 for all without incoming clients)."""
    start = cfg.n_clients if cfg.initial_clients is None else cfg.initial_clients
    arrive = np.zeros(cfg.n_clients, dtype=np.int64)
    if cfg.new_clients > 0:
        for i in range(start, cfg.n_clients):
            arrive[i] = cfg.join_every * (1 + (i - start) // cfg.new_clients)
    else:  # no arrivals: clients past `initial_clients` never join (same data, fewer clients)
        arrive[start:] = cfg.epochs
    return arrive


def parse_partition(text: str) -> list:
    """``"0,1|2"`` -> ``[[0, 1], [2]]`` (the command line's ``--partition``)."""
    try:
        return [sorted(int(i) for i in g.split(",")) for g in text.split("|")]
    except ValueError:
        raise ValueError(f"partition must look like '0,1|2'; got {text!r}") from None


def _rotate(i, x, n_clients):
    k = (i * 4) // n_clients  # two clients per rotation with 8 clients
    return torch.rot90(x, k, dims=(2, 3)).contiguous()


def build_clients(cfg: RunConfig) -> list:
    """Build the seeded federation of ``cfg``: a list of ``n_clients`` ClientData."""
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

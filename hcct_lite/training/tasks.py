"""The tasks: Table III's settings, and the seeded federation of a run.

A task is registered in one place (:func:`register_task`): its defaults, the function that
builds a run's clients, its compute version and, optionally, a fallback for a machine
without its data. :func:`build_clients` builds one run's clients; :func:`available_source`
says what a task can run on with the data here.
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

__all__ = [
    "PAPER_DOMAINS",
    "PAPER_TASKS",
    "TASKS",
    "TASK_VERSIONS",
    "register_task",
    "unregister_task",
    "build_clients",
    "available_source",
]

PAPER_DOMAINS = ["mnist", "svhn", "usps", "synthdigits", "mnistm"]
# The tasks the paper's grids, the report and the lessons use (rotated-digits is this
# project's known-answer task).
PAPER_TASKS = ("digit", "fmnist", "cifar10", "motivating", "rotated-digits")

# name -> the task's default settings (Table III for the paper's; `alpha` per scheme of the
# HCCT family, "hcct" for the others), its compute version, its builder and fall-back
TASKS: dict = {}
TASK_VERSIONS: dict = {}
_BUILDERS: dict = {}
_FALLBACKS: dict = {}


def register_task(
    name: str, defaults: dict, build, version: int = 1, fallback=None, replace: bool = False
) -> None:
    """Register the task ``name``: the one place a task is added.

    Parameters
    ----------
    name : str
        A new name (or one to replace); not empty.
    defaults : dict
        Its default settings (RunConfig fields: ``model``, ``dataset``, ``n_clients``,
        ``samples``, ``epochs``...), with ``alpha`` a dict ``scheme -> alpha`` that has
        ``"hcct"`` (the value for every scheme it does not name).
    build : callable ``cfg -> list of ClientData``
        The seeded federation of a run (``cfg.n_clients`` clients; draw every random choice
        from ``cfg.seed``).
    version : int >= 1, default=1
        Its compute version: bump it when ``build`` changes what it builds.
    fallback : callable ``data_root -> (overrides, note)``, default=None
        What the task runs on where its data are missing (:func:`available_source`);
        ``None``: it runs as it is.
    replace : bool, default=False
        Replace a task registered under the same name (else that is an error).

    Raises
    ------
    ValueError
        If ``name`` is empty or taken (without ``replace``), ``defaults`` has no ``alpha``
        dict with an ``"hcct"`` entry, ``build`` or ``fallback`` is not callable, or
        ``version`` is not an int >= 1.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a task needs a name; got {name!r}")
    if name in TASKS and not replace:
        raise ValueError(f"a task named {name!r} is registered already")
    alpha = defaults.get("alpha") if isinstance(defaults, dict) else None
    if not isinstance(alpha, dict) or "hcct" not in alpha:
        raise ValueError(f"task {name!r}: defaults need 'alpha', a dict with an 'hcct' entry")
    for what, f in (("build", build), ("fallback", fallback)):
        if not callable(f) and not (what == "fallback" and f is None):
            raise ValueError(f"task {name!r}: {what} must be callable; got {f!r}")
    if type(version) is not int or version < 1:
        raise ValueError(f"task {name!r}: version must be an int >= 1; got {version!r}")
    TASKS[name], TASK_VERSIONS[name], _BUILDERS[name] = dict(defaults), version, build
    _FALLBACKS[name] = fallback


def unregister_task(name: str) -> None:
    """Forget the task ``name`` (registered by :func:`register_task`); not the paper's."""
    if name in PAPER_TASKS:
        raise ValueError(f"{name!r} is one of the paper's tasks")
    for table in (TASKS, TASK_VERSIONS, _BUILDERS, _FALLBACKS):
        table.pop(name, None)


def _rotate(i, x, n_clients):
    k = (i * 4) // n_clients  # two clients per rotation with 8 clients
    return torch.rot90(x, k, dims=(2, 3)).contiguous()


def _kw(cfg) -> dict:
    return dict(data_root=cfg.data_root, download=cfg.download)


def _rng(cfg):
    return np.random.default_rng([cfg.seed, 7])  # the data's own stream


def _digit(cfg) -> list:
    rng = _rng(cfg)
    sets = {d: load_dataset(d, **_kw(cfg)) for d in cfg.domains}
    if not sets:
        raise ValueError("the digit task needs at least one domain")
    parts = domain_split({d: len(s) for d, s in sets.items()}, cfg.n_clients, cfg.samples, rng)
    size, channels = MODEL_INPUT[cfg.model]
    return [
        make_clients(sets[dom], [idx], cfg.train_ratio, rng, size, channels, [dom])[0]
        for dom, idx in parts
    ]


def _rotated_digits(cfg) -> list:
    rng, n = _rng(cfg), cfg.n_clients
    ds = load_dataset(cfg.dataset, **_kw(cfg))
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


def _images(cfg, split) -> list:
    """A one-data-set task: ``split(labels, rng) -> parts``, then each client's train/test."""
    rng = _rng(cfg)
    ds = load_dataset(cfg.dataset, **_kw(cfg))
    parts = split(ds, rng)
    return make_clients(ds, parts, cfg.train_ratio, rng, *MODEL_INPUT[cfg.model])


def _fmnist(cfg) -> list:
    n = cfg.n_clients
    return _images(cfg, lambda ds, rng: iid_halfnormal(len(ds), n, n * cfg.samples, rng))


def _cifar10(cfg) -> list:
    n = cfg.n_clients
    return _images(cfg, lambda ds, rng: shards_halfnormal(ds.y.numpy(), n, n * cfg.samples, rng))


def _motivating(cfg) -> list:
    if cfg.n_clients != 3:
        raise ValueError(f"the motivating example has 3 clients; got n_clients={cfg.n_clients}")

    def split(ds, rng):
        fraction = 1.0 if cfg.samples <= 0 else min(1.0, cfg.samples * 3 / len(ds))
        return motivating_split(ds.y.numpy(), rng, fraction)

    return _images(cfg, split)


def build_clients(cfg) -> list:
    """Build the seeded federation of one run: its clients' data, split and transformed.

    Parameters
    ----------
    cfg : RunConfig
        ``cfg.task`` picks the builder (:func:`register_task`); ``cfg.seed`` seeds every
        random choice, so the same ``cfg`` gives the same clients.

    Returns
    -------
    list of ClientData
        ``cfg.n_clients`` clients, client i's ``x_train`` of shape (D_i, C, H, W) float32
        and ``y_train`` of shape (D_i,) int64 (``x_test``, ``y_test`` alike), with (C, H, W)
        the input of ``cfg.model``.

    Raises
    ------
    ValueError
        If ``cfg.task`` is not registered, or the task refuses the settings (the
        motivating example needs 3 clients, the Digit task a domain).
    DataNotFoundError
        If a data set is not found offline and cannot be downloaded.
    """
    if cfg.task not in _BUILDERS:
        raise ValueError(f"unknown task {cfg.task!r}; choose from {sorted(TASKS)}")
    return _BUILDERS[cfg.task](cfg)


def _found(name, data_root=None) -> bool:
    from .data import DataNotFoundError, find_npz

    if find_npz(name, data_root) is not None:  # present offline: no need to load it here
        return True
    try:
        load_dataset(name, data_root=data_root, download=True)
        return True
    except DataNotFoundError:
        return False


def _digit_source(data_root):
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


def _fmnist_source(data_root):
    for name, note in (
        ("fashion_mnist", ""),
        ("mnist", "Fashion-MNIST not found: MNIST in its place"),
    ):
        if _found(name, data_root):
            return {"dataset": name}, note
    return {"dataset": "digits", "model": "small_digits"}, (
        "neither Fashion-MNIST nor MNIST found: scikit-learn's digits in their place"
    )


def _cifar_source(data_root):
    if _found("cifar10", data_root):
        return {}, ""
    return {"dataset": "digits", "model": "small_digits"}, (
        "CIFAR-10 not found: scikit-learn's digits (and the small network) in its place"
    )


def available_source(task: str, data_root=None):
    """Settings that let ``task`` run on the data this machine has, and a note saying so.

    The Digit task keeps the paper's domains that are found; FMNIST falls back to MNIST;
    CIFAR-10 and the motivating example fall back to scikit-learn's digits (with the small
    network); a task registered without a fall-back runs as it is. Returns ``(overrides,
    note)``; ``note`` is empty when nothing was swapped.
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose from {sorted(TASKS)}")
    fallback = _FALLBACKS[task]
    return fallback(data_root) if fallback else ({}, "")


# The paper's tasks (Table III) and the known-answer task, each with its federation.
_DEFAULTS = {
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

for _name, _build, _fallback in (
    ("digit", _digit, _digit_source),
    ("fmnist", _fmnist, _fmnist_source),
    ("cifar10", _cifar10, _cifar_source),
    ("motivating", _motivating, _cifar_source),
    ("rotated-digits", _rotated_digits, None),
):
    register_task(_name, _DEFAULTS[_name], _build, version=1, fallback=_fallback)

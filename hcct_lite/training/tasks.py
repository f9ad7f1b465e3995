"""The tasks: Table III's settings, and the seeded federation of a run.

A task is registered in one place (:func:`register_task`): its defaults, the function that
builds a run's clients, its compute version and, optionally, a fallback for a machine
without its data. :func:`build_clients` builds one run's clients; :func:`available_source`
says what a task can run on with the data here.
"""

from __future__ import annotations

import numpy as np
import torch

from ..parts import load_parts, track
from .data import PAPER_DOMAINS, cifar_source, digit_source, fmnist_source, load_dataset
from .models import MODEL_INPUT, build_model, check_outputs, input_shape
from .splits import (
    ClientData,
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
    "TASK_CLASSES",
    "REQUIRED_DEFAULTS",
    "register_task",
    "task_model",
    "check_clients",
    "unregister_task",
    "build_clients",
    "available_source",
]

# The tasks the paper's grids, the report and the lessons use (rotated-digits is this
# project's known-answer task).
PAPER_TASKS = ("digit", "fmnist", "cifar10", "motivating", "rotated-digits")

# name -> the task's default settings (Table III for the paper's; `alpha` per scheme of the
# HCCT family, "hcct" for the others), its compute version, its builder and fall-back
TASKS: dict = {}
TASK_VERSIONS: dict = {}
TASK_CLASSES: dict = {}  # name -> the number of labels (a network's outputs)
_BUILDERS: dict = {}
_FALLBACKS: dict = {}
track(TASKS, TASK_VERSIONS, TASK_CLASSES, _BUILDERS, _FALLBACKS)  # an extension may add tasks
# what every task states itself: the rest of a run's settings default to Table III's
REQUIRED_DEFAULTS = ("model", "n_clients", "samples", "alpha")


def register_task(
    name: str,
    defaults: dict,
    build,
    version: int = 1,
    fallback=None,
    replace: bool = False,
    classes: int = 10,
) -> None:
    """Register the task ``name``: the one place a task is added.

    Parameters
    ----------
    name : str
        A new name (or one to replace); not empty.
    defaults : dict
        Its default settings (RunConfig fields). It must name :data:`REQUIRED_DEFAULTS`:
        ``model``, ``n_clients``, ``samples`` and ``alpha``, a dict ``scheme -> alpha``
        that has ``"hcct"`` (the value for every scheme it does not name). The others
        (``epochs``, ``lr``, ...) default to Table III's.
    build : callable ``cfg -> list of ClientData``
        The seeded federation of a run (``cfg.n_clients`` clients; draw every random choice
        from ``cfg.seed``). Each client's inputs have the shape of ``cfg.model``'s input
        (:func:`~hcct_lite.training.models.input_shape`), its labels are in
        ``[0, classes)``: :func:`check_clients` checks both.
    version : int >= 1, default=1
        Its compute version: bump it when ``build`` changes what it builds.
    fallback : callable ``data_root -> (overrides, note)``, default=None
        What the task runs on where its data are missing (:func:`available_source`);
        ``None``: it runs as it is.
    replace : bool, default=False
        Replace a task registered under the same name (else that is an error).
    classes : int >= 2, default=10
        The number of labels: the task's networks have that many outputs.

    Raises
    ------
    ValueError
        If ``name`` is empty or taken (without ``replace``), ``defaults`` misses a key of
        :data:`REQUIRED_DEFAULTS` or its ``alpha`` is not a dict with an ``"hcct"`` entry,
        ``build`` or ``fallback`` is not callable, or ``version`` or ``classes`` is not an
        int in range.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a task needs a name; got {name!r}")
    if name in TASKS and not replace:
        raise ValueError(f"a task named {name!r} is registered already")
    if not isinstance(defaults, dict):
        raise ValueError(f"task {name!r}: defaults must be a dict; got {defaults!r}")
    missing = [k for k in REQUIRED_DEFAULTS if k not in defaults]
    if missing:
        raise ValueError(f"task {name!r}: its defaults must name {', '.join(missing)}")
    alpha = defaults["alpha"]
    if not isinstance(alpha, dict) or "hcct" not in alpha:
        raise ValueError(f"task {name!r}: defaults need 'alpha', a dict with an 'hcct' entry")
    if type(classes) is not int or classes < 2:
        raise ValueError(f"task {name!r}: classes must be an int >= 2; got {classes!r}")
    for what, f in (("build", build), ("fallback", fallback)):
        if not callable(f) and not (what == "fallback" and f is None):
            raise ValueError(f"task {name!r}: {what} must be callable; got {f!r}")
    if type(version) is not int or version < 1:
        raise ValueError(f"task {name!r}: version must be an int >= 1; got {version!r}")
    TASKS[name], TASK_VERSIONS[name], _BUILDERS[name] = dict(defaults), version, build
    _FALLBACKS[name], TASK_CLASSES[name] = fallback, classes


def unregister_task(name: str) -> None:
    """Forget the task ``name`` (registered by :func:`register_task`); not the paper's."""
    if name in PAPER_TASKS:
        raise ValueError(f"{name!r} is one of the paper's tasks")
    for table in (TASKS, TASK_VERSIONS, TASK_CLASSES, _BUILDERS, _FALLBACKS):
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
        ``cfg.n_clients`` clients, client i's ``x_train`` of shape ``(D_i, *S)`` float32 and
        ``y_train`` of shape (D_i,) int64 (``x_test``, ``y_test`` alike), with S the input
        of ``cfg.model`` ((C, H, W) for an image network).

    Raises
    ------
    ValueError
        If ``cfg.task`` is not registered, the task refuses the settings (the motivating
        example needs 3 clients, the Digit task a domain), its builder fails, or its
        clients do not fit its network (:func:`check_clients`). The message names the task.
    DataNotFoundError
        If a data set is not found offline and cannot be downloaded.
    """
    load_parts()
    if cfg.task not in _BUILDERS:
        raise ValueError(f"unknown task {cfg.task!r}; choose from {sorted(TASKS)}")
    try:
        clients = _BUILDERS[cfg.task](cfg)
    except (ValueError, OSError):
        raise
    except Exception as err:  # a task's own bug: one line that names it, not a traceback
        raise ValueError(
            f"task {cfg.task!r}: building its clients failed: {type(err).__name__}: {err}"
        ) from err
    check_clients(cfg, clients)
    return clients


def task_model(cfg):
    """A fresh network of ``cfg.model`` with one output per class of ``cfg.task``."""
    load_parts()
    try:
        return build_model(cfg.model, TASK_CLASSES.get(cfg.task, 10))
    except ValueError as err:  # an unknown model: say whose setting it is
        raise ValueError(f"task {cfg.task!r}: {err}") from None


def check_clients(cfg, clients, model=None) -> None:
    """Raise naming the task and the client where ``clients`` do not fit ``cfg``.

    Each client is a :class:`~hcct_lite.training.splits.ClientData` whose float inputs
    have the shape of ``cfg.model``'s input and whose int64 labels lie in
    ``[0, classes)`` of ``cfg.task`` (:func:`register_task`). With ``model``, the network
    must also give one output per class for a sample of client 0.

    Raises
    ------
    ValueError
        At the first client that does not fit, naming the task, the client and the field.
    """
    task = f"task {cfg.task!r}"
    if not isinstance(clients, (list, tuple)) or len(clients) != cfg.n_clients:
        got = f"{len(clients)} clients" if isinstance(clients, (list, tuple)) else repr(clients)
        raise ValueError(f"{task} built {got}, not n_clients={cfg.n_clients}")
    try:
        shape, classes = input_shape(cfg.model), TASK_CLASSES.get(cfg.task, 10)
    except ValueError as err:  # an unknown model: say whose setting it is
        raise ValueError(f"{task}: {err}") from None
    for i, c in enumerate(clients):
        if not isinstance(c, ClientData):
            raise ValueError(f"{task}: client {i} is a {type(c).__name__}, not a ClientData")
        for split in ("train", "test"):
            x, y = getattr(c, f"x_{split}"), getattr(c, f"y_{split}")
            where = f"{task}: client {i}'s x_{split}"
            if not isinstance(x, torch.Tensor) or not x.is_floating_point():
                raise ValueError(f"{where} must be a float tensor; got {type(x).__name__}")
            if tuple(x.shape[1:]) != shape:
                raise ValueError(
                    f"{where} has samples of shape {tuple(x.shape[1:])}, but the model "
                    f"{cfg.model!r} takes {shape}"
                )
            ok = isinstance(y, torch.Tensor) and y.dtype == torch.int64 and y.dim() == 1
            if not ok or y.shape[0] != x.shape[0]:
                raise ValueError(
                    f"{task}: client {i}'s y_{split} must be an int64 tensor of shape "
                    f"({x.shape[0]},), one label per sample"
                )
            bad = y[(y < 0) | (y >= classes)]
            if bad.numel():
                raise ValueError(
                    f"{task}: client {i} has the label {int(bad[0])} in y_{split}, outside "
                    f"0..{classes - 1}: the task has {classes} classes "
                    "(register_task(..., classes=...))"
                )
    if model is not None:
        check_outputs(model, clients[0].x_train[:1], classes, cfg.model, cfg.task)


def available_source(task: str, data_root=None):
    """Settings that let ``task`` run on the data this machine has, and a note saying so.

    The Digit task keeps the paper's domains that are found; FMNIST falls back to MNIST;
    CIFAR-10 and the motivating example fall back to scikit-learn's digits (with the small
    network); a task registered without a fall-back runs as it is. Returns ``(overrides,
    note)``; ``note`` is empty when nothing was swapped.
    """
    load_parts()
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
    ("digit", _digit, digit_source),
    ("fmnist", _fmnist, fmnist_source),
    ("cifar10", _cifar10, cifar_source),
    ("motivating", _motivating, cifar_source),
    ("rotated-digits", _rotated_digits, None),
):
    register_task(_name, _DEFAULTS[_name], _build, version=1, fallback=_fallback)

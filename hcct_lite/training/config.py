"""The run configuration: every setting of one experiment, validated.

A :class:`RunConfig` is immutable and checks itself however it is built (a setting of the
wrong type or out of range raises, naming it): directly, by :func:`dataclasses.replace`, or
by :func:`make_config` from a task's Table III defaults (:data:`~.tasks.TASKS`).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass

import numpy as np

from ..parts import find, part_missing
from ..schemes.registry import PAPER_SCHEMES, scheme_names
from .provenance import uses_defences
from .tasks import TASKS

__all__ = [
    "SCHEMES",
    "RunConfig",
    "SettingTypeError",
    "make_config",
    "validate_config",
    "arrival_epochs",
    "parse_partition",
]

# The paper's schemes (its grids, report and lessons); any registered scheme runs
# (hcct_lite.schemes.registry: "fixed", a partition given by hand, and extensions).
SCHEMES = PAPER_SCHEMES


class SettingTypeError(TypeError, ValueError):
    """A setting of the wrong type (a ``TypeError``, and a ``ValueError`` as any bad setting)."""


@dataclass(frozen=True)
class RunConfig:
    """Every setting of one experiment (written to the result JSON as ``config``).

    Immutable (``dataclasses.replace(cfg, epochs=5)`` makes another) and validated when
    built, naming the setting: :class:`SettingTypeError` for a wrong type, ``ValueError``
    out of range (:func:`validate_config`). NumPy scalars become Python numbers,
    ``domains`` a tuple, ``partition`` tuples (:meth:`to_dict` gives lists back).

    Examples
    --------
    >>> RunConfig("rotated-digits", "hcct", lr=-5.0)
    Traceback (most recent call last):
    ValueError: lr must be a finite number > 0; got -5.0
    """

    task: str
    scheme: str
    seed: int = 0
    model: str = "small_digits"
    dataset: str = "digits"
    domains: tuple = ()  # the data sets the clients are drawn from (a task with several)
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
    fixed_groups: int | None = None  # HCCT family: force exactly K groups (Fig. 5/6)
    update_includes_buffers: bool = False
    authors_round0: bool = False
    partition: tuple | None = None  # the "fixed" scheme's groups, e.g. ((0, 1), (2,))
    record_cosines: bool = False  # store each epoch's pairwise update cosines in the history
    # the norm rule: a reply to be averaged with others is rejected where its update is
    # longer than its limit (hcct_lite.deploy.defences.norms.norm_bound, factor norm_limit).
    # 0 (off) runs the paper's algorithm; a deployment turns it on (its app's norm-limit, 20:
    # honest FMNIST replies reach 12 x, HCCT-P in late epochs)
    norm_limit: float = 0.0
    # a declared sample count counts at most count_bound x the federation's median count
    # (of two, the smaller) for the steps, the clip, the norm rule and the weights (0: off)
    count_bound: float = 0.0
    # how a group's models become one: "mean" (FedAvg, the paper's) or a robust rule of
    # hcct_lite.deploy.defences.robust; deltas clipped to their norm_bound limit
    # (factor clip_factor)
    aggregator: str = "mean"
    clip_factor: float = 4.0
    trim_fraction: float = 0.25  # trimmed-mean: share dropped at each side
    initial_clients: int | None = None  # incoming clients (Fig. 3): clients at epoch 0
    new_clients: int = 0  # ... and this many join every `join_every` epochs
    join_every: int = 10
    data_root: str | None = None
    download: bool = True
    device: str = "cpu"
    # on a GPU, each local step's forward and backward pass replayed as one CUDA graph (the
    # same kernels; hcct_lite.gpu.graphs)
    cuda_graphs: bool = False
    # every client of an epoch trained at once on stacked networks (another summation order;
    # hcct_lite.gpu.batched), and on a GPU the arithmetic of those steps
    batched_clients: bool = False
    gpu_precision: str = "default"

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.generic):  # a NumPy number is stored as Python's
                object.__setattr__(self, f.name, value.item())
        if isinstance(self.data_root, os.PathLike):
            object.__setattr__(self, "data_root", os.fspath(self.data_root))
        if isinstance(self.domains, (list, tuple)):
            object.__setattr__(self, "domains", tuple(self.domains))
        if isinstance(self.partition, (list, tuple)):
            groups = tuple(tuple(g) if isinstance(g, (list, tuple)) else g for g in self.partition)
            object.__setattr__(self, "partition", groups)
        validate_config(self)

    def to_dict(self) -> dict:
        """Every setting as a plain dict (the result JSON's ``config``): sequences as lists."""
        out = dataclasses.asdict(self)
        out["domains"] = list(self.domains)
        if self.partition is not None:
            out["partition"] = [list(g) for g in self.partition]
        return out


def make_config(task: str, scheme: str, seed: int = 0, **overrides) -> RunConfig:
    """Build a validated :class:`RunConfig` from a task's defaults and overrides.

    Parameters
    ----------
    task, scheme : str
        A registered task (:data:`~hcct_lite.training.tasks.TASKS`) and scheme.
    seed : int in [0, 2**32), default=0
    **overrides
        Other :class:`RunConfig` fields (``None`` ones ignored); ``alpha`` defaults to the
        task's for HCCT, HCCT-E or HCCT-P (Table III), ``cluster_models`` and
        ``soft_groups`` to at most ``n_clients``. A bad one raises ``ValueError``.

    Returns
    -------
    RunConfig

    Examples
    --------
    >>> make_config("rotated-digits", "hcct", seed=1, epochs=5).epochs
    5
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose from {sorted(TASKS)}")
    if scheme not in scheme_names():
        raise ValueError(f"unknown scheme {scheme!r}; choose from {list(scheme_names())}")
    spec = dict(TASKS[task])
    alphas = spec.pop("alpha")
    spec["alpha"] = alphas.get(scheme, alphas["hcct"])
    spec["domains"] = list(spec.get("domains", []))
    spec.update({k: v for k, v in overrides.items() if v is not None})
    # a task's default counts never exceed the clients a smaller federation has
    n = spec.get("n_clients", RunConfig.n_clients)
    if overrides.get("cluster_models") is None and isinstance(n, int) and n >= 1:
        spec["cluster_models"] = min(spec.get("cluster_models", RunConfig.cluster_models), n)
        if overrides.get("soft_groups") is None:
            spec["soft_groups"] = min(spec.get("soft_groups", RunConfig.soft_groups), n)
    names = {f.name for f in dataclasses.fields(RunConfig)}
    unknown = set(spec) - names
    if unknown:
        raise ValueError(f"unknown settings {sorted(unknown)}")
    if _is_number(seed) and math.isfinite(seed) and seed == int(seed):
        seed = int(seed)  # 3.0 or a NumPy int: anything else is named by RunConfig
    return RunConfig(task=task, scheme=scheme, seed=seed, **spec)


# Upper bounds of the count settings: far above any use, low enough that a typo fails at
# once instead of overflowing or filling the memory hours later.
COUNT_LIMITS = {
    "epochs": 100_000,
    "local_epochs": 10_000,
    "batch_size": 10_000_000,
    "n_clients": 10_000,
    "samples": 10_000_000,
    "maxfl_reference_epochs": 100_000,
    "join_every": 100_000,
}
# Below this, a step of a float32 weight of size 1e-2 rounds away for gradients up to
# about 0.1: the model comes back unchanged and every update is zero.
MIN_LR = 1e-8
# Above this plain SGD is no longer training: at lr 10 the rotated digits already end at
# chance, and at 1e20 every reply overflows float32 and is rejected.
MAX_LR = 100.0


def _need(ok: bool, what: str) -> None:
    if not ok:
        raise ValueError(what)


def _check_count(name: str, value, low: int, high: int, why: str = "") -> None:
    _need(
        isinstance(value, (int, np.integer)) and not isinstance(value, bool),
        f"{name} must be an int; got {value!r}",
    )
    _need(low <= value <= high, f"{name} must be in [{low}, {high}]{why}; got {value}")


def _check_counts(cfg: RunConfig) -> None:
    """Each count an int within :data:`COUNT_LIMITS`; ``n_clients`` first (it bounds two)."""
    _check_count("n_clients", cfg.n_clients, 1, COUNT_LIMITS["n_clients"])
    lows = {"samples": 0}  # samples 0: the motivating task's whole split
    for name, high in COUNT_LIMITS.items():
        if name != "n_clients":
            _check_count(name, getattr(cfg, name), lows.get(name, 1), high)
    clients = " (the number of clients)"
    _check_count("cluster_models", cfg.cluster_models, 1, cfg.n_clients, clients)
    _check_count("new_clients", cfg.new_clients, 0, cfg.n_clients, clients)


def _check_aggregation(cfg: RunConfig) -> None:
    _need(
        _is_number(cfg.count_bound) and (cfg.count_bound == 0 or 1 <= cfg.count_bound < math.inf),
        f"count_bound must be 0 (off) or a finite number >= 1 (a multiple of the median "
        f"count); got {cfg.count_bound!r}",
    )
    defaults = [RunConfig.__dataclass_fields__[k].default for k in _DEFENCE_ONLY]
    if not uses_defences(cfg) and [getattr(cfg, k) for k in _DEFENCE_ONLY] == defaults:
        return  # the paper's runs: nothing of the deployment's to check
    check = find("check", "defence")  # the deployment part's rule of its settings
    if check is None:
        raise part_missing("the settings aggregator, norm_limit and count_bound", "deploy")
    check(cfg)


# settings only a robust aggregator reads
_DEFENCE_ONLY = ("clip_factor", "trim_fraction")


def _check_device(cfg: RunConfig) -> None:
    _need(
        isinstance(cfg.device, str)
        and (cfg.device in ("cpu", "cuda", "auto") or cfg.device.startswith("cuda:")),
        f"device must be auto, cpu or cuda; got {cfg.device!r}",
    )
    if (
        cfg.batched_clients is not False
        or cfg.cuda_graphs is not False
        or (cfg.gpu_precision != "default")
    ):  # the GPU part's settings: its own rule checks them
        check = find("check", "gpu")
        if check is None:
            raise part_missing("batched_clients, cuda_graphs and gpu_precision", "gpu")
        check(cfg)


def _is_number(x) -> bool:
    return isinstance(x, (int, float, np.floating, np.integer)) and not isinstance(x, bool)


# What each annotation of RunConfig admits, in words and as a test (None where it says so)
_KINDS = {
    "int": ("an int", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "float": ("a number", _is_number),
    "bool": ("a bool (True or False)", lambda v: isinstance(v, bool)),
    "str": ("a str", lambda v: isinstance(v, str)),
    "tuple": ("a list of names", lambda v: isinstance(v, tuple)),
}


# Settings whose own rule names a wrong type with the range (ValueError): the aggregation's
_OWN_RULE = ("clip_factor", "trim_fraction", "count_bound")


def _check_types(cfg: RunConfig) -> None:
    """Every setting of the type its annotation names, before any range is compared."""
    for f in dataclasses.fields(cfg):
        if f.name in _OWN_RULE:
            continue
        kind, _, optional = f.type.partition(" | ")
        what, ok = _KINDS[kind]
        value = getattr(cfg, f.name)
        if not (ok(value) or (optional == "None" and value is None)):
            what += " or None" if optional else ""
            raise SettingTypeError(
                f"{f.name} must be {what}; got {value!r} ({type(value).__name__})"
            )
    bad = [d for d in cfg.domains if not isinstance(d, str)]
    if bad:
        raise SettingTypeError(f"domains must be names (str); got {bad[0]!r} in {cfg.domains}")
    for g in cfg.partition or ():
        if not (isinstance(g, tuple) and all(_KINDS["int"][1](i) for i in g)):
            raise SettingTypeError(f"partition must be groups (lists) of client ints; got {g!r}")


def _check_step_size(cfg: RunConfig) -> None:
    """``lr`` within the range where float32 SGD neither diverges nor stands still."""
    _need(np.isfinite(cfg.lr) and cfg.lr > 0, f"lr must be a finite number > 0; got {cfg.lr}")
    _need(
        cfg.lr <= MAX_LR,
        f"lr {cfg.lr} is too large: one SGD step moves each weight by lr x its gradient, and "
        f"above {MAX_LR:g} that diverges (at 1e20 every reply overflows float32); use lr <= "
        f"{MAX_LR:g}",
    )
    _need(
        cfg.lr >= MIN_LR,
        f"lr {cfg.lr} is too small: float32 weights would not change and every update would "
        f"be zero; use lr >= {MIN_LR}",
    )


def validate_config(cfg: RunConfig) -> None:
    """Raise naming the first setting of ``cfg`` of the wrong type or out of range.

    :class:`SettingTypeError` for a type, ``ValueError`` for a value; run by every RunConfig.
    """
    _check_types(cfg)
    _need(cfg.task in TASKS, f"unknown task {cfg.task!r}; choose from {sorted(TASKS)}")
    _need(
        cfg.scheme in scheme_names(),
        f"unknown scheme {cfg.scheme!r}; choose from {list(scheme_names())}",
    )
    _check_counts(cfg)
    _need(
        isinstance(cfg.seed, int) and 0 <= cfg.seed < 2**32,
        f"seed must be an int in [0, 2**32); got {cfg.seed}",
    )
    _need(np.isfinite(cfg.alpha) and cfg.alpha >= 0, f"alpha must be >= 0; got {cfg.alpha}")
    _check_step_size(cfg)
    _need(
        np.isfinite(cfg.norm_limit) and (cfg.norm_limit == 0 or cfg.norm_limit >= 2),
        f"norm_limit must be 0 (off) or a factor >= 2 (below 2, half of an even round could "
        f"be rejected); got {cfg.norm_limit}",
    )
    _check_aggregation(cfg)
    _need(0 < cfg.lr_decay <= 1, f"lr_decay must be in (0, 1]; got {cfg.lr_decay}")
    _need(0 < cfg.train_ratio < 1, f"train_ratio must be in (0, 1); got {cfg.train_ratio}")
    _need(
        1 <= cfg.soft_groups <= cfg.cluster_models,
        f"soft_groups must be in [1, cluster_models={cfg.cluster_models}]; got {cfg.soft_groups}",
    )
    _need(
        cfg.maxfl_threshold in ("distance", "reference-loss"),
        f"maxfl_threshold must be 'distance' or 'reference-loss'; got {cfg.maxfl_threshold!r}",
    )
    if cfg.initial_clients is not None:
        _need(
            1 <= cfg.initial_clients <= cfg.n_clients,
            f"initial_clients must be in [1, n_clients={cfg.n_clients}]; got {cfg.initial_clients}",
        )
    if cfg.fixed_groups is not None:
        _need(
            1 <= cfg.fixed_groups <= cfg.n_clients,
            f"fixed_groups must be in [1, n_clients={cfg.n_clients}]; got {cfg.fixed_groups}",
        )
    if cfg.scheme == "fixed" or cfg.partition is not None:
        flat = sorted(i for g in (cfg.partition or []) for i in g)
        _need(
            flat == list(range(cfg.n_clients)),
            f"partition must split clients 0..{cfg.n_clients - 1} into disjoint groups; "
            f"got {cfg.partition}",
        )
    _check_device(cfg)


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

"""The run configuration: every setting of one experiment, validated.

A :class:`RunConfig` is immutable and checks itself however it is built (a setting of the
wrong type or out of range raises, naming it): directly, by :func:`dataclasses.replace`, or
by :func:`make_config` from a task's Table III defaults (:data:`~.tasks.TASKS`).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
from dataclasses import dataclass

import numpy as np

from ..parts import load_parts, part_settings
from ..schemes.registry import PAPER_SCHEMES, scheme_names
from .tasks import TASKS
from .validation import COUNT_LIMITS, SettingTypeError, is_number, validate_config

__all__ = [
    "SCHEMES",
    "RunConfig",
    "SettingTypeError",
    "make_config",
    "COUNT_LIMITS",
    "setting_names",
    "validate_config",
    "arrival_epochs",
    "parse_partition",
]

# The paper's schemes (its grids, report and lessons); any registered scheme runs
# (hcct_lite.schemes.registry: "fixed", a partition given by hand, and extensions).
SCHEMES = PAPER_SCHEMES


_PART_DEFAULT = object()  # RunConfig.option without a default: the part's


@dataclass(frozen=True)
class RunConfig:
    """Every setting of one experiment (written to the result JSON as ``config``).

    Immutable (``dataclasses.replace(cfg, epochs=5)`` makes another) and validated when
    built, naming the setting: :class:`SettingTypeError` for a wrong type, ``ValueError``
    out of range (:func:`validate_config`). NumPy scalars become Python numbers,
    ``domains`` a tuple, ``partition`` tuples (:meth:`to_dict` gives lists back).
    :func:`make_config` fills in a task's Table III defaults.

    Parameters
    ----------
    task, scheme : str
        A registered task and scheme.
    seed : int in [0, 2**32), default=0
        Seeds the data split, the models' initial weights and every later draw.
    model, dataset, domains : str, str, tuple of str
        The network, and the data set(s) the clients are drawn from.
    n_clients, samples, train_ratio : int, int, float in (0, 1)
        The clients N, the average samples per client, the share each trains on.
    batch_size, lr, lr_decay, local_epochs, epochs : int, float, float, int, int
        Local SGD: eta^t = lr * lr_decay^(t-1) in epoch t = 1, 2, ..., epochs.
    alpha : float >= 0, default=1.0
        The utility's weight of data, U_i = -alpha / D_k + cos(g_i, g_k).
    cluster_models, soft_groups : int
        IFCA's and FLSC's cluster models, and the models an FLSC client averages.
    maxfl_reference_epochs, maxfl_threshold : int, {"distance", "reference-loss"}
        MAXFL's reference models and its rule.
    fixed_groups : int or None, default=None
        The HCCT family forced to exactly K groups (Figs. 5 and 6).
    update_includes_buffers, authors_round0 : bool, default=False
        Batch-norm buffers in g_i; the authors' code's first round (docs/schemes.md).
    partition : tuple of tuples of int or None
        The ``fixed`` scheme's groups, e.g. ``((0, 1), (2,))``.
    record_cosines : bool, default=False
        Store each epoch's pairwise update cosines in the history.
    initial_clients, new_clients, join_every : int or None, int, int
        Incoming clients (Fig. 3): clients at epoch 0, and how many join how often.
    data_root, download, device : str or None, bool, str
        Where the data sets are, whether torchvision may fetch them, ``cpu``, ``cuda`` or
        ``auto``; none of them changes what a run computes.
    options : dict or tuple of (name, value) pairs, default=()
        The optional parts' settings: the deployment's ``norm_limit``, ``count_bound``,
        ``aggregator``, ``clip_factor``, ``trim_fraction``; the GPU's ``cuda_graphs``,
        ``batched_clients``, ``gpu_precision``. Stored without those at their part's
        default; read one with :meth:`option`. The part that adds a setting checks it.
        ``dataclasses.replace(cfg, options=...)`` replaces them all: merge with
        ``{**dict(cfg.options), ...}`` to change one.

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
    initial_clients: int | None = None  # incoming clients (Fig. 3): clients at epoch 0
    new_clients: int = 0  # ... and this many join every `join_every` epochs
    join_every: int = 10
    data_root: str | None = None
    download: bool = True
    device: str = "cpu"
    # the settings an optional part adds (the deployment's defences, the GPU's ways of
    # training): name -> value, those that differ from the part's default (:meth:`option`)
    options: tuple = ()

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
        object.__setattr__(self, "options", _set_options(self.options))
        validate_config(self)

    def option(self, name: str, default=_PART_DEFAULT):
        """The value of the optional part's setting ``name``: as set, or else ``default``.

        Without ``default``, the part's own default (the core passes one: it reads a
        part's setting even where that part is not installed).

        Raises
        ------
        ValueError
            If ``name`` is not set, no ``default`` is given and no installed part adds it.
        """
        for key, value in self.options:
            if key == name:
                return value
        return _part_default(name) if default is _PART_DEFAULT else default

    def to_dict(self) -> dict:
        """Every setting as a plain dict (the result JSON's ``config``): sequences as lists.

        The optional parts' settings sit beside the paper's, each with its value.
        """
        out = dataclasses.asdict(self)
        del out["options"]
        out["domains"] = list(self.domains)
        if self.partition is not None:
            out["partition"] = [list(g) for g in self.partition]
        out.update({name: self.option(name) for name in part_settings()})
        return out

    @classmethod
    def from_dict(cls, settings: dict) -> RunConfig:
        """The RunConfig of :meth:`to_dict`'s ``settings``, the parts' settings as options."""
        fields, options = _split(settings)
        return cls(**fields, options=options)


def setting_names() -> tuple:
    """Every setting a run takes: the RunConfig's fields and the parts' settings."""
    fields = [f.name for f in dataclasses.fields(RunConfig) if f.name != "options"]
    return (*fields, *part_settings())


def _part_default(name: str):
    spec = part_settings()
    if name not in spec:
        fields = {f.name for f in dataclasses.fields(RunConfig)} - {"options"}
        if name in fields:
            raise ValueError(f"{name!r} is a RunConfig field, not an option")
        raise ValueError(f"unknown setting {name!r}{_closest(name, spec)}; options: {sorted(spec)}")
    return spec[name][0]


def _closest(name, names) -> str:
    """``" (did you mean 'x'?)"`` for the name of ``names`` nearest ``name``, else ``""``."""
    near = difflib.get_close_matches(str(name), list(names), n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""


def _check_option_type(name: str, value, default) -> None:
    """A part's setting of the kind of its default: a bool, a number or a str."""
    kinds = (
        (bool, "a bool (True or False)", lambda v: isinstance(v, bool)),
        ((int, float), "a number", is_number),
        (str, "a str", lambda v: isinstance(v, str)),
    )
    for kind, what, ok in kinds:
        if isinstance(default, kind):
            if not ok(value):
                raise SettingTypeError(
                    f"{name} must be {what}; got {value!r} ({type(value).__name__})"
                )
            return


def _is_default(value, default) -> bool:
    if isinstance(value, bool) or isinstance(default, bool):
        return value is default
    if is_number(value) and is_number(default):
        return value == default
    return type(value) is type(default) and value == default


def _set_options(options) -> tuple:
    """``options`` (a dict or pairs) as sorted pairs, the parts' defaults left out."""
    try:
        pairs = dict(options)
    except (TypeError, ValueError):
        raise SettingTypeError(
            f"options must be a dict of the optional parts' settings; got {options!r}"
        ) from None
    out = []
    for name, value in sorted(pairs.items(), key=lambda kv: str(kv[0])):
        if isinstance(value, np.generic):
            value = value.item()
        default = _part_default(name)
        _check_option_type(name, value, default)
        if not _is_default(value, default):
            out.append((name, value))
    return tuple(out)


def _split(settings: dict) -> tuple:
    """``(fields, options)`` of ``settings``: the RunConfig's own, and the parts'."""
    own = {f.name for f in dataclasses.fields(RunConfig)} - {"options"}
    fields = {k: v for k, v in settings.items() if k in own}
    options = {k: v for k, v in settings.items() if k not in own and k != "options"}
    if "options" in settings:  # given whole too
        try:
            options = {**dict(settings["options"]), **options}
        except (TypeError, ValueError):
            options = settings["options"]  # RunConfig names what is wrong with it
    return fields, options


def make_config(task: str, scheme: str, seed: int = 0, **overrides) -> RunConfig:
    """Build a validated :class:`RunConfig` from a task's defaults and overrides.

    Parameters
    ----------
    task, scheme : str
        A registered task (:data:`~hcct_lite.training.tasks.TASKS`) and scheme.
    seed : int in [0, 2**32), default=0
    **overrides
        Other :class:`RunConfig` fields, and the optional parts' settings (``norm_limit``,
        ``aggregator``, ``batched_clients``, ...), which become its ``options``. ``None``
        ones are ignored. ``alpha`` defaults to the task's for HCCT, HCCT-E or HCCT-P
        (Table III), ``cluster_models`` and ``soft_groups`` to at most ``n_clients``. A
        bad one raises ``ValueError``.

    Returns
    -------
    RunConfig

    Examples
    --------
    >>> make_config("rotated-digits", "hcct", seed=1, epochs=5).epochs
    5
    """
    load_parts()  # the installed extensions' tasks and schemes
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
    unknown = sorted(set(spec) - set(setting_names()) - {"options"}, key=str)
    if unknown:
        names = setting_names()
        raise ValueError(f"unknown settings {unknown}{_closest(unknown[0], names)}")
    if is_number(seed) and math.isfinite(seed) and seed == int(seed):
        seed = int(seed)  # 3.0 or a NumPy int: anything else is named by RunConfig
    fields, options = _split(spec)
    return RunConfig(task=task, scheme=scheme, seed=seed, **fields, options=options)


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

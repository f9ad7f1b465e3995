"""The rules every setting of a :class:`~.config.RunConfig` obeys, each naming the setting.

A wrong type raises :class:`SettingTypeError`, a value out of range ``ValueError``. The
optional parts' settings (the config's ``options``) are checked by the part that adds them.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..parts import find, load_parts, part_missing, part_settings
from ..schemes.registry import scheme_names
from .tasks import TASKS

__all__ = ["COUNT_LIMITS", "MAX_LR", "MIN_LR", "SettingTypeError", "is_number", "validate_config"]


class SettingTypeError(TypeError, ValueError):
    """A setting of the wrong type (a ``TypeError``, and a ``ValueError`` as any bad setting)."""


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


def _check_counts(cfg) -> None:
    """Each count an int within :data:`COUNT_LIMITS`; ``n_clients`` first (it bounds two)."""
    _check_count("n_clients", cfg.n_clients, 1, COUNT_LIMITS["n_clients"])
    lows = {"samples": 0}  # samples 0: the motivating task's whole split
    for name, high in COUNT_LIMITS.items():
        if name != "n_clients":
            _check_count(name, getattr(cfg, name), lows.get(name, 1), high)
    clients = " (the number of clients)"
    _check_count("cluster_models", cfg.cluster_models, 1, cfg.n_clients, clients)
    _check_count("new_clients", cfg.new_clients, 0, cfg.n_clients, clients)


def _check_options(cfg) -> None:
    """Each optional part whose settings ``cfg`` sets checks them (its kind ``"check"``)."""
    spec = part_settings()
    for part in sorted({spec[name][1] for name, _ in cfg.options}):
        check = find("check", part)
        if check is None:
            names = ", ".join(name for name, _ in cfg.options if spec[name][1] == part)
            raise part_missing(f"the settings {names}", part)
        check(cfg)


def _check_device(cfg) -> None:
    _need(
        isinstance(cfg.device, str)
        and (cfg.device in ("cpu", "cuda", "auto") or cfg.device.startswith("cuda:")),
        f"device must be auto, cpu or cuda; got {cfg.device!r}",
    )


def is_number(x) -> bool:
    """Whether ``x`` is a number, NumPy's included (a bool is not)."""
    return isinstance(x, (int, float, np.floating, np.integer)) and not isinstance(x, bool)


# What each annotation of RunConfig admits, in words and as a test (None where it says so)
_KINDS = {
    "int": ("an int", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "float": ("a number", is_number),
    "bool": ("a bool (True or False)", lambda v: isinstance(v, bool)),
    "str": ("a str", lambda v: isinstance(v, str)),
    "tuple": ("a list of names", lambda v: isinstance(v, tuple)),
}


def _check_types(cfg) -> None:
    """Every setting of the type its annotation names, before any range is compared."""
    for f in dataclasses.fields(cfg):
        if f.name == "options":  # checked by the parts that add them
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


def _check_step_size(cfg) -> None:
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


def validate_config(cfg) -> None:
    """Raise naming the first setting of ``cfg`` of the wrong type or out of range.

    :class:`SettingTypeError` for a type, ``ValueError`` for a value; run by every RunConfig.
    """
    _check_types(cfg)
    load_parts()  # the installed extensions' tasks and schemes
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
    _check_options(cfg)

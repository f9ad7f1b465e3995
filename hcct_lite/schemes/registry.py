"""Schemes by name: the one place a scheme is registered (:func:`register_scheme`).

A registered scheme runs everywhere a name is accepted (``make_config``, ``run``,
``compare``, the engine, Flower) with the compute version its class states. A scheme
registered beside :data:`PAPER_SCHEMES` changes none of the paper's grids, report or lessons.
"""

from __future__ import annotations

import importlib
import pkgutil

from ..parts import load_parts, track
from .base import Scheme
from .baselines import FLSC, IFCA, MAXFL, FedFA, Fixed, Global, Independent
from .hcct import HCCT, HCCTE, HCCTP

__all__ = [
    "PAPER_SCHEMES",
    "SCHEME_CLASSES",
    "register_scheme",
    "unregister_scheme",
    "scheme_names",
    "make_scheme",
]

# The paper's schemes, in its order: the grids, the report and the lessons use these.
PAPER_SCHEMES = (
    "independent",
    "global",
    "hcct",
    "hcct-e",
    "hcct-p",
    "maxfl",
    "fedfa",
    "ifca",
    "flsc",
)
# name -> class, and name -> its builder from a RunConfig (both filled by register_scheme)
SCHEME_CLASSES: dict = {}
_BUILDERS: dict = {}
track(SCHEME_CLASSES, _BUILDERS)  # an installed extension may add schemes


def register_scheme(cls, build=None, replace: bool = False):
    """Register the scheme class ``cls`` under its ``name``; return ``cls``.

    Parameters
    ----------
    cls : type
        A subclass of :class:`~hcct_lite.schemes.base.Scheme` with a ``name`` of its own
        and, if its computation ever changes, a bumped ``compute_version`` (an int >= 1).
    build : callable ``cfg -> Scheme``, default=None
        How a run's RunConfig becomes an instance (``None``: ``cls()``): the one place a
        scheme reads its settings.
    replace : bool, default=False
        Replace a scheme registered under the same name (else that is an error).

    Returns
    -------
    type
        ``cls`` itself, so that it can decorate the class.

    Raises
    ------
    ValueError
        If ``cls`` is not a Scheme subclass, has no ``name`` of its own or a
        ``compute_version`` that is not an int >= 1, the name is taken (without
        ``replace``), or ``build`` is not callable.
    """
    if not (isinstance(cls, type) and issubclass(cls, Scheme)):
        raise ValueError(f"a scheme must be a subclass of Scheme; got {cls!r}")
    name = cls.__dict__.get("name")
    if not isinstance(name, str) or not name or name != name.strip():
        raise ValueError(f"{cls.__name__} needs a name of its own (a class attribute 'name')")
    version = cls.compute_version
    if type(version) is not int or version < 1:
        raise ValueError(f"{cls.__name__}.compute_version must be an int >= 1; got {version!r}")
    if name in SCHEME_CLASSES and not replace:
        raise ValueError(f"a scheme named {name!r} is registered already")
    if build is not None and not callable(build):
        raise ValueError(f"build must be callable (cfg -> scheme); got {build!r}")
    SCHEME_CLASSES[name] = cls
    _BUILDERS[name] = build or (lambda cfg: cls())
    return cls


def unregister_scheme(name: str) -> None:
    """Forget the scheme ``name`` (registered by :func:`register_scheme`); not the paper's."""
    if name in PAPER_SCHEMES:
        raise ValueError(f"{name!r} is one of the paper's schemes")
    SCHEME_CLASSES.pop(name, None)
    _BUILDERS.pop(name, None)


def scheme_names() -> tuple:
    """Every registered scheme: the paper's first, in its order, then the others."""
    _discover()
    return PAPER_SCHEMES + tuple(n for n in SCHEME_CLASSES if n not in PAPER_SCHEMES)


def make_scheme(name: str, cfg) -> Scheme:
    """A fresh scheme ``name`` configured from ``cfg``.

    Each scheme takes only its own settings in its constructor; its registered builder is
    the one place that reads them from a run's configuration.

    Parameters
    ----------
    name : str
        A registered scheme (:func:`scheme_names`), e.g. ``"hcct"`` or ``"ifca"``.
    cfg : RunConfig
        The run's settings.

    Returns
    -------
    Scheme
        A new instance. It averages by FedAvg; a deployment's defence may give it a robust
        aggregator (:class:`~hcct_lite.deploy.defences.layer.Defence`).

    Raises
    ------
    ValueError
        If ``name`` is not a registered scheme (the message lists those that are).

    Examples
    --------
    >>> from hcct_lite import make_config, make_scheme
    >>> cfg = make_config("rotated-digits", "hcct")
    >>> scheme = make_scheme("hcct", cfg)
    >>> type(scheme).__name__, scheme.alpha  # the task's alpha for HCCT (Table III)
    ('HCCT', 50.0)
    """
    _discover()
    if name not in SCHEME_CLASSES:
        raise ValueError(f"unknown scheme {name!r}; choose from {sorted(SCHEME_CLASSES)}")
    return _BUILDERS[name](cfg)


def _hcct_family(cls):
    return lambda cfg: cls(cfg.alpha, cfg.fixed_groups, cfg.authors_round0)


for _cls, _build in (
    (Independent, lambda cfg: Independent(cfg.authors_round0)),
    (Global, lambda cfg: Global(cfg.authors_round0)),
    (HCCT, _hcct_family(HCCT)),
    (HCCTE, _hcct_family(HCCTE)),
    (HCCTP, _hcct_family(HCCTP)),
    (
        MAXFL,
        lambda cfg: MAXFL(
            cfg.lr, cfg.local_epochs, cfg.maxfl_reference_epochs, cfg.maxfl_threshold
        ),
    ),
    (FedFA, lambda cfg: FedFA(cfg.authors_round0)),
    (IFCA, lambda cfg: IFCA(cfg.cluster_models)),
    (FLSC, lambda cfg: FLSC(cfg.cluster_models, cfg.soft_groups)),
    # not a scheme of the paper: a partition given by hand (Table II's patterns)
    (Fixed, lambda cfg: Fixed(cfg.partition, cfg.authors_round0)),
):
    register_scheme(_cls, _build)

_DISCOVERED = []


def _discover() -> None:
    """Import every module of this package once: a scheme module there registers itself.

    Done when the registry is first used, with the installed extensions' schemes
    (:mod:`hcct_lite.parts`); a scheme of a script registers before it runs.
    """
    if _DISCOVERED:
        return
    _DISCOVERED.append(True)
    for info in pkgutil.iter_modules(importlib.import_module(__package__).__path__):
        importlib.import_module(f"{__package__}.{info.name}")
    load_parts()

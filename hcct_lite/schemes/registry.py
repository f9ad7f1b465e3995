"""Schemes by name: :func:`make_scheme`."""

from __future__ import annotations

from .base import Scheme
from .baselines import FLSC, IFCA, MAXFL, FedFA, Fixed, Global, Independent
from .hcct import HCCT, HCCTE, HCCTP
from .robust import Aggregator

__all__ = ["SCHEME_CLASSES", "make_scheme"]

SCHEME_CLASSES = {
    c.name: c for c in (Independent, Global, FedFA, HCCT, HCCTE, HCCTP, MAXFL, IFCA, FLSC, Fixed)
}


def make_scheme(name: str, cfg) -> Scheme:
    """A fresh scheme ``name`` configured from ``cfg`` (a RunConfig), with its aggregator.

    Each scheme takes only its own settings in its constructor; this is the one place
    that reads them from a run's configuration.
    """
    scheme = _scheme(name, cfg)
    scheme.aggregator = Aggregator(
        cfg.aggregator, cfg.clip_factor, cfg.trim_fraction, cfg.batch_size, cfg.local_epochs
    )
    return scheme


def _scheme(name: str, cfg) -> Scheme:
    if name not in SCHEME_CLASSES:
        raise ValueError(f"unknown scheme {name!r}; choose from {sorted(SCHEME_CLASSES)}")
    if name in ("hcct", "hcct-e", "hcct-p"):
        return SCHEME_CLASSES[name](cfg.alpha, cfg.fixed_groups, cfg.authors_round0)
    if name == "fixed":
        return Fixed(cfg.partition, cfg.authors_round0)
    if name == "maxfl":
        return MAXFL(cfg.lr, cfg.local_epochs, cfg.maxfl_reference_epochs, cfg.maxfl_threshold)
    if name == "ifca":
        return IFCA(cfg.cluster_models)
    if name == "flsc":
        return FLSC(cfg.cluster_models, cfg.soft_groups)
    return SCHEME_CLASSES[name](cfg.authors_round0)

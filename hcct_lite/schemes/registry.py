"""Schemes by name: :func:`make_scheme`."""

from __future__ import annotations

from .base import Scheme
from .baselines import FLSC, IFCA, MAXFL, FedFA, Fixed, Global, Independent
from .hcct import HCCT, HCCTE, HCCTP

__all__ = ["SCHEME_CLASSES", "make_scheme"]

SCHEME_CLASSES = {
    c.name: c for c in (Independent, Global, FedFA, HCCT, HCCTE, HCCTP, MAXFL, IFCA, FLSC, Fixed)
}


def make_scheme(name: str) -> Scheme:
    """A fresh scheme object by name (see :data:`hcct_lite.tasks.SCHEMES`)."""
    if name not in SCHEME_CLASSES:
        raise ValueError(f"unknown scheme {name!r}; choose from {sorted(SCHEME_CLASSES)}")
    return SCHEME_CLASSES[name]()

"""Server-side schemes: who trains with whom each epoch, and how models are averaged.

``base`` holds the contracts (:class:`Plan`, :class:`ServerView`, :class:`Scheme`), ``hcct``
HCCT and its variants, ``baselines`` the paper's baselines, ``registry`` :func:`make_scheme`.
"""

from .base import GroupScheme, Plan, Scheme, ServerView, weighted_average
from .registry import make_scheme, register_scheme

__all__ = [
    "Plan",
    "ServerView",
    "Scheme",
    "GroupScheme",
    "weighted_average",
    "make_scheme",
    "register_scheme",
]

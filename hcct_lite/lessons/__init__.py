"""Exercises that check themselves.

A student's answer is judged against one computed from the notebook's own data; a wrong one
gets a hint that teaches and never the answer (:func:`check`).
"""

from .checks import Exercise
from .exercises import EXERCISES, check

__all__ = ["Exercise", "check", "EXERCISES"]

"""What a check is: an exercise's answer, how it is judged, and the feedback.

The right answer is computed when the check runs, from the data the notebook holds in its
current mode (``quick``, ``shipped`` or ``full``) on the student's own machine, so a
numeric answer is judged with a relative tolerance for rounding only: it holds in every
mode and on any CPU, whose float noise is far below it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Exercise", "feedback", "judge"]


@dataclass(frozen=True)
class Exercise:
    """One checkable exercise.

    Attributes
    ----------
    key : str, ``"<notebook>.<number>"``, e.g. ``"01.2"``
    asks : str, what the answer is (a number, True/False, a name, a list), for the prompt
    reference : callable, ``(**data) -> right answer`` from the notebook's own objects
    needs : tuple of str, the names of ``data`` the reference takes
    kind : ``"number"``, ``"bool"``, ``"choice"`` (a name, case-insensitive),
        ``"sequence"`` (an ordered list of names) or ``"set"`` (in any order)
    rtol : float, relative tolerance of a number (rounding to 3 significant digits passes)
    hint : str, what to do when the answer is wrong; it never states the answer
    wrong : answer that is wrong on every data set, for the tests
    """

    key: str
    asks: str
    reference: Callable
    hint: str
    wrong: object
    needs: tuple = ()
    kind: str = "number"
    rtol: float = 0.01


def _norm(x) -> str:
    return str(x).strip().lower().replace(" ", "")


def judge(kind: str, answer, right, rtol: float = 0.01) -> bool:
    """Whether ``answer`` is ``right`` for an exercise of ``kind``."""
    if kind == "number":
        try:
            value = float(answer)
        except (TypeError, ValueError):
            return False
        return math.isfinite(value) and math.isclose(value, float(right), rel_tol=rtol)
    if kind == "bool":
        return isinstance(answer, bool) and answer == right
    if kind == "choice":
        return _norm(answer) == _norm(right)
    if kind == "set":
        return isinstance(answer, list | tuple | set) and sorted(map(_norm, answer)) == sorted(
            map(_norm, right)
        )
    if kind == "sequence":
        return isinstance(answer, list | tuple) and [_norm(a) for a in answer] == [
            _norm(r) for r in right
        ]
    raise ValueError(f"unknown kind of exercise {kind!r}")


def _direction(answer, right) -> str:
    return " Your number is too high." if float(answer) > float(right) else " Too low."


def feedback(ex: Exercise, answer, right) -> tuple:
    """``(right?, message)`` for ``answer`` to ``ex`` whose right answer is ``right``."""
    if judge(ex.kind, answer, right, ex.rtol):
        return True, f"Exercise {ex.key}: right."
    hint = ex.hint
    if ex.kind == "number" and _numeric(answer):
        hint += _direction(answer, right)
    return False, f"Exercise {ex.key}: not yet. {hint}"


def _numeric(x) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False

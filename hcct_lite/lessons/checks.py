"""How an answer is judged: one rule for every check and for the final assessment's grader.

An answer is first read as the kind the exercise asks for (:func:`read_answer`), whatever
type a student typed it in; one that cannot be read gets a sentence saying what is wanted,
never a traceback. A readable answer is then compared with the right one (:func:`judge`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

__all__ = ["KINDS", "Exercise", "Unreadable", "Verdict", "judge", "read_answer", "verdict"]

KINDS = ("number", "integer", "bool", "choice", "set", "sequence")
ALIASES = {"fedavg": "global"}  # other names of a choice: Global is FedAvg of all clients


class Unreadable(ValueError):
    """An answer that cannot be read as the kind an exercise asks for; says what is wanted."""


@dataclass(frozen=True)
class Exercise:
    """One checkable exercise.

    Attributes
    ----------
    key : str, ``"<notebook>.<number>"``, e.g. ``"01.2"``
    asks : str, what the answer is, with its precision, for the prompt ("a number, to one
        decimal")
    reference : callable, ``() -> right answer``, computed from the mode's data, never
        from the student's variables
    hint : str, what to do when the answer is wrong: the method, never the answer
    wrong : tuple, plausible wrong answers, each a value or a function computing one from
        the mode's data (the tests check that each is rejected)
    kind : one of :data:`KINDS`
    decimals : int, for a ``number``: the decimals asked for (the tolerance is half a unit
        of the last one)
    options : tuple of str, for a ``choice``: the names a student may give
    clients : bool, whether the answer names clients (counted from 1 in every notebook)
    """

    key: str
    asks: str
    reference: Callable
    hint: str
    wrong: tuple
    kind: str = "number"
    decimals: int | None = None
    options: tuple = ()
    clients: bool = False

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"exercise {self.key}: unknown kind {self.kind!r}; one of {KINDS}")
        if (self.kind == "number") != (self.decimals is not None):
            raise ValueError(f"exercise {self.key}: decimals is for (and needed by) a number")
        if (self.kind == "choice") != bool(self.options):
            raise ValueError(f"exercise {self.key}: options are for (and needed by) a choice")


def _one(answer):
    """The single element of a one-element list, tuple, array or tensor; ``answer`` otherwise."""
    if not isinstance(answer, np.ndarray) and callable(getattr(answer, "numpy", None)):
        try:  # a torch tensor, read through NumPy
            answer = np.asarray(answer.detach().cpu().numpy())
        except Exception:  # noqa: BLE001 - an object only pretending to be a tensor
            raise Unreadable(f"{_describe(answer)} that could not be read") from None
    if isinstance(answer, np.ndarray):
        if answer.size != 1:
            raise Unreadable(f"an array of {answer.size} values, where one is wanted")
        return answer.reshape(()).item()
    if isinstance(answer, list | tuple):
        if len(answer) != 1:
            raise Unreadable(f"{_describe(answer)} of {len(answer)} values, where one is wanted")
        return _one(answer[0])
    return answer


def _text(answer) -> str | None:
    if isinstance(answer, str | np.str_):
        return str.strip(str.__str__(answer))
    return None


def _number(answer) -> float:
    answer = _one(answer)
    if isinstance(answer, bool | np.bool_):
        raise Unreadable("True or False, where a number is wanted")
    text = _text(answer)
    if text is not None:
        try:
            value = Fraction(text.replace("_", "")) if "/" in text else float(text)
        except (ValueError, ZeroDivisionError):
            comma = " (write the decimal point as '.')" if "," in text else ""
            raise Unreadable(f"the text {text[:40]!r}, which is not a number{comma}") from None
    elif isinstance(answer, complex | np.complexfloating):
        raise Unreadable("a complex number, where a real one is wanted")
    elif isinstance(answer, numbers.Real | np.integer | np.floating):
        value = answer
    else:
        raise Unreadable(f"{_describe(answer)}, where a number is wanted")
    try:  # base-class readers: a subclass cannot lie about the value it holds
        if isinstance(value, float):
            value = float.__float__(value)
        else:
            value = float(int.__int__(value) if isinstance(value, int) else value)
    except (OverflowError, TypeError, ValueError):
        raise Unreadable("a number too large to be the answer") from None
    if not math.isfinite(value):
        raise Unreadable(f"{value}, where a finite number is wanted")
    return value


def _bool(answer) -> bool:
    answer = _one(answer)
    if isinstance(answer, bool | np.bool_):
        return bool(answer)
    text = _text(answer)
    if text is not None and str.lower(text) in ("true", "false"):
        return str.lower(text) == "true"
    raise Unreadable(f"{_describe(answer)}, where True or False is wanted")


def _name(item) -> str:
    """A name without case, spaces, ``-``, ``_`` or quotes; a pair ``(1, 2)`` as ``(1,2)``."""
    if isinstance(item, tuple):
        return "(" + ",".join(_name(i) for i in item) + ")"
    text = _text(item)
    if text is None:
        if isinstance(item, bool | np.bool_) or not isinstance(item, numbers.Real | np.integer):
            raise Unreadable(f"an item {_describe(item)}, where whole numbers or names are wanted")
        value = _number(item)
        if value != int(value):
            raise Unreadable(f"an item {value}, where whole numbers are wanted")
        return str(int(value))
    text = str.lower(text)
    for mark in (" ", "-", "_", "'", '"'):
        text = str.replace(text, mark, "")
    try:  # "3" and "3.0" name the same client
        return str(int(float(text))) if float(text) == int(float(text)) else text
    except (ValueError, OverflowError):
        return text


def _items(answer) -> list:
    if isinstance(answer, np.ndarray):
        if answer.ndim != 1:
            raise Unreadable(f"an array of shape {answer.shape}, where a flat list is wanted")
        answer = answer.tolist()
    if isinstance(answer, str | np.str_):
        raise Unreadable("a text, where a list is wanted (write it as a list, e.g. [1, 2])")
    if not isinstance(answer, list | tuple | set | frozenset):
        raise Unreadable(f"{_describe(answer)}, where a list is wanted")
    return [_name(item) for item in answer]


def _describe(answer) -> str:
    if answer is None:
        return "None"
    name = type(answer).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def read_answer(kind: str, answer, options: tuple = ()):
    """``answer`` read as ``kind`` (float, bool, name or list of names).

    Raises :class:`Unreadable`, saying what was given and what is wanted, for anything else.
    Only base-class methods read strings and numbers, so a subclass that lies about its
    value is read as what it holds.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown kind of answer {kind!r}; one of {KINDS}")
    if answer is None:
        raise Unreadable("None (no answer yet)")
    if kind == "number":
        return _number(answer)
    if kind == "integer":
        value = _number(answer)
        if value != int(value):
            raise Unreadable(f"{value}, where a whole number is wanted")
        return int(value)
    if kind == "bool":
        return _bool(answer)
    if kind == "choice":
        answer = _one(answer)
        if _text(answer) is None:
            raise Unreadable(f"{_describe(answer)}, where a name is wanted")
        name = ALIASES.get(_name(answer), _name(answer))
        known = [o for o in options if _name(o) == name]
        if options and not known:
            raise Unreadable(f"{_text(answer)[:40]!r}, not one of {', '.join(options)}")
        return name
    items = _items(answer)
    return items if kind == "sequence" else sorted(items)


def judge(kind: str, answer, right, decimals: int | None = None, options: tuple = ()) -> bool:
    """Whether ``answer`` is ``right`` for an exercise of ``kind`` (an unreadable one is not).

    ``decimals`` (a ``number``'s precision) sets the tolerance: half a unit of the last
    decimal, plus a millionth of that for the float noise of the answer's own arithmetic.
    So the value the notebook prints is right, and so is any more precise one. An
    ``integer`` must be exact: a boundary question has one right answer. A ``set`` is
    compared in any order, a ``sequence`` in order; a ``choice`` ignores case, spaces,
    ``-`` and ``_``.
    """
    try:
        given = read_answer(kind, answer, options)
    except Unreadable:
        return False
    truth = read_answer(kind, right, options)
    if kind == "number":
        if decimals is None:
            raise ValueError("a number is judged at a precision: give decimals")
        return abs(given - truth) <= 0.5 * 10.0**-decimals * (1 + 1e-6)
    return given == truth


class Verdict:
    """A check's verdict: true when right; shows nothing (the check printed its message)."""

    __slots__ = ("right", "message")

    def __init__(self, right: bool, message: str):
        self.right, self.message = bool(right), message

    def __bool__(self) -> bool:
        return self.right

    def __repr__(self) -> str:
        return f"Verdict(right={self.right})"

    def _ipython_display_(self):  # the message is printed already: no stray True/False
        pass


def verdict(ex: Exercise, answer, right) -> Verdict:
    """The :class:`Verdict` on ``answer`` to ``ex`` whose right answer is ``right``."""
    if answer is Ellipsis:
        return Verdict(False, f"Exercise {ex.key}: replace ... with {ex.asks}, then run again.")
    try:
        read_answer(ex.kind, answer, ex.options)
    except Unreadable as why:
        return Verdict(
            False, f"Exercise {ex.key}: your answer is {why}; the exercise wants {ex.asks}."
        )
    if judge(ex.kind, answer, right, ex.decimals, ex.options):
        return Verdict(True, f"Exercise {ex.key}: right.")
    return Verdict(False, f"Exercise {ex.key}: not yet. {ex.hint}")

"""Reading a silo's replies: every field checked before use, every refusal a sentence.

A reply is input, not trusted: each reader returns the value or raises ``ValueError`` with
one sentence a server operator can act on ("missing parameter fc2.bias", "metric
train-loss is not a number ('lots')"), never a raw ``KeyError``. The engine's reply
screen then judges the values that parse (finite, in range, the right client).
"""

from __future__ import annotations

from ...training.config import COUNT_LIMITS
from ...training.local import LocalResult, update_of
from .common import from_record

__all__ = ["TRAIN_METRICS", "metric", "training_result", "enrolment"]

TRAIN_METRICS = ("num-examples", "train-loss", "train-acc")


def _record(content, name: str):
    try:
        return content[name]
    except Exception:  # noqa: BLE001 - a missing record, or content that is no mapping
        raise ValueError(f"the reply has no {name} record") from None


def metric(content, name: str) -> float:
    """The number ``name`` of the reply's metrics record."""
    record = _record(content, "metrics")
    try:
        raw = record[name]
    except Exception:  # noqa: BLE001 - whatever the record is, the metric is missing
        raise ValueError(f"missing metric {name}") from None
    try:
        return float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"metric {name} is not a number ({raw!r})") from None


def training_result(content, start: dict, names, lr: float) -> LocalResult:
    """A training reply as the engine's ``LocalResult``, checked against the model sent.

    Parameters
    ----------
    content : the reply's records (``model`` and ``metrics``)
    start : the state the silo was sent; every entry of ``names`` must come back with its
        shape
    names : the entries the update is computed over
    lr : the learning rate of the epoch
    """
    model = _record(content, "model")
    try:
        state = from_record(model)
    except Exception as err:  # noqa: BLE001 - any unreadable model record
        raise ValueError(f"its model record cannot be read ({type(err).__name__})") from None
    for name in names:
        if name not in state:
            raise ValueError(f"missing parameter {name}")
        got, want = tuple(state[name].shape), tuple(start[name].shape)
        if got != want:
            raise ValueError(f"parameter {name} has shape {got}; the model sent has {want}")
    values = [metric(content, m) for m in TRAIN_METRICS]
    return LocalResult(state, update_of(start, state, lr, names), *values)


def enrolment(content, n_clients: int) -> tuple:
    """``(partition id, samples)`` a node declares, or ``(None, why not)``.

    The sample count must be a whole number from 1 to ``COUNT_LIMITS["samples"]``: a
    count the server cannot hold (9.3e18) or that weighs nothing (0) is refused.
    """
    try:
        info = _record(content, "info")
        i, size = float(info["partition-id"]), float(info["num-examples"])
    except Exception as err:  # noqa: BLE001 - any malformed reply
        return None, f"unreadable enrolment ({type(err).__name__}: {err})"
    if not (i.is_integer() and 0 <= i < n_clients):
        return None, f"partition-id {i:g} is not in 0..{n_clients - 1}"
    limit = COUNT_LIMITS["samples"]
    if not (size.is_integer() and 1 <= size <= limit):
        return None, f"num-examples {size:g} is not a whole number from 1 to {limit:,}"
    return int(i), int(size)

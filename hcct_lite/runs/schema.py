"""What a stored result must be before anything reuses, verifies or reports it.

One check (:func:`result_problem`), made where a file is read, serves the store, ``verify``
and the report: the fields and their types; the config, through the same validation as a
new run (:func:`~hcct_lite.training.config.make_config`); the history, epoch by epoch,
against the client count (groups that name only clients present that epoch, once each;
one error per client, a percentage or None); and the ``final`` block, which must be what
the history says (:func:`~hcct_lite.training.engine.summarize`).
"""

from __future__ import annotations

import math

import numpy as np

from .derived import derived_problem

__all__ = ["result_problem", "config_problem"]

# a stored statistic may differ from its recomputation by float rounding only
_TOLERANCE = 1e-6


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _typed(r: dict, key: str, kind) -> str | None:
    if key not in r:
        return f"no '{key}'"
    v = r[key]
    if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
        return f"its {key} is {type(v).__name__}, not {kind.__name__}"
    return None


def config_problem(config: dict) -> tuple:
    """``(RunConfig, None)`` for a stored config a new run would accept, else ``(None, why)``.

    Settings this version does not know (from older code) are left out, as a rerun would.
    """
    from dataclasses import fields

    from ..training.config import RunConfig, make_config

    known = {f.name for f in fields(RunConfig)} - {"task", "scheme", "seed"}
    try:
        rest = {k: v for k, v in config.items() if k in known}
        return make_config(config["task"], config["scheme"], config["seed"], **rest), None
    except (TypeError, ValueError, OverflowError) as err:
        return None, f"its config is not one a run accepts ({err})"


def _per_client(r: dict, key: str, n: int) -> str | None:
    v = r.get(key)
    if not isinstance(v, list) or len(v) != n:
        return f"its {key} must list the {n} clients; got {str(v)[:60]}"
    return None


def _epoch_problem(t: int, h, active: int, most: int) -> str | None:
    """What is wrong with history entry ``t`` of a federation of ``active`` clients.

    A client may sit in up to ``most`` groups (FLSC's soft groups; 1 otherwise).
    """
    if not isinstance(h, dict) or not isinstance(h.get("groups"), list):
        return f"history epoch {t} has no groups"
    seen = []
    for g in h["groups"]:
        if not isinstance(g, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                              for i in g):  # fmt: skip
            return f"history epoch {t} has a group that is not a list of clients: {g!r}"
        if len(set(g)) < len(g):
            return f"history epoch {t} has a group that names a client twice: {g}"
        seen += g
    if any(not 0 <= i < active for i in seen):
        return f"history epoch {t}'s groups name clients outside 0..{active - 1}"
    if seen and max(seen.count(i) for i in set(seen)) > most:
        return f"history epoch {t}'s groups hold a client in more than {most} group(s)"
    errors = h.get("client_test_error")
    if not isinstance(errors, list) or len(errors) != active:
        return f"history epoch {t} must give {active} client errors"
    if not all(e is None or (_finite(e) and 0 <= e <= 100) for e in errors):
        return f"history epoch {t} holds an error that is not a percentage"
    return None


def _final_problem(final: dict, history: list) -> str | None:
    from ..training.engine import summarize

    try:
        want = summarize(history)
    except (TypeError, ValueError, KeyError, IndexError):
        want = {"mean": None}
    if want["mean"] is None:  # no client answered in any epoch: nothing was measured
        return "its history holds no error to summarise"
    if final.get("client_test_error") != want["client_test_error"]:
        return "its final client errors are not its last epoch's"
    pairs = [(k, final.get(k), want[k]) for k in ("mean", "std", "min", "max")]
    best = final.get("best_over_epochs")
    best = best if isinstance(best, dict) else {}
    pairs += [(f"best_over_epochs {k}", best.get(k), want["best_over_epochs"][k])
              for k in ("mean", "std", "min", "max")]  # fmt: skip
    for name, have, should in pairs:
        if not _finite(have) or abs(have - should) > _TOLERANCE * max(1.0, abs(should)):
            return f"its final {name} is {have!r}; its history says {should:.6g}"
    return None


def _history_problem(r: dict, cfg) -> str | None:
    from ..training.config import arrival_epochs

    arrive = arrival_epochs(cfg)
    most = cfg.soft_groups if cfg.scheme == "flsc" else 1
    for t, h in enumerate(r["history"]):
        if problem := _epoch_problem(t, h, int(np.sum(arrive <= t)), most):
            return problem
    return None


def result_problem(r) -> str | None:
    """What makes ``r`` (a loaded result) unusable as a finished run; None if nothing.

    Checked: the top-level fields and their types; the body's task, scheme and seed equal
    its config's, and the config is one a new run accepts; the run completed (not stopped)
    with one history entry per configured epoch, each naming only the clients present that
    epoch; ``sizes`` and ``domains`` for every client; a provenance, if any, that is an
    object; and a final block that is its history's summary.
    """
    if not isinstance(r, dict):
        return f"it holds a JSON {type(r).__name__}, not an object"
    for key, kind in (("task", str), ("scheme", str), ("seed", int), ("config", dict),
                      ("history", list), ("final", dict)):  # fmt: skip
        if problem := _typed(r, key, kind):
            return problem
    for key in ("task", "scheme", "seed"):
        if r["config"].get(key) != r[key]:
            return f"its {key} is {r[key]!r} but its config says {r['config'].get(key)!r}"
    cfg, problem = config_problem(r["config"])
    if problem:
        return problem
    status = r.get("status", {"state": "complete"})
    if not isinstance(status, dict) or status.get("state") != "complete":
        why = status.get("reason", "?") if isinstance(status, dict) else status
        return f"a stopped run ({why})"
    if "provenance" in r and not isinstance(r["provenance"], dict):
        return f"its provenance is {type(r['provenance']).__name__}, not an object"
    if len(r["history"]) != cfg.epochs:
        return f"{len(r['history'])} epochs of history, its config asks for {cfg.epochs}"
    for key in ("sizes", "domains"):
        if problem := _per_client(r, key, cfg.n_clients):
            return problem
    return (
        _history_problem(r, cfg)
        or _final_problem(r["final"], r["history"])
        or derived_problem(r, cfg)
    )

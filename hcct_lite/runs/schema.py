"""What a stored result must be before anything reuses, verifies or reports it.

One check (:func:`result_problem`), made where a file is read, serves the store, ``verify``
and the report: the fields, the config (validated as a new run's), the history against the
client count, the ``final`` block against the history, and every derived field
(:func:`derived_problem`).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["result_problem", "config_problem", "derived_problem", "MAX_SAMPLES"]

# A stored result's derived fields, each checked against what it derives from.
#
# A result holds numbers that follow from others: an epoch's mean error from its client
# errors, its ``missing`` from the errors that are None, its learning rate from the config,
# the vouched counts from the declared ones, a rejection from the epoch it made a client
# miss. A file whose derived fields disagree was edited (or written by broken code), and
# nothing may reuse, verify or report it: :func:`derived_problem` says what disagrees.

# the largest count a silo may declare at enrolment (hcct_lite.deploy.flower.reading's limit)
MAX_SAMPLES = 10_000_000
# a stored statistic may differ from its recomputation by float rounding only
_TOLERANCE = 1e-6


def _int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _close(have, want) -> bool:
    return _finite(have) and abs(have - want) <= _TOLERANCE * max(1.0, abs(want))


def _none_at(errors) -> list:
    return [i for i, e in enumerate(errors) if e is None]


def _clients_problem(r: dict, n: int) -> str | None:
    sizes, domains = r.get("sizes"), r.get("domains")
    if not all(_int(s) and 0 <= s <= MAX_SAMPLES for s in sizes):
        return f"its sizes must be whole numbers from 0 to {MAX_SAMPLES:,}; got {str(sizes)[:60]}"
    if not all(isinstance(d, str) for d in domains):
        return f"its domains must be words; got {str(domains)[:60]}"
    return None


def _device_problem(r: dict, cfg) -> str | None:
    """Why the device the provenance names is not of its config's kind (cpu, cuda); or None."""
    said = (r.get("provenance") or {}).get("device")
    kind = str(said).split(":")[0].split(" ")[0]  # "cuda (NVIDIA H200)", "cuda:0": cuda
    if said is not None and cfg.device != "auto" and kind != cfg.device.split(":")[0]:
        return f"its provenance says it ran on {said!r}, its config on {cfg.device!r}"
    return None


def _epoch_derived_problem(t: int, h: dict, cfg) -> str | None:
    errors = h["client_test_error"]
    answered = [e for e in errors if e is not None]
    if h.get("epoch") != t or not _int(h.get("epoch")):
        return f"history entry {t} says it is epoch {h.get('epoch')!r}"
    if not _close(h.get("lr"), cfg.lr * cfg.lr_decay**t):
        return f"history epoch {t}'s lr {h.get('lr')!r} is not its config's lr x lr_decay^{t}"
    if h.get("n_groups") != len(h["groups"]):
        return f"history epoch {t}'s n_groups {h.get('n_groups')!r} is not its group count"
    mean = h.get("mean_test_error")
    want = sum(answered) / len(answered) if answered else None
    if mean is not want and not (want is not None and _close(mean, want)):
        return f"history epoch {t}'s mean_test_error {mean!r} is not the mean of its client errors"
    if h.get("missing") != _none_at(errors):
        return (
            f"history epoch {t}'s missing {h.get('missing')!r} is not its clients without an error"
        )
    loss = h.get("train_loss")
    if not isinstance(loss, list) or len(loss) != len(errors):
        return f"history epoch {t} must give {len(errors)} training losses"
    for i, x in enumerate(loss):
        if x is None and errors[i] is not None:
            return f"history epoch {t}: client {i} has an error but did not train"
        if x is not None and not (_finite(x) and x >= 0):
            return f"history epoch {t}: client {i}'s training loss {x!r} is not a number >= 0"
    return None


def _final_missing_problem(final: dict) -> str | None:
    best = final.get("best_over_epochs")
    for name, block in (("final", final), ("final best_over_epochs", best)):
        errors = block.get("client_test_error") if isinstance(block, dict) else None
        if not isinstance(errors, list):
            return f"its {name} has no client errors"
        # older code recorded no missing; where there is one, it must be the errors' Nones
        if block.get("missing", _none_at(errors)) != _none_at(errors):
            return f"its {name} missing does not name the clients without an error"
    return None


def _rejected_problem(r: dict, cfg) -> str | None:
    rejected = r.get("rejected", [])
    if not isinstance(rejected, list):
        return f"its rejected is {type(rejected).__name__}, not a list"
    epochs = len(r["history"])
    for x in rejected:
        ok = (
            isinstance(x, dict)
            and set(x) == {"client", "epoch", "reason"}
            and _int(x["client"])
            and 0 <= x["client"] < cfg.n_clients
            and _int(x["epoch"])
            and 0 <= x["epoch"] < epochs
            and isinstance(x["reason"], str)
            and x["reason"]
        )
        if not ok:
            return f"its rejected holds {str(x)[:80]}, not a client, an epoch and a reason"
        errors = r["history"][x["epoch"]]["client_test_error"]
        # a refused reply makes its client miss the epoch (MAXFL's reference rounds aside:
        # a client whose reference was refused trains alone meanwhile)
        seen = x["client"] < len(errors) and errors[x["client"]] is not None
        if cfg.scheme != "maxfl" and seen:
            return (
                f"its rejected says client {x['client']}'s reply was refused in epoch "
                f"{x['epoch']}, but the client has an error that epoch"
            )
    return None


def _record_problem(entries, inner: str, epochs: int) -> bool:
    """Whether ``entries`` is not a list of ``{"epoch": e, inner: [...]}`` within the run."""
    return not isinstance(entries, list) or not all(
        isinstance(e, dict)
        and _int(e.get("epoch"))
        and 0 <= e["epoch"] < epochs
        and isinstance(e.get(inner), list)
        for e in entries
    )


def _aggregation_problem(r: dict, cfg) -> str | None:
    from ..training.replies import defence_for

    if "aggregation" not in r:  # older code recorded none
        return None
    agg = r["aggregation"]
    aggregator, bound = cfg.option("aggregator", "mean"), cfg.option("count_bound", 0)
    if not isinstance(agg, dict) or agg.get("aggregator") != aggregator:
        got = agg.get("aggregator") if isinstance(agg, dict) else agg
        return f"its aggregation names {got!r}, its config {aggregator!r}"
    epochs = len(r["history"])
    for key, inner in (
        ("few_replies", "groups"),
        ("disputes", "pairs"),
        ("history_left_out", "groups"),
        ("same_voice", "voices"),
        ("no_update", "members"),
    ):
        if key in agg and (aggregator == "mean" or _record_problem(agg[key], inner, epochs)):
            return f"its aggregation {key} is not what a {aggregator} run records"
    # without a bound the counts are as declared; with one, the deployment's rule cuts them
    vouched = r["sizes"] if bound == 0 else defence_for(cfg).vouched(r["sizes"]).tolist()
    if agg.get("vouched_counts", r["sizes"]) != vouched:
        return f"its vouched counts are not its sizes bounded by count_bound {bound:g}"
    return None


def derived_problem(r: dict, cfg) -> str | None:
    """What in ``r`` disagrees with what it derives from, or None.

    ``r`` has passed the structural checks of :func:`~hcct_lite.runs.schema.result_problem`
    (types, config, one history entry per epoch with groups and errors per client); ``cfg``
    is its config. Checked: sizes and domains per client; the device its provenance names
    against its config's; each epoch's number, learning rate, group count, mean error,
    missing clients and training losses; the final blocks' missing clients; every rejection
    (a client, an epoch, a reason, and the client missing that epoch); the aggregation
    record against the config and the sizes.
    """
    if problem := _clients_problem(r, cfg.n_clients) or _device_problem(r, cfg):
        return problem
    for t, h in enumerate(r["history"]):
        if problem := _epoch_derived_problem(t, h, cfg):
            return problem
    return (
        _final_missing_problem(r["final"])
        or _rejected_problem(r, cfg)
        or _aggregation_problem(r, cfg)
    )


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
    from ..training.config import make_config, setting_names

    known = set(setting_names()) - {"task", "scheme", "seed"}
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
        if not isinstance(g, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in g
        ):
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
    pairs += [
        (f"best_over_epochs {k}", best.get(k), want["best_over_epochs"][k])
        for k in ("mean", "std", "min", "max")
    ]
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
    for key, kind in (
        ("task", str),
        ("scheme", str),
        ("seed", int),
        ("config", dict),
        ("history", list),
        ("final", dict),
    ):
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

"""Every client reply is checked here, once, before the engine uses it.

A silo's reply is input: a broken or malicious one must neither crash the run nor enter an
aggregate. :class:`ReplyScreen` checks what a backend returns (trained states, reported
sample counts and metrics, test errors, probe results) against what the server sent and
what the silo declared at enrolment. A bad reply makes that client *missing* for the
epoch; the reason is logged and kept for the result JSON's ``rejected`` list.

:class:`ScreenedBackend` is the backend behind the screen, the one the training loop
uses. A deployment's defence (the deploy part's layer: a count bound, a norm rule, a
robust aggregator) plugs in there, and only where a run's settings ask for one.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from ..parts import find, part_missing
from .provenance import uses_defences

__all__ = [
    "Rejected",
    "ReplyScreen",
    "ScreenedBackend",
    "state_problem",
    "train_problem",
    "update_problem",
    "defence_for",
]

log = logging.getLogger("hcct_lite")


@dataclass(frozen=True)
class Rejected:
    """A reply a backend could not even read (it stands in for the client's result)."""

    reason: str


def _finite(x) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _sums(tensors) -> list:
    """Each tensor's sum, in one host sync.

    A finite sum means every entry is finite (NaN and Inf propagate through a sum), with
    no boolean copy of each tensor as ``isfinite(t).all()`` makes; only a non-finite sum
    (an overflow, or a real NaN/Inf) needs the exact check.
    """
    if not tensors:
        return []
    return torch.stack([t.reshape(-1).sum().double() for t in tensors]).tolist()


def _non_finite(tensor, total) -> bool:
    return not math.isfinite(total) and not bool(torch.isfinite(tensor).all())


def state_problem(state, reference: Mapping) -> str | None:
    """Why ``state`` cannot stand for ``reference`` (same keys, shapes, dtypes, finite), or None."""
    if not isinstance(state, Mapping):
        return f"model is a {type(state).__name__}, not a mapping of tensors"
    missing, extra = set(reference) - set(state), set(state) - set(reference)
    if missing or extra:
        if missing and not extra:
            return f"missing parameter {sorted(missing)[0]}" + (
                f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            )
        return f"model keys differ: missing {sorted(missing)[:3]}, unexpected {sorted(extra)[:3]}"
    floats = []
    for name, ref in reference.items():
        value = state[name]
        if not torch.is_tensor(value):
            return f"{name} is a {type(value).__name__}, not a tensor"
        if value.shape != ref.shape or value.dtype != ref.dtype:
            return (
                f"{name} is {value.dtype} {tuple(value.shape)}; expected {ref.dtype} "
                f"{tuple(ref.shape)}"
            )
        if value.is_floating_point():
            floats.append((name, value))
    for (name, value), total in zip(floats, _sums([v for _, v in floats]), strict=True):
        if _non_finite(value, total):
            return f"{name} has non-finite values"
    return None


def update_problem(update: Mapping) -> str | None:
    """Why an update cannot enter a partition or an average (non-finite values), or None.

    An all-zero update is not refused: an honest client whose model did not move (dead
    ReLUs, say) sends one; HCCT keeps such a client alone
    (:func:`~hcct_lite.partition.updates.all_zero`).
    """
    flat = getattr(update, "flat", None)  # a FlatUpdate: one tensor for all its entries
    values = [flat] if isinstance(flat, torch.Tensor) else list(update.values())
    if any(_non_finite(v, total) for v, total in zip(values, _sums(values), strict=True)):
        return "update has non-finite values"
    return None


def train_problem(result, start: Mapping, declared: int) -> str | None:
    """Why a training reply is unusable, or None; ``declared`` is the silo's enrolled D_i."""
    if isinstance(result, Rejected):
        return result.reason
    problem = state_problem(result.state, start) or update_problem(result.update)
    if problem:
        return problem
    n = result.n_samples
    try:
        count_ok = not isinstance(n, bool) and float(n).is_integer() and 1 <= n <= declared
    except (TypeError, ValueError):
        count_ok = False
    if not count_ok:
        return f"reported {n!r} samples; expected an integer in 1..{declared} (enrolled)"
    if not _finite(result.train_loss) or result.train_loss < 0:
        return f"training loss {result.train_loss} is not a finite number >= 0"
    if not _finite(result.train_acc) or not 0.0 <= result.train_acc <= 1.0:
        return f"training accuracy {result.train_acc} is not in [0, 1]"
    return None


class ReplyScreen:
    """Checks a run's replies and keeps the rejections.

    Parameters
    ----------
    sizes : (N,) samples each silo declared at enrolment
    rule : callable or None, default=None
        A further rule on the replies that passed the per-reply checks (the deploy part's
        norm rule), called as ``rule(results, shared, epoch, reject)``: ``shared`` the
        clients about to be averaged with others (None: every client), ``reject`` this
        screen's :meth:`reject`. It returns the replies it keeps.

    Each method that may refuse a reply is told the ``epoch`` it screens, and records a
    refusal at that epoch; the screen keeps no epoch of its own.

    Attributes
    ----------
    rejected : list of ``{"client", "epoch", "reason"}``, in the order they happened
    """

    def __init__(self, sizes, rule=None):
        self.sizes = [int(s) for s in sizes]
        self.rule = rule
        self.rejected = []

    def reject(self, client: int, reason: str, epoch: int) -> None:
        """Record (and log) that ``client``'s reply in ``epoch`` was refused."""
        self.rejected.append({"client": int(client), "epoch": int(epoch), "reason": reason})
        log.warning("epoch %d: reply of client %d rejected: %s", epoch, client, reason)

    def accepted_training(self, results: dict, starts: dict, epoch: int, groups=None) -> dict:
        """The training replies that are usable; the others are rejected (client missing).

        Parameters
        ----------
        results : dict client -> LocalResult or :class:`Rejected`, what the backend returned
        starts : dict client -> state dict, the models the clients were sent
        epoch : int, the epoch screened (where a refusal is recorded)
        groups : list of lists of int, or None (every client shares its model)

        Returns
        -------
        dict client -> LocalResult, the accepted replies (a subset of ``results``).

        Replies that pass the per-reply checks then pass the screen's ``rule``, if any,
        which judges those about to be averaged with others: their client shares a group
        of ``groups`` with another.
        """
        ok = {}
        for i, r in results.items():
            if i not in starts:
                self.reject(i, "answered a training request it was not sent", epoch)
                continue
            problem = train_problem(r, starts[i], self.sizes[i])
            if problem:
                self.reject(i, problem, epoch)
            else:
                ok[i] = r
        if self.rule is None or not ok:
            return ok
        shared = None if groups is None else {i for g in groups if len(g) > 1 for i in g}
        return self.rule(ok, shared, epoch, self.reject)

    def accepted_errors(self, tested: dict, epoch: int) -> dict:
        """Test errors (in %) that are finite and in [0, 100]; the others are rejected.

        ``tested`` maps client -> error (or :class:`Rejected`); a refusal is recorded at
        ``epoch``. Returns client -> float.
        """
        ok = {}
        for i, e in tested.items():
            if isinstance(e, Rejected):
                self.reject(i, e.reason, epoch)
            elif _finite(e) and 0.0 <= float(e) <= 100.0:
                ok[i] = float(e)
            else:
                self.reject(i, f"test error {e!r} is not a number in [0, 100]", epoch)
        return ok

    def checked_probe(self, probe, epoch: int):
        """Wrap ``probe(i, state)`` for ``epoch``: a bad answer counts as no answer (None).

        Returns a callable ``(i, state) -> (loss, accuracy) or None`` that records each
        refusal at ``epoch`` (the engine makes one per epoch, for that epoch's view).
        """

        def checked(i, state):
            answer = probe(i, state)
            if answer is None:
                return None
            if isinstance(answer, Rejected):
                self.reject(i, answer.reason, epoch)
                return None
            try:
                loss, acc = answer
            except (TypeError, ValueError):
                self.reject(i, f"probe answer {answer!r} is not (loss, accuracy)", epoch)
                return None
            # +inf is an answer: the model overflows on this client's data, the worst one
            # (a scheme never picks it); NaN, a negative loss or a bad accuracy is not
            worst = isinstance(loss, (int, float)) and loss == math.inf
            bad_loss = not worst and (not _finite(loss) or loss < 0)
            if bad_loss or not _finite(acc) or not 0.0 <= acc <= 1.0:
                self.reject(i, f"probe answer ({loss!r}, {acc!r}) is out of range", epoch)
                return None
            return float(loss), float(acc)

        return checked


def defence_for(cfg):
    """The deployment's defence layer ``cfg`` asks for, or None (the paper's runs).

    Raises
    ------
    ValueError
        If ``cfg`` asks for a defence and no installed part registered one.
    """
    if not uses_defences(cfg):
        return None
    layer = find("defence", "deployment")
    if layer is None:
        raise part_missing("the settings aggregator, norm_limit and count_bound", "deploy")
    return layer(cfg)


class ScreenedBackend:
    """A backend behind the reply screen: every reply the training loop sees has passed it.

    The loop of Algorithm 1 trains, evaluates and probes through this object and never
    checks a reply itself. A deployment's defence layer (:func:`defence_for`) adds its
    count bound and norm rule here; the paper's runs have none.

    Parameters
    ----------
    backend : Backend
        How the clients are reached.
    cfg : RunConfig
        Reads ``aggregator`` (for the record).
    scheme : Scheme
        Whose replies the defence's norm rule judges (``defence.judges_loners``).
    defence : object or None, default=None
        The defence layer: ``vouched(declared)`` the counts it vouches for,
        ``norm_rule(vouched)`` the screen's rule (or None), ``judges_loners(scheme)``
        whether it judges a loner's reply too, ``record(declared, vouched)``
        what it adds to the result's ``aggregation``.

    Attributes
    ----------
    sizes : numpy.ndarray of shape (n_clients,), int64
        The counts the federation vouches for: they set each silo's steps, clip, norm
        allowance and weight (the declared ones without a defence).
    screen : ReplyScreen
        Its ``rejected`` list is the result's.
    """

    def __init__(self, backend, cfg, scheme, defence=None):
        self.backend, self.defence, self.aggregator = (
            backend,
            defence,
            cfg.option("aggregator", "mean"),
        )
        declared = np.asarray(backend.sizes, dtype=np.int64)
        self.sizes = declared.copy() if defence is None else defence.vouched(declared)
        rule = None if defence is None else defence.norm_rule(self.sizes)
        self.screen = ReplyScreen(declared, rule)
        # the norm rule judges a loner's reply where its model may be taken up by others
        self.judge_loners = defence is not None and defence.judges_loners(scheme)

    def train(self, plan, lr: float, epoch: int) -> dict:
        """The accepted replies of the clients in ``plan.start``, trained at ``lr``."""
        shared = None if self.judge_loners else plan.groups
        replies = self.backend.train(plan.start, lr, epoch)
        return self.screen.accepted_training(replies, plan.start, epoch, shared)

    def evaluate(self, states: dict, epoch: int) -> dict:
        """Accepted test errors in % of ``states`` (client -> state dict)."""
        return self.screen.accepted_errors(self.backend.evaluate(states), epoch)

    def probe_at(self, epoch: int):
        """The backend's probe, screened at ``epoch`` (a bad answer is no answer)."""
        return self.screen.checked_probe(self.backend.probe, epoch)

    def train_at(self, epoch: int):
        """Training outside the epoch's plan (MAXFL's reference rounds), screened at ``epoch``."""

        def train(starts, lr, e):
            return self.screen.accepted_training(
                self.backend.train(starts, lr, e), starts, epoch, []
            )

        return train

    def no_answer(self, epoch: int) -> str:
        """Why ``epoch`` has no test error: silence, or every reply rejected (how many)."""
        n = sum(r["epoch"] == epoch for r in self.screen.rejected)
        return (
            f"no client answered acceptably ({n} replies rejected)" if n else "no client answered"
        )

    def record(self, aggregator) -> dict:
        """The result's ``aggregation``: the aggregator's record, and the defence's."""
        out = {"aggregator": self.aggregator} if aggregator is None else aggregator.record()
        if self.defence is not None:
            out.update(self.defence.record(self.backend.sizes, self.sizes))
        return out

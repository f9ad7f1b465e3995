"""Robust aggregation: the average of silos' models when a silo may lie.

Under FedAvg (``mean``, the paper's and the default) one long, sign-flipped update moves
the average wherever it likes. A robust rule works on each member's *delta* (its trained
model minus its start). It holds the delta in a band of the round's norms
(:func:`~hcct_lite.deploy.defences.rounds.banded`), then combines (:mod:`.combine`).
"""

from __future__ import annotations

import math

import numpy as np

from ...schemes.base import weighted_average
from .combine import COMBINE, capped_weights
from .norms import l2_norm, local_steps, norm_reference
from .rounds import RoundView, banded, delta_norm, round_reference, round_view
from .voices import SAME_VOICE, mean_of, one_voice

__all__ = [
    "AGGREGATORS",
    "Aggregator",
    "check_aggregation",
    "vouched_counts",
    "capped_weights",
    "round_reference",
    "one_voice",
    "SAME_VOICE",
]

AGGREGATORS = (
    "mean",
    "clipped-mean",
    "trimmed-mean",
    "median",
    "centered-clip",
    "multi-krum",
    "krum-mean",
)
# The parameters an Aggregator is built with, fixed for its life
_PARAMETERS = ("kind", "clip_factor", "trim_fraction", "batch_size", "local_epochs")


def is_number(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def check_aggregation(kind, clip_factor, trim_fraction) -> None:
    """Raise ``ValueError`` naming the first aggregation setting out of range or of a wrong type.

    The one rule of :class:`Aggregator` and of a run's config: ``kind`` one of
    :data:`AGGREGATORS`, ``clip_factor`` a finite number >= 1, ``trim_fraction`` in [0, 0.5).
    """
    if not (isinstance(kind, str) and kind in AGGREGATORS):
        raise ValueError(f"aggregator must be one of {', '.join(AGGREGATORS)}; got {kind!r}")
    if not (is_number(clip_factor) and 1 <= clip_factor < math.inf):
        raise ValueError(
            f"clip_factor must be a finite number >= 1 (a multiple of the median update); "
            f"got {clip_factor!r}"
        )
    if not (is_number(trim_fraction) and 0 <= trim_fraction < 0.5):
        raise ValueError(f"trim_fraction must be in [0, 0.5); got {trim_fraction!r}")


def vouched_counts(declared, bound: float) -> np.ndarray:
    """(N,) the sample counts the federation can vouch for, from the ``declared`` ones.

    With ``bound > 0`` each count is at most ``bound`` times the reference of the positive
    counts (:func:`norm_reference`: their median, of two the smaller), so that no silo's
    word alone buys more steps (a wider clip and norm allowance) or more weight than that;
    ``bound = 0`` keeps the counts as declared. A count of 0 (a silo that never enrolled)
    stays 0.
    """
    d = np.asarray(declared, dtype=np.int64)
    positive = d[d > 0]
    if bound <= 0 or len(positive) == 0:
        return d.copy()
    cap = bound * float(norm_reference(positive))
    if cap >= d.max():  # a bound past every count (up to an infinite product) cuts nothing
        return d.copy()
    return np.minimum(d, max(1, int(cap)))


def _cosine(a: dict, b: dict) -> float:
    keys = [k for k in a if k in b]
    dot = sum(float((a[k].double() * b[k].double()).sum()) for k in keys)
    na, nb = l2_norm(a[k] for k in keys), l2_norm(b[k] for k in keys)
    return dot / (na * nb) if na > 0 and nb > 0 else 0.0


class Aggregator:
    """How a group's models become one, from ``kind`` (one of :data:`AGGREGATORS`).

    A robust rule first holds each delta in a band of the round's norms (:func:`banded`):
    one that sends almost nothing speaks at an honest length. It leaves out members that
    said nothing (sent back the model they received), while they are at most half. It hears
    members that send one update (:func:`one_voice`) as one: their mean, with one member's
    weight. It also reads the model's own history: of three or more members, those whose
    delta points against the model's last movement (cosine < 0) are left out while they
    are at most half. Of fewer than three, no rule can tell which is honest; the
    combination is then the clipped mean. A group of two that point apart is settled by
    the model's history, or else by the round's median; two that remain after the history
    rule are averaged (the rule has already heard both agree with the model's movement).

    Parameters
    ----------
    kind : str, ``"mean"`` (FedAvg, exactly :func:`weighted_average`) or a robust rule
    clip_factor : float >= 1, the top of each delta's band, a multiple of the reference
    trim_fraction : float in [0, 0.5), ``trimmed-mean``'s share dropped at each side
    batch_size, local_epochs : int >= 1, the silos' local training (for the steps)

    Each parameter is checked here (:func:`check_aggregation`; ``ValueError`` naming it) and
    fixed for the aggregator's life: assigning one raises ``AttributeError``.

    The aggregator keeps only its record: the round it aggregates (its epoch and the
    round's reference) is passed to each :meth:`combine`, nothing of it is kept.

    Attributes
    ----------
    few_replies : dict epoch -> groups (lists of client ids) of two, averaged without a
        robust rule (the result's ``few_replies``)
    disputes : dict epoch -> ``{"kept", "left_out"}`` pairs of two that pointed apart
    history_left_out : dict epoch -> lists of the members of one group each, left out for
        pointing against the model's last movement
    same_voice : dict epoch -> lists of members heard as one voice (one list a voice)
    no_update : dict epoch -> members left out for sending back the model they received
    """

    def __init__(
        self, kind="mean", clip_factor=4.0, trim_fraction=0.25, batch_size=64, local_epochs=1
    ):
        check_aggregation(kind, clip_factor, trim_fraction)
        for name, steps in (("batch_size", batch_size), ("local_epochs", local_epochs)):
            if not (
                isinstance(steps, (int, np.integer)) and not isinstance(steps, bool) and steps >= 1
            ):
                raise ValueError(f"{name} must be an int >= 1; got {steps!r}")
        self.kind, self.clip_factor, self.trim_fraction = kind, clip_factor, trim_fraction
        self.batch_size, self.local_epochs = batch_size, local_epochs
        self.few_replies, self.disputes, self.history_left_out = {}, {}, {}
        self.same_voice, self.no_update = {}, {}
        self._moved = {}  # model name -> (epoch, how it moved): the history rule's memory

    def __setattr__(self, name, value):
        if name in _PARAMETERS and name in self.__dict__:
            raise AttributeError(f"Aggregator.{name} is fixed when built: make another Aggregator")
        super().__setattr__(name, value)

    def combine_named(
        self, states, starts, weights, sizes, members, *, epoch, reference=None, model=None
    ) -> dict:
        """:meth:`combine`, with the history of the model named ``model`` (hashable, or None).

        Under a robust rule the aggregator remembers how each named model moved: the
        movement of epoch ``epoch - 1`` is :meth:`combine`'s ``history`` for the same name.
        A model trained from differing starts has no one movement and records none.
        """
        robust = self.kind != "mean"
        moved = self._moved
        for name in [k for k, (e, _) in moved.items() if e < epoch - 1]:
            del moved[name]  # older than last epoch: no longer how the model moved
        last = moved.get(model) if robust and model is not None else None
        out = self.combine(
            states,
            starts,
            weights,
            sizes,
            list(members),
            epoch=epoch,
            reference=reference,
            history=last[1] if last is not None and last[0] == epoch - 1 else None,
        )
        if robust and model is not None and all(s is starts[0] for s in starts):
            moved[model] = (
                epoch,
                {k: out[k] - v for k, v in starts[0].items() if v.is_floating_point()},
            )
        return out

    def combine(
        self,
        states: list,
        starts: list,
        weights,
        sizes,
        members=(),
        *,
        epoch: int,
        reference=None,
        history=None,
    ) -> dict:
        """The group's model from its members' trained ``states``.

        Parameters
        ----------
        states : list of n state dicts, the members' trained models
        starts : list of n state dicts, the models they trained from
        weights : (n,) their aggregation weights (D_i, or FedFA's)
        sizes : (n,) their D_i (for the steps)
        members : n client ids (for the record, and whose norms the round's view holds;
            empty: 0..n-1, banded by their own norms)
        epoch : int, the epoch aggregated: where a group of two or a dispute is recorded
        reference : RoundView, mapping name -> tensor, or None. The round
            (:meth:`dispute_reference`): its norms set each delta's band (:func:`banded`;
            without them, the members' own), and a group of two that points apart keeps
            the member its centre backs. None, or a view without a centre (fewer than
            three voices), keeps both.
        history : mapping name -> tensor, or None. How the model the members trained from
            moved last epoch (:meth:`combine_named` keeps it):
            members pointing against it are left out while they are at most half, and it
            settles a dispute in place of ``reference``.

        Returns
        -------
        dict
            The group's state dict. The combined delta is added to the common start, or to
            the weighted average of differing starts (FLSC's members, MAXFL's first epoch):
            where nothing is banded, ``clipped-mean`` is FedAvg.
        """
        if self.kind == "mean" or len(states) == 1:
            return weighted_average(states, weights)
        floats = [k for k, v in states[0].items() if v.is_floating_point()]
        deltas = [{k: s[k] - st[k] for k in floats} for s, st in zip(states, starts, strict=True)]
        ids = [int(i) for i in members] or list(range(len(states)))
        steps = local_steps(sizes, self.batch_size, self.local_epochs)
        voice_w = np.asarray(weights, dtype=np.float64)
        view = reference if isinstance(reference, RoundView) else None
        deltas = banded(deltas, steps, self.clip_factor, ids if len(members) else None, view)
        reference = view.centre if view is not None else reference
        moved = [i for i, d in enumerate(deltas) if any(bool(v.any()) for v in d.values())]
        if len(deltas) > len(moved) and 2 * len(moved) >= len(deltas):  # idle: as if absent
            self.no_update.setdefault(epoch, []).extend(
                ids[i] for i in range(len(ids)) if i not in moved
            )
            deltas, ids = [deltas[i] for i in moved], [ids[i] for i in moved]
            voice_w = voice_w[moved]
        deltas, voice_w, ids = self._voices(deltas, voice_w, ids, epoch)
        w = capped_weights(voice_w)
        kept = self._with_history(deltas, history, ids, epoch)
        if len(kept) < len(deltas):
            deltas, ids = [deltas[i] for i in kept], [ids[i] for i in kept]
            w = capped_weights(voice_w[kept])
        if len(deltas) == 1:  # one voice: nothing to weigh it against
            combined = deltas[0]
        else:
            few = len(deltas) < 3  # no majority (two: the history leaves at least two)
            if few:
                self.few_replies.setdefault(epoch, []).append(ids)
                if len(kept) == len(voice_w):  # two voices, not two the history rule left
                    w = self._settle_dispute(
                        deltas, w, ids, epoch, reference if history is None else history
                    )
            combined = COMBINE["clipped-mean" if few else self.kind](deltas, w, self)
        same = all(st is starts[0] for st in starts)
        base = starts[0] if same else weighted_average(starts, weights)
        out = weighted_average(states, weights)  # integer entries: the rounded average
        for k in floats:
            out[k] = base[k] + combined[k].to(base[k].dtype)
        return out

    def dispute_reference(self, replies: dict, starts: dict, sizes) -> RoundView | None:
        """The round's reference for :meth:`combine`: a :class:`RoundView`, or None.

        ``replies`` maps each client of the round's accepted replies to its LocalResult
        (``update`` and ``state``), ``starts`` each to the model it trained from (None:
        unknown, left out of the norms), ``sizes`` (N,) every client's D_i. None for
        FedAvg (``mean``), which needs none, and for fewer than three replies that moved
        from a known start.
        """
        if self.kind == "mean":
            return None
        norms = {
            i: delta_norm(r.state, starts[i])
            for i, r in replies.items()
            if starts.get(i) is not None
        }
        steps = local_steps(sizes, self.batch_size, self.local_epochs)
        return round_view({i: r.update for i, r in replies.items()}, norms, steps)

    def _settle_dispute(self, deltas: list, w, members: list, epoch: int, reference):
        """(2,) the weights of two members, or, where they disagree, of the one ``reference`` backs.

        Two updates that point apart (cosine < 0) cannot both be honest progress on a
        shared model, and averaging them lets either one cancel the other. The member whose
        delta agrees better with ``reference`` keeps weight 1, the other 0, and the pair is
        recorded in ``disputes`` at ``epoch``. The reference is the model's last movement,
        or else the coordinate-wise median of the round's updates that moved (an honest
        majority's).
        Without a reference, both keep their weights.
        """
        if reference is None or _cosine(deltas[0], deltas[1]) >= 0:
            return w
        agree = [_cosine(d, reference) for d in deltas]
        kept = int(np.argmax(agree))
        self.disputes.setdefault(epoch, []).append(
            {"kept": members[kept], "left_out": members[1 - kept]} if members else {}
        )
        return np.eye(2)[kept]

    def _voices(self, deltas: list, weights, members: list, epoch: int) -> tuple:
        """``(deltas, weights, members)`` with each voice (:func:`one_voice`) as one member.

        A voice of several is their mean delta, the mean of their weights and its first
        member's id; it is recorded at ``epoch``.
        """
        voices = one_voice(deltas)
        if len(voices) == len(deltas):
            return deltas, weights, members
        self.same_voice.setdefault(epoch, []).extend(
            [members[i] for i in v] for v in voices if len(v) > 1
        )
        merged = [mean_of([deltas[i] for i in v]) for v in voices]
        return (
            merged,
            np.array([weights[v].mean() for v in voices]),
            [members[v[0]] for v in voices],
        )

    def _with_history(self, deltas: list, history, members: list, epoch: int) -> list:
        """The indices of the members kept, of ``deltas`` against the model's ``history``.

        Of three or more, those pointing against it (cosine < 0) are left out, and recorded
        at ``epoch``, if they are at most half of the group.
        """
        if history is None or len(deltas) < 3:
            return list(range(len(deltas)))
        against = {i for i, d in enumerate(deltas) if _cosine(d, history) < 0}
        if not against or 2 * len(against) > len(deltas):
            return list(range(len(deltas)))
        self.history_left_out.setdefault(epoch, []).append([members[i] for i in sorted(against)])
        return [i for i in range(len(deltas)) if i not in against]

    def record(self) -> dict:
        """The JSON record of the run's aggregation.

        ``aggregator``; where groups of two were averaged, ``few_replies`` (``{epoch,
        groups}``) and ``few_replies_note``, what the server did with them.
        """
        out = {"aggregator": self.kind}
        if self.few_replies:
            few = sorted(self.few_replies.items())
            out["few_replies"] = [{"epoch": e, "groups": g} for e, g in few]
            out["few_replies_note"] = (
                f"groups of two replies: no robust rule can tell which is honest. Each update "
                f"was held between the round's median norm and {self.clip_factor:g} x it (as "
                f"it stands, or per local step times its own steps; where the round could "
                f"not say, the smaller one's). The two were then averaged, or a dispute "
                f"settled ({self.kind} needs three or more)"
            )
        if self.history_left_out:
            left = sorted(self.history_left_out.items())
            out["history_left_out"] = [{"epoch": e, "groups": g} for e, g in left]
            out["history_left_out_note"] = (
                "members whose update pointed against the last movement of the model they "
                "trained (cosine < 0), while they were at most half of their group, were left out"
            )
        if self.same_voice:
            out["same_voice"] = [
                {"epoch": e, "voices": v} for e, v in sorted(self.same_voice.items())
            ]
            out["same_voice_note"] = (
                f"members whose updates were closer than {SAME_VOICE:g} x the longer one's norm "
                "were heard as one voice: their mean update, with one member's weight"
            )
        if self.no_update:
            out["no_update"] = [
                {"epoch": e, "members": m} for e, m in sorted(self.no_update.items())
            ]
            out["no_update_note"] = (
                "members that sent back the model they received trained nothing; while they "
                "were at most half of their group, they were left out"
            )
        if self.disputes:
            out["disputes"] = [{"epoch": e, "pairs": p} for e, p in sorted(self.disputes.items())]
            out["disputes_note"] = (
                "groups of two whose updates pointed apart (cosine < 0): only the member "
                "whose update agreed better with the model's last movement (or else the "
                "round's coordinate-wise median update) was kept"
            )
        return out

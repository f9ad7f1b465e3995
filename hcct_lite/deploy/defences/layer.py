"""The deployment's defence, one layer around a run: count bound, norm rule, robust rule.

The core's loop knows none of this: a run whose settings ask for a defence gets a
:class:`Defence` (:func:`~hcct_lite.training.replies.defence_for`) in its reply screen.
``count_bound`` cuts declared counts (:func:`~.robust.vouched_counts`), ``norm_limit``
refuses long updates (:class:`NormRule`), ``aggregator`` picks an :class:`~.robust.Aggregator`.
"""

from __future__ import annotations

import math

import numpy as np

from .norms import local_steps, norm_bound, update_norm
from .robust import AGGREGATORS, Aggregator, check_aggregation, is_number, vouched_counts

__all__ = ["Defence", "NormRule", "check_config", "add_options"]


def add_options(p) -> None:
    """Add the defence's settings to a run's command line (``run``, ``compare``, ``flower-sim``)."""
    g = p.add_argument_group(
        "the deployment's defences (default: off, the paper's; docs/deploy.md)"
    )
    g.add_argument(
        "--norm-limit", type=float, metavar="X", help="refuse an update X times the median's"
    )
    rules = ", ".join(AGGREGATORS[1:])
    g.add_argument("--aggregator", metavar="NAME", help=f"mean (FedAvg) or {rules}")
    g.add_argument("--clip-factor", type=float, metavar="X", help="robust rules: clip (4)")
    g.add_argument("--trim-fraction", type=float, metavar="X", help="trimmed-mean: cut (0.25)")
    g.add_argument(
        "--count-bound", type=float, metavar="X", help="a declared count at most X x the median"
    )


def check_config(cfg) -> None:
    """Raise ``ValueError`` naming the first defence setting of ``cfg`` out of range.

    ``norm_limit`` 0 (off) or a factor >= 2; ``count_bound`` 0 (off) or a finite number
    >= 1; the aggregation's settings as :func:`~.robust.check_aggregation` says.
    """
    limit, bound = cfg.option("norm_limit"), cfg.option("count_bound")
    if not (is_number(limit) and math.isfinite(limit) and (limit == 0 or limit >= 2)):
        raise ValueError(
            f"norm_limit must be 0 (off) or a factor >= 2 (below 2, half of an even round "
            f"could be rejected); got {limit!r}"
        )
    if not (is_number(bound) and (bound == 0 or 1 <= bound < math.inf)):
        raise ValueError(
            f"count_bound must be 0 (off) or a finite number >= 1 (a multiple of the median "
            f"count); got {bound!r}"
        )
    check_aggregation(
        cfg.option("aggregator"), cfg.option("clip_factor"), cfg.option("trim_fraction")
    )


class NormRule:
    """The norm rule: an update longer than its norm bound's limit is refused.

    It judges an update where it is about to be averaged with others.

    Parameters
    ----------
    limit : float > 0
        The factor of :func:`~.norms.norm_bound`: a multiple of the round's median norm,
        as it stands and per local step.
    steps : sequence of int, or None
        Each silo's local SGD steps per epoch (None: one each).
    """

    def __init__(self, limit: float, steps=None):
        self.limit = float(limit)
        self.steps = None if steps is None else [int(s) for s in steps]

    def __call__(self, results: dict, shared, epoch: int, reject) -> dict:
        """The replies of ``results`` the rule keeps; ``reject(i, reason, epoch)`` the others.

        Every reply is evidence of an honest norm, a loner's too; only those of ``shared``
        (the clients about to be averaged with others; None: all) are judged. A client
        alone changes no one's model, and clients training apart drift apart: late in
        Independent training on FMNIST honest update norms reach 15 times the median.
        """
        raw = {i: update_norm(r.update) for i, r in results.items()}
        steps = {i: 1 if self.steps is None else self.steps[i] for i in raw}
        bound = norm_bound(list(raw.values()), list(steps.values()), self.limit)
        ref, ref_step = bound.reference, bound.per_step_reference
        for (i, norm), limit in zip(list(raw.items()), bound.limits, strict=True):
            if norm <= limit or (shared is not None and i not in shared):
                continue
            ratio = f"{norm / ref:.3g} times" if ref > 0 else "above 0, while"
            reject(
                i,
                f"update norm {norm:.3g} is {ratio} the round's {bound.basis} {ref:.3g}, and "
                f"{norm / steps[i] / max(ref_step, 1e-300):.3g} times it per local step "
                f"(norm rule: at most {self.limit:g} times)",
                epoch,
            )
            del results[i]
        return results


class Defence:
    """What a run's defence settings add around it (``cfg``: a RunConfig).

    The core's :class:`~hcct_lite.training.replies.ScreenedBackend` asks it for the counts
    it vouches for, the screen's rule, whose replies that rule judges, and its record; the
    engine lets it :meth:`arm` the scheme.
    """

    def __init__(self, cfg):
        self.cfg = cfg  # a RunConfig: validated, check_config included, when it was built

    def vouched(self, declared) -> np.ndarray:
        """(N,) the counts the federation vouches for (``count_bound``; 0: as declared)."""
        return vouched_counts(declared, self.cfg.option("count_bound"))

    def judges_loners(self, scheme) -> bool:
        """Whether the norm rule judges a loner's reply too, under ``scheme``.

        Yes where every model may be taken up by others (``models_shared``), and, under a
        robust rule, where a loner's model is carried into the group it joins
        (``loners_rejoin``); FedAvg runs keep the rule the paper's grids ran under.
        """
        robust = self.cfg.option("aggregator") != "mean"
        return scheme.models_shared or (scheme.loners_rejoin and robust)

    def norm_rule(self, vouched):
        """The screen's :class:`NormRule` (``norm_limit``; 0: None), steps from ``vouched``."""
        if self.cfg.option("norm_limit") <= 0:
            return None
        return NormRule(self.cfg.option("norm_limit"), local_steps(vouched, *self._steps()))

    def arm(self, scheme) -> None:
        """Give ``scheme`` the run's aggregator (a robust rule; FedAvg needs none)."""
        cfg = self.cfg
        if cfg.option("aggregator") != "mean":
            scheme.aggregator = Aggregator(
                cfg.option("aggregator"),
                cfg.option("clip_factor"),
                cfg.option("trim_fraction"),
                *self._steps(),
            )

    def record(self, declared, vouched) -> dict:
        """Where the count bound cut a declared count, and by how much (for the result)."""
        cut = [i for i, (d, v) in enumerate(zip(declared, vouched, strict=True)) if d != v]
        if not cut:
            return {}
        return {
            "vouched_counts": [int(v) for v in vouched],
            "vouched_counts_note": (
                f"clients {cut} declared more samples than {self.cfg.option('count_bound'):g} "
                "x the federation's median count; their steps, clip, norm allowance and weight use "
                "the vouched counts"
            ),
        }

    def _steps(self) -> tuple:
        return self.cfg.batch_size, self.cfg.local_epochs

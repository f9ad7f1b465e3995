"""When HCCT's utility misleads: summaries of the study grids (notebook 05).

Every summary reads result dicts (shipped files or quick re-runs of the grids of
:mod:`~hcct_lite.reproduction.study_grids`); the rotated digits' right groups are each
client's rotation, so a partition is scored by its adjusted Rand index against them
(:func:`~hcct_lite.lessons.decisions.truth_agreement`).
"""

from __future__ import annotations

import numpy as np

from ..partition.merge_steps import break_even_alpha
from ..reproduction.report_tables import ablation_summary
from ..runs.reading import variant
from .decisions import consecutive_agreement, truth_agreement

__all__ = [
    "rotation_agreement",
    "buffer_summary",
    "scheme_summary",
    "alpha_summary",
    "validated_alpha",
    "validation_choices",
    "break_even_grid",
    "iid_summary",
    "misleads_claims",
]


def rotation_agreement(run) -> float:
    """Mean adjusted Rand index of a rotated-digits run's groups (epochs 2..T) with the truth."""
    truth = np.unique(run["domains"], return_inverse=True)[1]
    return float(truth_agreement([h["groups"] for h in run["history"][1:]], truth).mean())


def _groups(run) -> float:
    return float(np.mean([len(h["groups"]) for h in run["history"][1:]]))


def buffer_summary(runs) -> dict:
    """The buffer study: ``"parameters"``/``"buffers"`` -> dict of seed means.

    ``same``/``other``: epoch-1 update cosines within / across rotations; ``groups`` per
    epoch; ``agreement`` with the rotations; ``error``: final mean error; ``seeds``.
    """
    out = {}
    for label in ("parameters", "buffers"):
        rs = [r for r in runs if variant(r) == label]
        cos = [ablation_summary([r])[r["name"]] for r in rs]
        out[label] = dict(
            same=float(np.mean([c["same"] for c in cos])),
            other=float(np.mean([c["other"] for c in cos])),
            groups=float(np.mean([_groups(r) for r in rs])),
            agreement=float(np.mean([rotation_agreement(r) for r in rs])),
            error=float(np.mean([r["final"]["mean"] for r in rs])),
            seeds=len(rs),
        )
    return out


def scheme_summary(runs) -> dict:
    """``(scheme, local_epochs) -> dict(error, agreement, groups, seeds)``, seed means."""
    keys = sorted({(r["scheme"], r["config"]["local_epochs"]) for r in runs})
    out = {}
    for scheme, local in keys:
        rs = [r for r in runs if (r["scheme"], r["config"]["local_epochs"]) == (scheme, local)]
        out[scheme, local] = dict(
            error=float(np.mean([r["final"]["mean"] for r in rs])),
            agreement=float(np.mean([rotation_agreement(r) for r in rs])),
            groups=float(np.mean([_groups(r) for r in rs])),
            seeds=len(rs),
        )
    return out


def alpha_summary(runs) -> dict:
    """``alpha -> dict(errors, agreements, agreement, groups)``, alpha ascending.

    ``errors`` and ``agreements``: seed -> final error, and -> agreement with the rotations;
    ``agreement`` and ``groups``: means over the seeds.
    """
    out = {}
    for a in sorted({r["config"]["alpha"] for r in runs}):
        rs = sorted((r for r in runs if r["config"]["alpha"] == a), key=lambda r: r["seed"])
        agreements = {r["seed"]: rotation_agreement(r) for r in rs}
        out[a] = dict(
            errors={r["seed"]: r["final"]["mean"] for r in rs},
            agreements=agreements,
            agreement=float(np.mean(list(agreements.values()))),
            groups=float(np.mean([_groups(r) for r in rs])),
        )
    return out


def validated_alpha(summary: dict, validation_seed: int = 0) -> dict:
    """Choose alpha on one federation, judge it on the others.

    The federation of ``validation_seed`` plays the validation split: alpha is the one
    with its lowest final error. The other seeds' federations (same task, other draws) are
    the test: their mean error and agreement with the rotations at the chosen alpha, and
    their mean error at alpha = 1 (Table III's for HCCT on Digit and CIFAR-10).

    Parameters
    ----------
    summary : from :func:`alpha_summary`, with alpha = 1 and at least two seeds
    """
    if 1.0 not in summary:
        raise ValueError("the alpha study needs alpha = 1, Table III's value")
    chosen = min(summary, key=lambda a: summary[a]["errors"][validation_seed])
    test = [s for s in summary[chosen]["errors"] if s != validation_seed]
    if not test:
        raise ValueError("validated_alpha needs a seed besides the validation one")

    def mean(a, what="errors"):
        return float(np.mean([summary[a][what][s] for s in test]))

    return dict(
        validation_seed=validation_seed,
        alpha=chosen,
        test_seeds=test,
        chosen_error=mean(chosen),
        table3_error=mean(1.0),
        agreement=mean(chosen, "agreements"),
    )


def validation_choices(summary: dict) -> list:
    """:func:`validated_alpha` with each seed's federation in turn as the validation one."""
    return [validated_alpha(summary, seed) for seed in sorted(summary[1.0]["errors"])]


def break_even_grid(sizes, cosines) -> np.ndarray:
    """Break-even alphas, (len(sizes), len(cosines)), of two equal clients.

    Entry (i, j) is the alpha above which two clients of ``sizes[i]`` samples each, whose
    updates have cosine ``cosines[j]``, merge. Computed with
    :func:`~hcct_lite.partition.merge_steps.break_even_alpha` on two unit updates at that
    cosine (equal norms); it equals ``D * 2 * (1 - sqrt((1 + c) / 2))``.
    """
    out = np.empty((len(sizes), len(cosines)))
    for j, c in enumerate(cosines):
        if not -1 < c <= 1:
            raise ValueError(f"cosines must lie in (-1, 1]; got {c}")
        u = np.array([[1.0, 0.0], [c, np.sqrt(max(0.0, 1 - c * c))]])
        for i, d in enumerate(sizes):
            out[i, j] = break_even_alpha(u, [d, d], [0], [1])
    return out


def iid_summary(runs) -> dict:
    """FMNIST's HCCT against Global (shipped ``schemes-fmnist``): decision stability and error.

    ``agreement`` is the mean adjusted Rand index of consecutive HCCT partitions (epochs
    2..T, seeds pooled); ``hcct``/``global`` the final mean errors (seed means).
    """
    hcct = [r for r in runs if r["scheme"] == "hcct"]
    ari = [
        consecutive_agreement([h["groups"] for h in r["history"][1:]], len(r["sizes"]))
        for r in hcct
    ]
    mean = {
        s: float(np.mean([r["final"]["mean"] for r in runs if r["scheme"] == s]))
        for s in ("hcct", "global")
    }
    return dict(agreement=float(np.mean(np.concatenate(ari))), **mean)


def misleads_claims(buffers, small, alphas, fixed_k, iid) -> dict:
    """Notebook 05's checked claims: claim (str) -> bool.

    Parameters are the outputs of :func:`buffer_summary`, :func:`scheme_summary`,
    :func:`alpha_summary`, :func:`~hcct_lite.reproduction.figure_checks.fixed_k_summary` (one N,
    the rotated digits) and :func:`iid_summary`.
    """
    b, p = buffers["buffers"], buffers["parameters"]
    choices = validation_choices(alphas)
    h1, h3 = small["hcct", 1], small["hcct", 3]
    others = [small[s, 1]["error"] for s in ("independent", "ifca", "global")]
    ((n, (ks, errors, utilities)),) = fixed_k.items()
    return {
        "buffers: every cosine above 0.9, within and across rotations": b["other"] > 0.9,
        "buffers: HCCT's groups agree with the rotations far less (by over 0.5)": (
            p["agreement"] - b["agreement"] > 0.5
        ),
        "small clients: HCCT finds the rotations less than half as well as with 112 samples each": (
            h1["agreement"] < 0.5 * alphas[50.0]["agreement"]
        ),
        "small clients: HCCT still has the lowest error of the four schemes": (
            h1["error"] < min(others)
        ),
        "small clients: 3 local epochs lower HCCT's error by over 10 points": (
            h1["error"] - h3["error"] > 10
        ),
        "small clients: 3 local epochs lower every scheme's error": all(
            small[s, 3]["error"] < small[s, 1]["error"] for s, _ in small
        ),
        "small clients: 3 local epochs barely change HCCT's agreement (under 0.1)": (
            abs(h3["agreement"] - h1["agreement"]) < 0.1
        ),
        "IID: consecutive partitions agree little (adjusted Rand below 0.3)": iid["agreement"]
        < 0.3,
        "IID: yet HCCT's error is within 1 point of Global's": abs(iid["hcct"] - iid["global"]) < 1,
        "alpha = 1: every client alone (no merge pays for 112 samples)": (
            alphas[1.0]["groups"] == 8
        ),
        "fixed K, rotated digits: utility and error both best at the true K = 4": (
            ks[int(np.argmax(utilities))] == ks[int(np.argmin(errors))] == 4
        ),
        "validation: the alpha chosen on one federation finds the rotations on the others "
        "(agreement above 0.9) for some choices of that federation, not all": (
            0 < sum(c["agreement"] > 0.9 for c in choices) < len(choices)
        ),
        "validation: no choice beats alpha = 1 on the others by more than 1 point": all(
            c["chosen_error"] - c["table3_error"] > -1 for c in choices
        ),
    }

"""Notebook 05's summaries: where HCCT's utility misleads, read from study runs."""

import numpy as np
import pytest

from hcct_lite.lessons.misleads import (
    alpha_summary,
    break_even_grid,
    iid_summary,
    misleads_claims,
    rotation_agreement,
    scheme_summary,
    validated_alpha,
    validation_choices,
)
from hcct_lite.reproduction.paper_grids import GRIDS, PAPER_PART, grid_jobs
from hcct_lite.reproduction.study_grids import STUDY_GRIDS

ROT = ["rot0", "rot0", "rot90", "rot90"]


def _run(scheme="hcct", seed=0, groups=((0, 1), (2, 3)), error=10.0, **config):
    history = [{"groups": [[0], [1], [2], [3]]}] + [{"groups": [list(g) for g in groups]}] * 2
    cfg = dict(local_epochs=1, alpha=50.0, n_clients=4) | config
    name = f"{scheme}-seed{seed}"
    return {
        "scheme": scheme,
        "seed": seed,
        "domains": ROT,
        "sizes": [10] * 4,
        "config": cfg,
        "history": history,
        "final": {"mean": error},
        "name": name,
    }


def test_break_even_grid_is_the_closed_form_and_rejects_bad_cosines():
    sizes, cosines = [10, 100], [0.99, 0.5, 0.0, -0.5]
    grid = break_even_grid(sizes, cosines)
    closed = [[d * 2 * (1 - np.sqrt((1 + c) / 2)) for c in cosines] for d in sizes]
    np.testing.assert_allclose(grid, closed, rtol=1e-9)
    assert (np.diff(grid, axis=1) > 0).all() and (grid[1] > grid[0]).all()
    with pytest.raises(ValueError, match="cosines must lie in"):
        break_even_grid([10], [1.5])


def test_agreement_and_scheme_summary():
    right, wrong = _run(), _run(groups=((0, 2), (1, 3)))
    assert rotation_agreement(right) == 1.0 and rotation_agreement(wrong) < 0
    runs = [
        _run(seed=0, error=10),
        _run(seed=1, error=20, groups=((0,), (1,), (2,), (3,))),
        _run("global", 0, groups=((0, 1, 2, 3),), error=30),
    ]
    s = scheme_summary(runs)
    assert s["hcct", 1]["error"] == 15 and s["hcct", 1]["agreement"] == 0.5
    assert (
        s["hcct", 1]["groups"] == 3 and s["global", 1]["groups"] == 1 and s["hcct", 1]["seeds"] == 2
    )


def test_alpha_is_chosen_on_the_validation_seed_and_judged_on_the_others():
    runs = [
        _run(seed=s, alpha=a, error=e)
        for a, errors in ((1.0, (20, 10, 12)), (50.0, (15, 14, 16)))
        for s, e in enumerate(errors)
    ]
    summary = alpha_summary(runs)
    assert list(summary) == [1.0, 50.0] and summary[50.0]["errors"] == {0: 15, 1: 14, 2: 16}
    chosen = validated_alpha(summary, validation_seed=0)
    assert chosen["alpha"] == 50.0 and chosen["test_seeds"] == [1, 2]
    assert chosen["chosen_error"] == 15 and chosen["table3_error"] == 11
    assert chosen["agreement"] == 1.0 and chosen["validation_seed"] == 0  # on seeds 1 and 2
    assert validated_alpha(summary, validation_seed=1)["alpha"] == 1.0
    choices = validation_choices(summary)
    assert [(c["validation_seed"], c["alpha"]) for c in choices] == [(0, 50.0), (1, 1.0), (2, 1.0)]
    with pytest.raises(ValueError, match="alpha = 1"):
        validated_alpha({50.0: summary[50.0]})


def test_iid_summary_reads_decision_stability_and_errors():
    stable = _run(error=20)
    stable["sizes"] = [10] * 4
    runs = [stable, _run("global", error=21)]
    out = iid_summary(runs)
    assert out == {"agreement": 1.0, "hcct": 20.0, "global": 21.0}


# alpha = 50 wins on the validation federation of seed 0 only, and finds the rotations
ALPHAS = {
    1.0: dict(
        errors={0: 20, 1: 21, 2: 19},
        agreements=dict.fromkeys(range(3), 0.0),
        agreement=0.0,
        groups=8.0,
    ),
    50.0: dict(
        errors={0: 17, 1: 21, 2: 20},
        agreements=dict.fromkeys(range(3), 0.97),
        agreement=0.97,
        groups=4.0,
    ),
}


def _claims(**change):
    buffers = {
        "parameters": dict(same=0.5, other=0.1, agreement=0.8, error=12.0),
        "buffers": dict(same=0.99, other=0.98, agreement=0.0, error=19.0),
    }
    small = {
        (s, k): dict(error=e - 20 * (k == 3), agreement=0.4, groups=9.0)
        for s, e in (("hcct", 55), ("independent", 60), ("ifca", 70), ("global", 68))
        for k in (1, 3)
    }
    alphas = ALPHAS
    fixed_k = {8: ([1, 2, 4, 8], [49.0, 42.0, 19.0, 21.0], [3.6, 4.6, 4.9, 4.4])}
    iid = {"agreement": 0.2, "hcct": 22.5, "global": 21.7}
    args = dict(buffers=buffers, small=small, alphas=alphas, fixed_k=fixed_k, iid=iid)
    args.update(change)
    return misleads_claims(**args)


def test_misleads_claims_hold_on_their_numbers_and_fail_when_they_change():
    assert all(_claims().values())
    iid = {"agreement": 0.9, "hcct": 22.5, "global": 30.0}
    claims = _claims(iid=iid)
    assert not claims["IID: consecutive partitions agree little (adjusted Rand below 0.3)"]
    assert not claims["IID: yet HCCT's error is within 1 point of Global's"]
    # alpha = 50 chosen at every seed, and finding the rotations each time: not "some, not all"
    every = {
        a: dict(v, errors={s: e - 10 * (a == 50.0) for s, e in v["errors"].items()})
        for a, v in ALPHAS.items()
    }
    claim = (
        "validation: the alpha chosen on one federation finds the rotations on the others "
        "(agreement above 0.9) for some choices of that federation, not all"
    )
    assert not _claims(alphas=every)[claim]
    flat = {8: ([1, 2, 4, 8], [49.0, 42.0, 19.0, 21.0], [1.0, 2.0, 3.0, 4.0])}
    assert not _claims(fixed_k=flat)[
        "fixed K, rotated digits: utility and error both best at the true K = 4"
    ]


def test_study_grids_are_listed_with_their_parts_and_cheap_models():
    for grid in STUDY_GRIDS:
        assert grid in GRIDS and "notebook 05" in PAPER_PART[grid]
    jobs = grid_jobs(list(STUDY_GRIDS))
    assert len(jobs) == 57 and all(j.task == "rotated-digits" for j in jobs)
    assert {j.name for j in jobs if j.grid == "small-clients-rotated"} >= {
        "hcct-local1-seed0",
        "ifca-local3-seed2",
    }

"""Exercises that check themselves: each accepts its right answer and rejects a wrong one
with a hint that does not give the answer away."""

import re

import pytest

import hcct_lite as hl
from hcct_lite.lessons.checks import judge
from hcct_lite.lessons.exercises import EXERCISES, check


@pytest.fixture(scope="module")
def data():
    """The objects the notebooks pass to their checks, built as the notebooks build them."""
    shipped = hl.Mode("shipped")
    settings, _ = hl.task_settings(hl.Mode("quick"), "motivating")
    updates, sizes, _ = hl.first_updates(hl.make_config("motivating", "hcct", 0, **settings))
    clustered, clustered_sizes, _ = hl.clustered_updates([3, 3, 2], dim=2000, noise=0.5, seed=0)
    return {
        "01": dict(updates=updates, sizes=sizes, results=hl.motivating_results(shipped)),
        "02": dict(r=-0.5),
        "03": dict(updates=clustered, sizes=clustered_sizes),
        "04": dict(
            runs={t: hl.scheme_runs(shipped, t) for t in ("fmnist", "digit")},
            ablation=hl.ablation_summary(hl.grid_runs(shipped, "ablation-digit"), seed=0),
        ),
        "05": dict(
            small=hl.scheme_summary(hl.grid_runs(shipped, "small-clients-rotated")),
            ablation=hl.ablation_summary(hl.grid_runs(shipped, "buffers-rotated"), seed=0),
            alphas=hl.alpha_summary(hl.grid_runs(shipped, "alpha-scale-rotated")),
        ),
        "06": {},
    }


def test_judge_reads_each_kind_of_answer():
    assert judge("number", "22.9", 22.8876) and not judge("number", 23.5, 22.8876)
    assert not judge("number", float("nan"), 1.0) and not judge("number", "abc", 1.0)
    assert judge("bool", False, False) and not judge("bool", 0, False)  # a bool, not a number
    assert judge("choice", " Global", "global") and not judge("choice", "hcct", "global")
    assert judge("sequence", ["(1,2)", "(2, 3)"], ["(1,2)", "(2,3)"])
    assert not judge("sequence", ["(2,3)", "(1,2)"], ["(1,2)", "(2,3)"])
    assert judge("set", (2, 0), [0, 2]) and not judge("set", [0], [0, 2])
    with pytest.raises(ValueError, match="unknown kind"):
        judge("essay", "x", "y")


def test_a_placeholder_a_bad_key_and_missing_data_are_named(capsys):
    assert check("02.1", ...) is False
    assert "replace ... with the largest divergence" in capsys.readouterr().out
    with pytest.raises(ValueError, match="no exercise '9.9'"):
        check("9.9", 1.0)
    with pytest.raises(ValueError, match="exercise 01.1 needs updates, sizes"):
        check("01.1", 1.0)


@pytest.mark.parametrize("key", sorted(EXERCISES))
def test_each_check_accepts_the_right_answer_and_hints_at_a_wrong_one(key, data, capsys):
    ex = EXERCISES[key]
    given = {k: v for k, v in data[key[:2]].items() if k in ex.needs}
    right = ex.reference(**given)
    assert check(key, right, **given) is True
    assert capsys.readouterr().out == f"Exercise {key}: right.\n"
    assert check(key, ex.wrong, **given) is False
    said = capsys.readouterr().out
    assert said.startswith(f"Exercise {key}: not yet. ") and len(said) > 60
    hint = said.split("not yet. ", 1)[1]
    if ex.kind == "number":  # the hint never gives the number away
        for shown in {f"{right:.1f}", f"{right:.3g}"}:
            assert not re.search(rf"(?<![\d.]){re.escape(shown)}(?!\d)", hint), hint
        assert hint.rstrip().endswith(("too high.", "Too low."))
    else:
        assert str(right) not in hint

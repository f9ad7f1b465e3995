"""Robust aggregation: each rule on hand-made deltas, the setting, and the engine's record."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hcct_lite.deploy.defences import robust
from hcct_lite.deploy.defences.norms import local_steps, norm_reference, per_step_norms
from hcct_lite.deploy.defences.robust import (
    AGGREGATORS,
    SAME_VOICE,
    Aggregator,
    capped_weights,
    one_voice,
    round_reference,
    vouched_counts,
)
from hcct_lite.deploy.defences.rounds import RoundView, banded
from hcct_lite.schemes.base import weighted_average
from hcct_lite.training.config import make_config
from hcct_lite.training.engine import run_experiment

START = {"w": torch.zeros(3), "n": torch.tensor(4)}
ROBUST = [a for a in AGGREGATORS if a != "mean"]


@pytest.fixture(autouse=True)
def _each_its_own_voice(request, monkeypatch):
    """Most tests here use identical honest deltas: hear each as its own voice there.

    The tests of one voice (named so) run the rule as it ships.
    """
    if "voice" not in request.node.name:
        monkeypatch.setattr(robust, "one_voice", lambda d: [[i] for i in range(len(d))])


@pytest.fixture(autouse=True)
def _deltas_as_sent(request, monkeypatch):
    """Most tests here judge a rule on hand-made deltas as they are: no delta is raised.

    The band's top (the clip) still holds; the tests of the band (named so) run it as it ships.
    """
    if "band" in request.node.name:
        return
    shipped = robust.banded

    def clip_only(deltas, *args, **kwargs):
        out = shipped(deltas, *args, **kwargs)
        return [o if _norm(o) <= _norm(d) else d for o, d in zip(out, deltas, strict=True)]

    monkeypatch.setattr(robust, "banded", clip_only)


def _replies(updates: dict) -> tuple:
    """``(replies, starts)`` of a round whose every model started at zero, at lr 1."""
    replies = {
        i: SimpleNamespace(update=u, state={k: -v for k, v in u.items()})
        for i, u in updates.items()
    }
    return replies, {i: {k: torch.zeros_like(v) for k, v in u.items()} for i, u in updates.items()}


def _norm(delta) -> float:
    return math.sqrt(sum(float(v.double().pow(2).sum()) for v in delta.values()))


def _states(deltas, counts=None):
    counts = counts or [4] * len(deltas)
    return [
        {"w": torch.tensor(d, dtype=torch.float32), "n": torch.tensor(c)}
        for d, c in zip(deltas, counts, strict=True)
    ]


def _combine(kind, deltas, weights=None, sizes=None, **kw):
    n = len(deltas)
    agg = Aggregator(kind, batch_size=10, local_epochs=1, **kw)
    sizes = [10] * n if sizes is None else sizes
    w = weights or [1.0] * n
    out = agg.combine(_states(deltas), [START] * n, w, sizes, range(n), epoch=0)
    return out["w"].tolist(), agg


def test_mean_is_fedavg_bit_for_bit():
    states = _states([[1, 2, 3], [0.5, 0.1, 7], [2, 2, 2]], counts=[4, 6, 9])
    got = Aggregator("mean").combine(states, [START] * 3, [5, 1, 2], [5, 1, 2], epoch=0)
    want = weighted_average(states, [5, 1, 2])
    assert all(torch.equal(got[k], want[k]) for k in want)


def test_local_steps_are_epochs_times_batches():
    assert local_steps([1, 64, 65, 3584], 64, 5).tolist() == [5, 5, 10, 280]


def test_a_long_update_is_clipped_to_a_multiple_of_the_median_per_step():
    honest = [[3, 0, 0]] * 4
    got, _ = _combine("clipped-mean", honest + [[-1e6, 0, 0]], clip_factor=2.0)
    assert got[0] == pytest.approx((4 * 3 - 6) / 5)  # clipped to -6, then averaged


def test_a_silo_with_more_steps_is_not_cut_short():
    # silo 4 holds 8x the data: 8x the steps, and an update 8x as long per its steps
    deltas = [[1, 0, 0]] * 4 + [[8, 0, 0]]
    got, _ = _combine("clipped-mean", deltas, sizes=[10] * 4 + [80], clip_factor=2.0)
    assert got[0] == pytest.approx(12 / 5)  # nothing clipped
    assert per_step_norms([{"w": torch.ones(4)}], [4]).tolist() == [0.5]


def test_trimmed_mean_drops_the_extremes_of_each_coordinate():
    deltas = [[1, 10, 0], [2, 20, 0], [3, 30, 0], [4, 40, 0], [100, -100, 0]]
    got, _ = _combine("trimmed-mean", deltas, clip_factor=1e9, trim_fraction=0.2)
    assert got[:2] == pytest.approx([3.0, 20.0])  # 2, 3, 4 and 10, 20, 30 kept


def test_trimmed_mean_weighs_what_it_keeps_by_d():
    deltas = [[-1, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0], [9, 0, 0]]
    got, _ = _combine(
        "trimmed-mean", deltas, weights=[1, 1, 3, 1, 1], clip_factor=1e9, trim_fraction=0.2
    )
    assert got[0] == pytest.approx((1 + 3 * 2 + 3) / 5)


@pytest.mark.parametrize(("values", "median"), [([1, 5, 2], 2), ([1, 5, 2, 4], 3)])
def test_median_is_coordinate_wise(values, median):
    got, _ = _combine("median", [[v, -v, 0] for v in values], clip_factor=1e9)
    assert got[:2] == pytest.approx([median, -median])


def test_centered_clip_and_multi_krum_hold_against_a_stretched_flip():
    honest = [[1.0 + 0.01 * i, 1.0, 0.0] for i in range(7)]
    for kind in ("centered-clip", "multi-krum", "trimmed-mean", "median"):
        got, _ = _combine(kind, honest + [[-18.0, -18.0, 0.0]])
        assert got[0] > 0.5 and got[1] > 0.5, kind  # still the honest direction
    got, _ = _combine("mean", honest + [[-18.0, -18.0, 0.0]])
    assert got[0] < 0  # FedAvg is turned around


def test_multi_krum_keeps_the_n_minus_f_closest():
    deltas = [[1, 0, 0], [1.1, 0, 0], [0.9, 0, 0], [1.05, 0, 0], [50, 0, 0], [-50, 0, 0], [1, 0, 0]]
    got, _ = _combine("multi-krum", deltas, clip_factor=1e9)  # n = 7, f = 2: 5 kept
    assert got[0] == pytest.approx((1 + 1.1 + 0.9 + 1.05 + 1) / 5)


@pytest.mark.parametrize("kind", ROBUST)
def test_two_replies_are_clipped_to_the_smaller_and_recorded(kind):
    got, agg = _combine(kind, [[1, 0, 0], [-1e6, 0, 0]], clip_factor=4.0)
    assert got[0] == pytest.approx((1 - 4) / 2)
    record = agg.record()
    assert record["aggregator"] == kind
    assert record["few_replies"] == [{"epoch": 0, "groups": [[0, 1]]}]
    assert "no robust rule can tell which is honest" in record["few_replies_note"]


@pytest.mark.parametrize("kind", ROBUST)
def test_integer_entries_keep_the_rounded_weighted_average(kind):
    states = _states([[1, 0, 0], [2, 0, 0], [3, 0, 0]], counts=[2, 4, 9])
    agg = Aggregator(kind, batch_size=10)
    out = agg.combine(states, [START] * 3, [1, 1, 1], [10, 10, 10], epoch=0)
    assert out["n"].item() == 5 and out["n"].dtype == torch.int64


def test_the_settings_are_validated_naming_each():
    with pytest.raises(ValueError, match="aggregator must be one of mean, clipped-mean"):
        make_config("rotated-digits", "global", aggregator="krum")
    for bad in (0.5, math.nan, math.inf):
        with pytest.raises(ValueError, match="clip_factor must be a finite number >= 1"):
            make_config("rotated-digits", "global", clip_factor=bad)
    with pytest.raises(ValueError, match="clip_factor must be a number; got '4'"):
        make_config("rotated-digits", "global", clip_factor="4")
    for bad in (0.5, -0.1, math.nan):
        with pytest.raises(ValueError, match="trim_fraction must be in"):
            make_config("rotated-digits", "global", trim_fraction=bad)
    assert make_config("rotated-digits", "global").option("aggregator") == "mean"


def test_the_engine_records_the_aggregator_and_small_groups():
    cfg = make_config("rotated-digits", "global", 0, epochs=2, n_clients=2, aggregator="median")
    r = run_experiment(cfg, progress=False)
    assert r["aggregation"]["aggregator"] == "median"
    assert r["aggregation"]["few_replies"] == [{"epoch": t, "groups": [[0, 1]]} for t in (0, 1)]
    plain = run_experiment(make_config("rotated-digits", "global", 0, epochs=2), progress=False)
    assert plain["aggregation"] == {"aggregator": "mean"}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(-10, 10), min_size=3, max_size=3).filter(any), min_size=5, max_size=9
    ),
    st.lists(st.lists(st.floats(-1e6, 1e6), min_size=3, max_size=3), min_size=1, max_size=2),
    st.sampled_from(["trimmed-mean", "median"]),
)
def test_coordinate_rules_stay_within_the_honest_range(honest, liars, kind):
    """With at most as many liars as the rule trims, every coordinate stays honest.

    Every honest member trained: none sends back its start (that one is left out).
    """
    deltas = honest + liars  # 6 to 11 members, trim 0.25: at least 1 (2 from 8) each side
    if kind == "trimmed-mean" and len(liars) > max(1, int(0.25 * len(deltas))):
        return
    got, _ = _combine(kind, deltas, clip_factor=1e12)
    h = np.array(honest)
    assert (np.array(got) >= h.min(0) - 1e-3).all() and (np.array(got) <= h.max(0) + 1e-3).all()


# --- what a declared count buys, and the rules that do not trust it --------------------


def test_the_norm_reference_is_the_median_of_three_or_more_and_the_smaller_of_two():
    assert norm_reference([5.0, 1.0, 3.0, 1e9]) == 4.0
    assert norm_reference({0: 9.0, 1: 4.0}) == 4.0 and norm_reference([2.5]) == 2.5


def test_a_declared_count_is_bounded_by_the_federations_median():
    declared = [112, 112, 112, 10**6, 112, 0]
    assert vouched_counts(declared, 0).tolist() == declared  # off: as declared
    assert vouched_counts(declared, 4).tolist() == [112, 112, 112, 448, 112, 0]
    assert vouched_counts([112, 10**6], 4).tolist() == [112, 448]  # of two, the smaller
    assert vouched_counts([0, 0], 4).tolist() == [0, 0]  # nobody enrolled
    assert vouched_counts([1, 1, 1], 1.5).tolist() == [1, 1, 1]  # never below 1
    assert vouched_counts([112, 448], 1e308).tolist() == [112, 448]  # bound x median overflows


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 10**7), min_size=1, max_size=12), st.floats(1, 100))
def test_a_vouched_count_never_exceeds_the_declared_one_nor_the_bound(declared, bound):
    got = vouched_counts(declared, bound)
    positive = [d for d in declared if d > 0]
    cap = max(1, int(bound * norm_reference(positive))) if positive else 0
    assert all(0 <= g <= d for g, d in zip(got, declared, strict=True))
    assert all(g == min(d, cap) for g, d in zip(got, declared, strict=True))


@pytest.mark.parametrize(
    ("weights", "capped"),
    [
        ([1, 1, 1, 100], [1, 1, 1, 1]),
        ([1, 2, 3], [1, 2, 2]),
        ([5, 1], [1, 1]),
        ([0, 1, 1, 9], [0, 1, 1, 1]),
        ([0.3, 9.97, 0.4, 0.35], [0.3, 0.375, 0.375, 0.35]),
    ],
)
def test_no_member_weighs_more_than_the_median_in_a_robust_rule(weights, capped):
    want = np.asarray(capped, dtype=float)
    assert capped_weights(weights) == pytest.approx(want / want.sum())


def test_a_liar_with_a_huge_weight_moves_a_robust_rule_no_more_than_any_member():
    honest = [[1.0, 0.0, 0.0]] * 5
    for kind in ROBUST:
        got, _ = _combine(kind, honest + [[-4.0, 0.0, 0.0]], weights=[1] * 5 + [10**6])
        assert got[0] > 0, kind  # FedAvg with that weight: -4


def test_two_that_disagree_keep_the_one_the_round_backs_and_say_so():
    agg = Aggregator("krum-mean", batch_size=10)
    ref = {"w": torch.tensor([1.0, 0.5, 0.0])}  # the round's median delta
    pair = [START] * 2, [1, 1], [10, 10]
    out = agg.combine(_states([[1, 0, 0], [-4, 0, 0]]), *pair, [3, 5], epoch=4, reference=ref)
    assert out["w"].tolist() == [1, 0, 0]  # the flip is left out, the victim kept whole
    out = agg.combine(_states([[-4, 0, 0], [1, 0, 0]]), *pair, [5, 3], epoch=4, reference=ref)
    assert out["w"].tolist() == [1, 0, 0]  # whatever the order
    kept = {"kept": 3, "left_out": 5}
    assert agg.record()["disputes"] == [{"epoch": 4, "pairs": [kept, kept]}]
    agreeing = agg.combine(_states([[1, 0, 0], [2, 0, 0]]), *pair, epoch=4, reference=ref)
    assert agreeing["w"].tolist() == pytest.approx([1.5, 0, 0])  # agreeing pairs: averaged
    # fewer than three replies in the round: nothing to go by, both kept
    out = agg.combine(_states([[1, 0, 0], [-1, 0, 0]]), *pair, epoch=4, reference=None)
    assert out["w"].tolist() == [0, 0, 0]


def test_the_aggregator_records_at_the_epoch_it_is_given_and_keeps_no_round():
    agg = Aggregator("median", batch_size=10)
    ref = {"w": torch.tensor([1.0, 0.0, 0.0])}
    apart, pair = _states([[1, 0, 0], [-4, 0, 0]]), ([START] * 2, [1, 1], [10, 10])
    agg.combine(apart, *pair, [7, 2], epoch=5, reference=ref)
    before = dict(vars(agg))
    # a later call without the reference settles nothing: the last round's is not kept
    out = agg.combine(apart, *pair, [7, 2], epoch=2)
    assert out["w"].tolist() == [-1.5, 0, 0]  # both averaged (the flip within 4 x the other)
    three = _states([[1, 0, 0], [2, 0, 0], [3, 0, 0]])
    agg.combine(three, [START] * 3, [1, 1, 1], [10] * 3, [0, 1, 2], epoch=9, reference=ref)
    record = agg.record()
    assert record["few_replies"] == [
        {"epoch": 2, "groups": [[7, 2]]},
        {"epoch": 5, "groups": [[7, 2]]},
    ]
    assert record["disputes"] == [{"epoch": 5, "pairs": [{"kept": 7, "left_out": 2}]}]
    # what it holds is its parameters, its record and the named models' movements (the
    # history rule's, which only combine_named writes), nothing of a round
    assert (
        set(vars(agg))
        == set(before)
        == {
            "kind",
            "clip_factor",
            "trim_fraction",
            "batch_size",
            "local_epochs",
            "few_replies",
            "disputes",
            "history_left_out",
            "same_voice",
            "no_update",
            "_moved",
        }
    )
    assert agg._moved == {}
    with pytest.raises(TypeError, match="epoch"):
        agg.combine(apart, *pair, [7, 2])  # the epoch is the caller's to say
    three = {i: {"w": torch.tensor([i + 1.0])} for i in range(3)}
    assert Aggregator("mean").dispute_reference(*_replies(three), [10] * 3) is None
    view = agg.dispute_reference(*_replies(three), [10, 10, 30])
    assert view.centre["w"].tolist() == [-2.0]
    assert view.norms == {0: 1.0, 1: 2.0, 2: 3.0} and view.steps == {0: 1, 1: 1, 2: 3}
    assert agg.dispute_reference(*_replies({0: three[0], 1: three[1]}), [10] * 3) is None
    # a reply that did not move is no evidence of an honest norm
    idle = three | {3: {"w": torch.zeros(1)}}
    assert agg.dispute_reference(*_replies(idle), [10] * 4).norms == view.norms
    assert agg.dispute_reference(*_replies({**idle, 2: idle[3]}), [10] * 4) is None


def test_a_member_that_sent_back_its_start_is_left_out_and_recorded():
    agg = Aggregator("krum-mean", batch_size=10)
    states = _states([[0, 0, 0], [1, 0, 0], [1, 1, 0], [1, 0, 1]])
    out = agg.combine(states, [START] * 4, [1] * 4, [10] * 4, [4, 5, 6, 7], epoch=3)
    assert out["w"].tolist() == pytest.approx([1.0, 1 / 3, 1 / 3])  # the three that moved
    assert agg.record()["no_update"] == [{"epoch": 3, "members": [4]}]
    # more than half of them idle: they are heard (a liar alone would otherwise be the group)
    idle = _states([[0, 0, 0], [0, 0, 0], [0, 0, 9]])
    out = agg.combine(idle, [START] * 3, [1] * 3, [10] * 3, [1, 2, 3], epoch=4)
    assert out["w"].tolist() == [0.0, 0.0, 0.0]
    assert agg.record()["no_update"] == [{"epoch": 3, "members": [4]}]


def test_the_band_reads_batch_norm_buffers_too():
    # a reply that leaves its weights as received and sends a running variance of 10^6
    start = {"w": torch.zeros(2), "rv": torch.zeros(2)}
    honest = {"w": torch.tensor([-3.0, -4.0]), "rv": torch.zeros(2)}
    liar = {"w": torch.zeros(2), "rv": torch.tensor([1e6, 0.0])}
    states = {0: liar, 1: honest, 2: honest, 3: honest}
    replies = {i: SimpleNamespace(update={"w": -st["w"]}, state=st) for i, st in states.items()}
    agg = Aggregator("clipped-mean", batch_size=10)
    view = agg.dispute_reference(replies, dict.fromkeys(states, start), [10] * 4)
    out = agg.combine(
        [liar, honest], [start] * 2, [1, 1], [10, 10], [0, 1], epoch=0, reference=view
    )
    assert out["rv"].tolist() == pytest.approx([10.0, 0.0])  # cut to 4 x 5, then averaged


def test_an_idle_member_leaves_a_pair_that_a_dispute_settles():
    # as if it had not answered: its colluder's flip cannot hide in an average beside it
    agg = Aggregator("krum-mean", batch_size=10)
    ref = {"w": torch.tensor([1.0, 0.0, 0.0])}
    three = _states([[0, 0, 0], [1, 0, 0], [-3, 0.5, 0]])
    out = agg.combine(three, [START] * 3, [1] * 3, [10] * 3, [0, 1, 2], epoch=0, reference=ref)
    assert out["w"].tolist() == pytest.approx([1.0, 0.0, 0.0])
    record = agg.record()
    assert record["disputes"] == [{"epoch": 0, "pairs": [{"kept": 1, "left_out": 2}]}]
    assert record["no_update"] == [{"epoch": 0, "members": [0]}]


def test_a_delta_too_short_to_raise_says_nothing_and_makes_no_nan():
    # one entry of 1.4e-45 (a float32 subnormal) beside zeros: raised, 0 x inf would be NaN
    agg = Aggregator("krum-mean", batch_size=10)
    tiny = _states([[1.4e-45, 0, 0], [1, 0, 0], [0, 1, 0]])
    out = agg.combine(tiny, [START] * 3, [1] * 3, [10] * 3, [0, 1, 2], epoch=0)
    assert out["w"].tolist() == pytest.approx([0.5, 0.5, 0.0])  # the two that spoke
    assert agg.record()["no_update"] == [{"epoch": 0, "members": [0]}]
    # most of a group idle: they are heard as zeros, and do not cut the one that moved to 0
    idle = _states([[0, 0, 0], [0, 0, 0], [3, 4, 0]])
    mean = Aggregator("clipped-mean", batch_size=10)
    out = mean.combine(idle, [START] * 3, [1] * 3, [10] * 3, [0, 1, 2], epoch=1)
    assert out["w"].tolist() == pytest.approx([1.0, 4 / 3, 0.0])
    # a round view leaves out the replies that said nothing
    view = agg.dispute_reference(
        *_replies({i: {"w": d["w"]} for i, d in enumerate(tiny)}), [10] * 3
    )
    assert view is None  # two moved: no majority


def test_the_band_reads_each_members_steps_and_lets_a_zero_stay_zero():
    # the round: a median norm of 1 and 1 per step, whatever the 20 and the 0.004
    norms = {0: 1.0, 1: 1.0, 2: 1.0, 3: 4.0, 4: 20.0, 5: 0.0, 6: 0.004}
    view = RoundView(None, norms, {0: 1, 1: 1, 2: 1, 3: 4, 4: 1, 5: 1, 6: 4})
    deltas = [
        {"w": torch.tensor([0.0, 4.0])},
        {"w": torch.tensor([20.0, 0.0])},
        {"w": torch.zeros(2)},
        {"w": torch.tensor([0.0, 0.004])},
    ]
    out = banded(deltas, [4, 1, 1, 4], 4.0, [3, 4, 5, 6], view)
    assert out[0] is deltas[0]  # 4 in four steps: an honest length, untouched
    assert out[1]["w"].tolist() == [4.0, 0.0]  # 20 in one step: cut to 4 x 1
    assert out[2]["w"].tolist() == [0.0, 0.0]  # no direction to raise
    assert out[3]["w"].tolist() == pytest.approx([0.0, 1.0])  # raised to the lower reference
    # a member the view does not hold: the deltas' own norms set the band (of two, the smaller)
    alone = banded(deltas[:2], [4, 1], 4.0, [3, 9], view)
    assert alone[1]["w"].tolist() == pytest.approx([16.0, 0.0])


def test_the_band_raises_an_update_of_almost_nothing_to_the_rounds_reference():
    # a pair: a silo that sends its update x 1e-3 no longer cuts its partner to 4 x its own
    round_updates = {i: {"w": torch.tensor([3.0, 4.0, 0.0])} for i in range(2, 8)}
    round_updates |= {
        0: {"w": torch.tensor([3e-3, 4e-3, 0.0])},
        1: {"w": torch.tensor([0.0, 5.0, 0.0])},
    }
    agg = Aggregator("clipped-mean", batch_size=10)
    view = agg.dispute_reference(*_replies(round_updates), [10] * 8)
    pair = _states([[-3e-3, -4e-3, 0], [0, -5, 0]])  # deltas: minus lr x update, lr 1
    out = agg.combine(pair, [START] * 2, [1, 1], [10, 10], [0, 1], epoch=1, reference=view)
    assert out["w"].tolist() == pytest.approx([-1.5, -4.5, 0.0])  # both at length 5, averaged
    # without the round, the pair's own norms set the band: the partner is cut to 4 x 5e-3
    alone = agg.combine(pair, [START] * 2, [1, 1], [10, 10], [0, 1], epoch=1)
    assert float(alone["w"].norm()) < 0.02
    # the band's top is the round's too: a long one is cut to 4 x the round's median
    long_round = round_updates | {1: {"w": torch.tensor([0.0, 100.0, 0.0])}}
    view = agg.dispute_reference(*_replies(long_round), [10] * 8)
    far = _states([[0, -100, 0], [-3, -4, 0], [-3, -4, 0]])
    cut = agg.combine(far, [START] * 3, [1] * 3, [10] * 3, [1, 2, 3], epoch=2, reference=view)
    assert cut["w"].tolist() == pytest.approx([-2.0, -(20 + 8) / 3, 0.0])


def test_the_round_reference_is_the_coordinate_median_of_three_or_more():
    ups = [
        {"w": torch.tensor([1.0, 2.0])},
        {"w": torch.tensor([3.0, -1.0])},
        {"w": torch.tensor([1e6, 0.0])},
    ]
    assert round_reference(ups)["w"].tolist() == [-3.0, -0.0]  # a delta: minus the update
    assert round_reference(ups[:2]) is None


def test_krum_mean_clips_three_around_their_centre_and_leaves_out_the_far_ones_of_eight():
    three = [[1, 0, 0], [1.2, 0, 0], [-30, 0, 0]]
    got, _ = _combine("krum-mean", three, clip_factor=1e9)
    assert got[0] == pytest.approx(_combine("centered-clip", three, clip_factor=1e9)[0][0])
    assert got[0] > 0  # multi-krum keeps all three (f = 0): -9.3
    eight = [[1 + 0.01 * i, 1, 0] for i in range(6)] + [[-9, -9, 0], [9, -30, 0]]
    got, _ = _combine("krum-mean", eight, clip_factor=1e9)
    assert got[:2] == pytest.approx([1.025, 1.0])


def test_the_median_of_values_near_float32s_maximum_stays_finite():
    big = 3.0e38
    got, _ = _combine(
        "median", [[big, -big, 1], [big, -big, 2], [big, -big, 3], [big, -big, 4]], clip_factor=1e9
    )
    assert got == pytest.approx([big, -big, 2.5], rel=1e-6)


@pytest.mark.parametrize("bad", [0.5, -1, math.nan, math.inf, "4", True, None])
def test_count_bound_is_validated_naming_it(bad):
    if bad is None:
        assert (
            make_config("rotated-digits", "global").option("count_bound") == 0
        )  # the paper's: off
        return
    rule = "count_bound must be " + ("a number" if isinstance(bad, (str, bool)) else "0 .off.")
    with pytest.raises(ValueError, match=rule):
        make_config("rotated-digits", "global", count_bound=bad)


# --- the model's own history: how it moved last epoch ---------------------------------


def _history_combine(deltas, history, kind="krum-mean", reference=None):
    agg = Aggregator(kind, batch_size=10, clip_factor=1e9)
    n = len(deltas)
    hist = None if history is None else {"w": torch.tensor(history, dtype=torch.float32)}
    out = agg.combine(
        _states(deltas),
        [START] * n,
        [1.0] * n,
        [10] * n,
        range(10, 10 + n),
        epoch=3,
        reference=reference,
        history=hist,
    )
    return out["w"].tolist(), agg.record()


def test_members_against_the_models_last_movement_are_left_out_while_at_most_half():
    honest, liars = [[1, 0.1, 0], [1, -0.1, 0], [1.2, 0, 0]], [[-5, 0, 0], [-5, 1, 0]]
    got, record = _history_combine(honest + liars, [1, 0, 0])
    assert got == pytest.approx(_history_combine(honest, None)[0])  # as if they never came
    assert record["history_left_out"] == [{"epoch": 3, "groups": [[13, 14]]}]
    assert "history_left_out_note" in record
    # a tie (two of four) is settled by the history: what a cluster's colluders make
    got, record = _history_combine(honest[:2] + liars, [1, 0, 0])
    assert got == pytest.approx([1, 0, 0]) and record["history_left_out"][0]["groups"] == [[12, 13]]
    # more than half against it: the model is turning, every member counts
    got, record = _history_combine(honest[:2] + liars + [[-4, 0, 0]], [1, 0, 0])
    assert "history_left_out" not in record
    assert got == pytest.approx(_history_combine(honest[:2] + liars + [[-4, 0, 0]], None)[0])


@pytest.mark.parametrize("history", [None, [0, 0, 0], [0, 0, 1]])
def test_no_history_a_still_model_or_an_orthogonal_one_leaves_no_one_out(history):
    deltas = [[1, 0, 0], [1.1, 0, 0], [-3, 0, 0], [0.9, 0, 0]]
    got, record = _history_combine(deltas, history)
    assert "history_left_out" not in record
    assert got == pytest.approx(_history_combine(deltas, None)[0])


def test_a_dispute_of_two_is_settled_by_the_models_history_before_the_rounds_median():
    median_backs_the_flip = {"w": torch.tensor([-1.0, 0.0, 0.0])}  # the victim's domain is rare
    pair = [[1, 0, 0], [-4, 0, 0]]
    got, record = _history_combine(pair, None, reference=median_backs_the_flip)
    assert got == pytest.approx([-4, 0, 0])  # the round alone keeps the flip
    got, record = _history_combine(pair, [1, 0.2, 0], reference=median_backs_the_flip)
    assert got == pytest.approx([1, 0, 0])  # the model moved the victim's way last epoch
    assert record["disputes"] == [{"epoch": 3, "pairs": [{"kept": 10, "left_out": 11}]}]


def test_two_left_by_the_history_rule_are_averaged_not_disputed():
    """Two that the history has heard agree may still point apart: honest silos of two domains."""
    apart = [[1, 2, 0], [1, -2, 0]]  # cosine -0.6 with each other, +0.45 with the history
    got, record = _history_combine(apart + [[-3, 0, 0]], [1, 0, 0])
    assert record["history_left_out"] == [{"epoch": 3, "groups": [[12]]}]
    assert "disputes" not in record and got == pytest.approx([1, 0, 0])
    # the same two as a group of two: a dispute, one kept
    got, record = _history_combine(apart, [1, 0.1, 0])
    assert record["disputes"] == [{"epoch": 3, "pairs": [{"kept": 10, "left_out": 11}]}]
    assert got == pytest.approx([1, 2, 0])


def test_a_scheme_remembers_how_each_model_moved_last_epoch_only():
    from hcct_lite.schemes.baselines import Global

    scheme = Global()
    scheme.aggregator = Aggregator("krum-mean", batch_size=10, clip_factor=1e9)
    ref = {"w": torch.tensor([0.0, 0.0, 0.0])}
    honest, liar = [[1, 0, 0], [1.1, 0, 0], [0.9, 0, 0]], [[-3, 0, 0]]

    def average(deltas, epoch, model="global", starts=None):
        n = len(deltas)
        return scheme.average(
            _states(deltas),
            starts or [START] * n,
            [1] * n,
            [10] * n,
            range(n),
            epoch=epoch,
            reference=ref,
            model=model,
        )

    average(honest, 0)  # the model moves along +x
    average(honest + liar, 1)
    assert scheme.aggregator.record()["history_left_out"] == [{"epoch": 1, "groups": [[3]]}]
    average(honest + liar, 3)  # nothing aggregated at epoch 2: no history
    average(honest + liar, 4, model="another")  # another model's movement is not this one's
    other = {"w": torch.zeros(3), "n": torch.tensor(4)}
    average(honest, 5, starts=[START, other, START])  # differing starts: no one movement
    average(honest + liar, 6)
    assert len(scheme.aggregator.record()["history_left_out"]) == 1
    fedavg = Global()
    fedavg.aggregator = Aggregator("mean")
    fedavg.average(
        _states(honest), [START] * 3, [1] * 3, [10] * 3, range(3), epoch=0, model="global"
    )
    assert not vars(fedavg.aggregator)["_moved"]  # FedAvg remembers nothing


# --- one voice: Sybils that send one vector ---------------------------------------------------


def _d(*rows):
    return [{"w": torch.tensor(r, dtype=torch.float64)} for r in rows]


def test_identical_and_near_identical_updates_are_one_voice_and_no_others():
    # within 0.1 of the longer norm: one voice; a chain of such pairs: one voice
    assert one_voice(_d([1, 0], [1, 0], [0, 1])) == [[0, 1], [2]]
    assert one_voice(_d([1, 0], [0, 1], [1.09, 0])) == [[0, 2], [1]]
    assert one_voice(_d([1, 0], [1.12, 0])) == [[0], [1]]  # just past the bound
    assert one_voice(_d([1, 0], [1.08, 0], [1.16, 0])) == [[0, 1, 2]]  # a chain
    assert one_voice(_d([0, 0], [0, 0], [1, 0])) == [[0, 1], [2]]  # two silent ones
    assert one_voice(_d([1, 0])) == [[0]] and one_voice([]) == [[]]
    assert SAME_VOICE == 0.1


@pytest.mark.parametrize("kind", ROBUST)
def test_sybils_are_one_voice_under_every_robust_rule(kind):
    rng = np.random.default_rng(0)
    honest = [list(np.array([1.0, 1.0, 0.0]) + 0.3 * rng.standard_normal(3)) for _ in range(5)]
    sybil = [-2.0, -2.0, 0.0]
    got, agg = _combine(kind, honest + [sybil] * 3)
    alone, _ = _combine(kind, honest + [sybil])  # the same, one of them alone
    assert got == pytest.approx(alone)
    assert agg.same_voice == {0: [[5, 6, 7]]}
    record = agg.record()
    assert record["same_voice"] == [{"epoch": 0, "voices": [[5, 6, 7]]}]
    assert "one voice" in record["same_voice_note"]


def test_one_voice_leaves_out_three_sybils_that_krum_alone_keeps(monkeypatch):
    rng = np.random.default_rng(1)
    honest = [list(np.array([1.0, 1.0, 0.0]) + 0.3 * rng.standard_normal(3)) for _ in range(3)]
    deltas = honest + [[-1.0, -1.0, 0.0]] * 3
    got, _ = _combine("krum-mean", deltas)
    assert got[0] > 0.5 and got[1] > 0.5  # the Sybils' one voice is the far one, left out
    monkeypatch.setattr(robust, "one_voice", lambda d: [[i] for i in range(len(d))])
    fooled, _ = _combine("krum-mean", deltas)  # each Sybil backs the others at distance 0
    assert fooled[0] < 0 and fooled[1] < 0


def test_a_group_of_one_voice_is_that_voice_and_a_reference_counts_voices():
    got, agg = _combine("krum-mean", [[2.0, 1.0, 0.0]] * 2)
    assert got == pytest.approx([2.0, 1.0, 0.0]) and agg.few_replies == {}
    # three updates of two voices: no majority, so no reference
    ups = [{"w": torch.tensor([1.0, 0.0])}] * 2 + [{"w": torch.tensor([0.0, 1.0])}]
    assert round_reference(ups) is None
    ups.append({"w": torch.tensor([0.5, 0.5])})
    assert round_reference(ups)["w"].tolist() == pytest.approx([-0.5, -0.5])

"""Finite but crafted updates: the robust norm rule, stale models, MAXFL's reference replies."""

import dataclasses
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hcct_lite.deploy.defences import robust
from hcct_lite.deploy.defences.layer import NormRule
from hcct_lite.deploy.defences.norms import norm_bound
from hcct_lite.deploy.defences.robust import Aggregator
from hcct_lite.schemes.base import ServerView
from hcct_lite.schemes.baselines import Global
from hcct_lite.training.config import make_config
from hcct_lite.training.engine import LocalBackend, init_model, run_experiment
from hcct_lite.training.local import LocalResult
from hcct_lite.training.replies import Rejected, ReplyScreen
from hcct_lite.training.tasks import build_clients

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from attacks import AttackBackend  # noqa: E402

START = {"w": torch.zeros(4)}


def _reply(scale):
    state = {"w": torch.full((4,), -0.1 * scale)}  # update (start - state) / 0.1 = scale
    return LocalResult(state, {"w": torch.full((4,), float(scale))}, 40, 0.5, 0.9)


def test_a_boosted_update_is_rejected_naming_its_ratio_to_the_median():
    screen = ReplyScreen([50] * 5, NormRule(10.0))
    replies = {0: _reply(1e6), 1: _reply(1.0), 2: _reply(1.2), 3: _reply(0.9), 4: _reply(1.1)}
    ok = screen.accepted_training(replies, dict.fromkeys(replies, START), 0)
    assert sorted(ok) == [1, 2, 3, 4]
    (rejection,) = screen.rejected
    assert rejection["client"] == 0
    assert "update norm 2e+06 is 9.09e+05 times the round's median 2.2, and" in rejection["reason"]
    assert "norm rule: at most 10 times" in rejection["reason"]
    assert ReplyScreen([50] * 5).accepted_training(replies, dict.fromkeys(replies, START), 0)[0]


def test_an_update_of_1e37_entries_is_measured_in_float64():
    screen = ReplyScreen([50] * 3, NormRule(10.0))
    replies = {0: _reply(1e37), 1: _reply(1.0), 2: _reply(1.0)}
    assert sorted(screen.accepted_training(replies, dict.fromkeys(replies, START), 0)) == [1, 2]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 1e30), st.integers(1, 1000)), min_size=1, max_size=30),
    st.floats(2, 100),
)
def test_the_bound_never_lets_half_of_a_round_exceed_it(pairs, limit):
    norms, steps = zip(*pairs, strict=True)
    over = sum(n > b for n, b in zip(norms, norm_bound(norms, steps, limit).limits, strict=True))
    if len(norms) >= 3:
        assert over <= (len(norms) - 1) // 2
    else:  # of two the smaller is the reference: the longer may go, never both
        assert over <= len(norms) - 1


def test_the_bound_is_the_larger_reference_as_it_stands_and_per_step():
    bound = norm_bound([1.0, 1.0, 1.0, 2.0, 8.0], [1, 1, 1, 8, 8], 2.0)
    assert (bound.reference, bound.per_step_reference, bound.basis) == (1.0, 1.0, "median")
    assert bound.limits.tolist() == [2.0, 2.0, 2.0, 16.0, 16.0]
    two = norm_bound([3.0, 1.0], [1, 4], 2.0)
    assert (two.reference, two.per_step_reference, two.basis) == (1.0, 0.25, "smaller")
    assert two.limits.tolist() == [2.0, 2.0]


@pytest.mark.parametrize("scale", [3.0, 40.0, 1e6])
def test_the_screen_refuses_what_the_aggregator_clips_to_the_same_limit(scale, monkeypatch):
    # four identical honest deltas keep the arithmetic plain: hear each as its own voice
    monkeypatch.setattr(robust, "one_voice", lambda d: [[i] for i in range(len(d))])
    factor, sizes = 4.0, [10, 10, 10, 10, 20]  # batch size 10: the fifth silo takes 2 steps
    replies = {i: _reply(1.0) for i in range(4)} | {4: _reply(scale)}
    screen = ReplyScreen([50] * 5, NormRule(factor, [1, 1, 1, 1, 2]))
    kept = screen.accepted_training(replies, dict.fromkeys(replies, START), 0)
    limit = norm_bound([1.0] * 4 + [scale], [1, 1, 1, 1, 2], factor).limits[4]  # 8.0
    assert (4 in kept) == (scale <= limit)
    agg = Aggregator("clipped-mean", clip_factor=factor, batch_size=10, local_epochs=1)
    deltas = [[1.0, 0.0]] * 4 + [[scale, 0.0]]
    states = [{"w": torch.tensor(d)} for d in deltas]
    start = {"w": torch.zeros(2)}
    out = agg.combine(states, [start] * 5, [1.0] * 5, sizes, range(5), epoch=0)
    assert out["w"][0].item() == pytest.approx((4 + min(scale, limit)) / 5)


def test_the_setting_is_validated_off_in_process_and_on_in_a_deployment():
    import tomllib
    from pathlib import Path

    import hcct_lite.deploy.flower

    # in-process runs are the paper's algorithm; a deployment's app defends by default
    assert make_config("rotated-digits", "global").option("norm_limit") == 0.0
    app = Path(hcct_lite.deploy.flower.__file__).parent / "app" / "pyproject.toml"
    config = tomllib.loads(app.read_text())["tool"]["flwr"]["app"]["config"]
    assert config["norm-limit"] == 20.0 and config["aggregator"] == "krum-mean"
    with pytest.raises(ValueError, match="norm_limit must be 0 \\(off\\) or a factor >= 2"):
        make_config("rotated-digits", "global", norm_limit=1.5)
    with pytest.raises(ValueError, match="norm_limit"):
        make_config("rotated-digits", "global", norm_limit=math.inf)


def test_a_member_missing_last_epoch_does_not_pull_its_group_back():
    stale, fresh = {"w": torch.zeros(2)}, {"w": torch.ones(2)}
    server = ServerView(
        sizes=np.array([10, 10, 10]),
        init_state=stale,
        head=[],
        trainable=["w"],
        active=[0, 1, 2],
        absent={0},
        states={0: stale, 1: fresh, 2: fresh},
    )
    plan = Global().plan(1, server)
    assert all(torch.equal(plan.start[i]["w"], fresh["w"]) for i in range(3))


def _attacked(scheme, attack, norm_limit=20.0, epochs=4, **settings):
    cfg = make_config("rotated-digits", scheme, 0, epochs=epochs, norm_limit=norm_limit, **settings)
    model = init_model(cfg, 0, "cpu")
    names = [k for k, _ in model.named_parameters()]
    inner = LocalBackend(cfg, build_clients(cfg), model, "cpu")
    return run_experiment(
        cfg, progress=False, backend=AttackBackend(inner, attack, names, [0], cfg)
    )


class _Silent(AttackBackend):
    def train(self, starts, lr, epoch):
        out = self.inner.train(starts, lr, epoch)
        out.pop(0, None)
        return out


@pytest.mark.parametrize("scheme", ["global", "fedfa"])
def test_a_rejected_booster_costs_the_honest_silos_what_a_silent_one_does(scheme):
    attacked = _attacked(scheme, "boost")
    assert [r["client"] for r in attacked["rejected"]] == [0] * 4
    cfg = make_config("rotated-digits", scheme, 0, epochs=4)
    model = init_model(cfg, 0, "cpu")
    inner = LocalBackend(cfg, build_clients(cfg), model, "cpu")
    silent = run_experiment(cfg, progress=False, backend=_Silent(inner, "clean", [], [], cfg))
    honest = [h["client_test_error"][1:] for h in attacked["history"]]
    assert honest == [h["client_test_error"][1:] for h in silent["history"]]
    unguarded = _attacked(scheme, "boost", norm_limit=0)
    assert unguarded["rejected"] == [] and unguarded["history"] != attacked["history"]


def _averaged(history) -> bool:
    """Whether client 0 shared a group with another client in some epoch."""
    return any(0 not in h["missing"] and [0] not in h["groups"] for h in history)


# HCCT keeps the booster alone by itself (its cosine to anyone is small); IFCA does not
@pytest.mark.parametrize(("scheme", "unguarded_joins"), [("hcct", False), ("ifca", True)])
def test_a_booster_is_never_averaged_with_an_honest_silo(scheme, unguarded_joins):
    assert not _averaged(_attacked(scheme, "boost", epochs=6)["history"])
    unguarded = _attacked(scheme, "boost", norm_limit=0, epochs=6)
    assert _averaged(unguarded["history"]) is unguarded_joins


def test_a_client_alone_is_never_rejected_by_the_rule():
    screen = ReplyScreen([50] * 5, NormRule(10.0))
    replies = {0: _reply(1e6), 1: _reply(1.0), 2: _reply(1.2), 3: _reply(0.9), 4: _reply(1.1)}
    ok = screen.accepted_training(replies, dict.fromkeys(replies, START), 0, [[0], [1, 2], [3, 4]])
    assert sorted(ok) == [0, 1, 2, 3, 4] and screen.rejected == []
    ok = screen.accepted_training(
        dict(replies), dict.fromkeys(replies, START), 0, [[0, 1], [2], [3, 4]]
    )
    assert sorted(ok) == [1, 2, 3, 4]


def test_hccts_loners_are_judged_under_a_robust_rule_for_the_group_they_join_next():
    from hcct_lite.deploy.defences.layer import Defence
    from hcct_lite.schemes.baselines import IFCA, Independent
    from hcct_lite.schemes.hcct import HCCT

    def judges(scheme, aggregator):
        cfg = make_config("rotated-digits", "global", aggregator=aggregator, norm_limit=20.0)
        return Defence(cfg).judges_loners(scheme)

    assert judges(HCCT(1.0), "krum-mean") and not judges(HCCT(1.0), "mean")
    assert not any(judges(Independent(), a) for a in ("mean", "median"))
    assert judges(IFCA(2), "mean")  # cluster models: every reply, always
    # the sleeper: alone in epoch 0, a model whose classifier is turned and 1000 x as large,
    # then a copy of silo 1's update, so that silo 1's next group starts from its model
    guarded = _attacked("hcct", "sleeper", epochs=3, aggregator="krum-mean")
    assert [(x["client"], x["epoch"]) for x in guarded["rejected"]] == [(0, 0)]
    assert guarded["history"][0]["missing"] == [0]
    # FedAvg keeps the paper's grids' rule: the poison passes, and silo 1, grouped with
    # the sleeper in epoch 2, trains from their average and has its own reply refused
    plain = _attacked("hcct", "sleeper", epochs=3)
    refused = {(x["client"], x["epoch"]) for x in plain["rejected"]}
    assert (0, 0) not in refused and (1, 2) in refused


class _BadReferences(AttackBackend):
    """MAXFL's reference rounds (negative epochs): client 1 unreadable, client 2 NaN."""

    def train(self, starts, lr, epoch):
        out = self.inner.train(starts, lr, epoch)
        if epoch < 0 and 1 in out:
            out[1] = Rejected("unreadable training reply: the reply has no model record")
        if epoch < 0 and 2 in out:
            nan = {k: torch.full_like(v, math.nan) for k, v in out[2].state.items()}
            out[2] = dataclasses.replace(out[2], state=nan)
        return out


def test_maxfl_reference_replies_pass_the_same_screen():
    cfg = make_config("rotated-digits", "maxfl", 0, epochs=2, maxfl_reference_epochs=2)
    inner = LocalBackend(cfg, build_clients(cfg), init_model(cfg, 0, "cpu"), "cpu")
    r = run_experiment(cfg, progress=False, backend=_BadReferences(inner, "clean", [], [], cfg))
    assert r["status"] == {"state": "complete"}
    reasons = {(x["client"], x["reason"].split(":")[0]) for x in r["rejected"]}
    assert (1, "unreadable training reply") in reasons
    assert any(c == 2 and "non-finite" in why for c, why in reasons)
    assert all(e is not None for e in r["final"]["client_test_error"])


def test_a_silo_with_more_steps_is_judged_per_step_and_one_with_fewer_as_it_stands():
    """32x the data, 32x the steps: an honest update 23x the median is not refused."""
    replies = {0: _reply(23.0), 1: _reply(1.0), 2: _reply(1.2), 3: _reply(0.9), 4: _reply(1.1)}
    per_step = ReplyScreen([50] * 5, NormRule(20.0, [32, 1, 1, 1, 1]))
    kept = per_step.accepted_training(dict(replies), dict.fromkeys(replies, START), 0)
    assert sorted(kept) == [0, 1, 2, 3, 4]
    raw = ReplyScreen([50] * 5, NormRule(20.0))  # one step each: the old rule
    kept = raw.accepted_training(dict(replies), dict.fromkeys(replies, START), 0)
    assert sorted(kept) == [1, 2, 3, 4]
    # a silo of 6 steps among silos of 23-28 whose updates have shrunk: 20-35x the median
    # per step (seen in Table II's pattern (1,3)), but not longer than the others' updates
    few = {0: _reply(2.0), 1: _reply(1.0), 2: _reply(1.2), 3: _reply(0.9), 4: _reply(1.1)}
    small = ReplyScreen([50] * 5, NormRule(20.0, [1, 30, 30, 30, 30]))
    assert sorted(small.accepted_training(few, dict.fromkeys(few, START), 0)) == [0, 1, 2, 3, 4]


def test_a_big_honest_silo_trains_with_the_federation():
    cfg = make_config("rotated-digits", "global", 0, epochs=3)
    clients = build_clients(cfg)
    c = clients[0]
    clients[0] = dataclasses.replace(
        c, x_train=c.x_train.repeat(32, 1, 1, 1), y_train=c.y_train.repeat(32)
    )
    result = run_experiment(cfg, progress=False, clients=clients)
    assert result["sizes"][0] == 32 * result["sizes"][1] and result["rejected"] == []


def test_of_two_replies_the_shorter_is_the_reference():
    screen = ReplyScreen([50] * 2, NormRule(20.0))
    replies = {0: _reply(1e6), 1: _reply(1.0)}  # the median of two would be 5e5
    assert sorted(screen.accepted_training(replies, dict.fromkeys(replies, START), 0)) == [1]
    assert "the round's smaller 2" in screen.rejected[0]["reason"]

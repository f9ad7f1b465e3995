"""Server-side aggregation rules of the schemes, on hand-made states."""

import numpy as np
import pytest
import torch

from hcct_lite.baselines import IFCA, MAXFL
from hcct_lite.client import LocalResult
from hcct_lite.schemes import HCCTP, FedFA, Plan, ServerView, weighted_average
from hcct_lite.tasks import make_config


def state(v, head, count=0):
    return {
        "body.weight": torch.full((2,), float(v)),
        "fc.weight": torch.full((2,), float(head)),
        "bn.num_batches_tracked": torch.tensor(count),
    }


def result(st, acc=0.5):
    return LocalResult(st, {}, 10, 0.0, acc)


def view(n, sizes, states=None, probe=None, **cfg):
    return ServerView(
        make_config("rotated-digits", "hcct", 0, **cfg),
        list(range(n)),
        set(),
        np.asarray(sizes),
        states or {},
        {},
        state(0, 0),
        ["fc.weight"],
        probe,
        lambda k: state(k, k),
    )


def test_weighted_average_floats_and_counters():
    avg = weighted_average([state(0, 0, 2), state(4, 8, 5)], [3, 1])
    assert avg["body.weight"].tolist() == [1.0, 1.0]
    assert avg["fc.weight"].tolist() == [2.0, 2.0]
    assert avg["bn.num_batches_tracked"].item() == 3  # round(0.75 * 2 + 0.25 * 5)
    assert avg["bn.num_batches_tracked"].dtype == torch.int64
    with pytest.raises(ValueError, match="weights"):
        weighted_average([state(0, 0)], [-1])
    with pytest.raises(ValueError, match="sum to 0"):
        weighted_average([state(0, 0)], [0])


def test_hcct_p_averages_the_body_and_keeps_each_head():
    server = view(2, [1, 1])
    out = HCCTP().aggregate(
        1, server, Plan({}, [[0, 1]]), {0: result(state(0, 10)), 1: result(state(2, 20))}
    )
    assert out[0]["body.weight"].tolist() == out[1]["body.weight"].tolist() == [1.0, 1.0]
    assert out[0]["fc.weight"].tolist() == [10.0, 10.0]
    assert out[1]["fc.weight"].tolist() == [20.0, 20.0]


def test_fedfa_weighs_by_minus_log2_accuracy():
    server = view(2, [1, 100])
    out = FedFA().aggregate(
        1,
        server,
        Plan({}, [[0, 1]]),
        {0: result(state(0, 0), acc=0.5), 1: result(state(3, 0), acc=0.25)},
    )
    # weights -log2(.5) = 1 and -log2(.25) = 2: sizes do not matter
    assert out[0]["body.weight"].tolist() == pytest.approx([2.0, 2.0])


def test_maxfl_joins_only_when_the_global_model_is_better():
    losses = {(0, "g"): 0.1, (0, "own"): 0.5, (1, "g"): 0.9, (1, "own"): 0.2}
    own = {0: state(1, 1), 1: state(2, 2)}
    glob = state(9, 9)

    def probe(i, st):
        return losses[(i, "g" if st is glob else "own")], 0.0

    scheme = MAXFL()
    server = view(2, [1, 1], states=own, probe=probe)
    scheme.setup(server)
    scheme.global_state = glob
    plan = scheme.plan(1, server)
    assert plan.info["participants"] == [0]
    assert plan.start[0] is glob and plan.start[1] is own[1]
    assert plan.groups == [[0], [1]]


def test_ifca_picks_the_cluster_model_with_the_lowest_loss():
    def probe(i, st):
        return abs(float(st["body.weight"][0]) - 2 * i), 0.0

    scheme = IFCA()
    server = view(3, [1, 1, 1], probe=probe, cluster_models=3)
    scheme.setup(server)  # cluster models 0, 1, 2 (bodies 0, 1, 2)
    plan = scheme.plan(0, server)
    assert plan.info["clusters"] == {0: [0], 1: [2], 2: [2]}
    assert plan.groups == [[0], [1, 2]]

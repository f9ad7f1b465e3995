"""A stored result's derived fields, each checked against what it derives from.

Each case edits one field of a real result the way a forger (or broken code) would; the
schema must refuse it, naming what disagrees, and the store must not reuse it.
"""

import copy
import json
import math

import pytest

from hcct_lite.runs.schema import result_problem
from hcct_lite.runs.store import reuse_problem
from hcct_lite.training.config import make_config
from hcct_lite.training.engine import run_experiment


@pytest.fixture(scope="module")
def runs():
    """A FedAvg run and a robust one with a silo of 8x the others' count declared."""
    plain = run_experiment(make_config("rotated-digits", "global", 0, epochs=3), progress=False)
    cfg = make_config(
        "rotated-digits", "hcct", 0, epochs=3, n_clients=3, aggregator="krum-mean", count_bound=2.0
    )
    from hcct_lite.training.tasks import build_clients

    clients = build_clients(cfg)
    c = clients[0]
    clients[0] = type(c)(
        **{**c.__dict__, "x_train": c.x_train.repeat(8, 1, 1, 1), "y_train": c.y_train.repeat(8)}
    )
    robust = run_experiment(cfg, progress=False, clients=clients)
    return json.loads(json.dumps(plain)), json.loads(json.dumps(robust))


def _edit(r, change):
    r = copy.deepcopy(r)
    change(r)
    return r


def _set(path, value):
    def change(r):
        *keys, last = path
        target = r
        for k in keys:
            target = target[k]
        target[last] = value

    return change


CASES = [
    ("sizes strings", _set(["sizes", 0], "112"), "its sizes must be whole numbers"),
    ("sizes -1", _set(["sizes", 1], -1), "its sizes must be whole numbers"),
    ("sizes bool", _set(["sizes", 1], True), "its sizes must be whole numbers"),
    ("sizes huge", _set(["sizes", 1], 10**8), "its sizes must be whole numbers"),
    ("domains numbers", _set(["domains", 0], 90), "its domains must be words"),
    ("epoch number", _set(["history", 1, "epoch"], 5), "history entry 1 says it is epoch 5"),
    ("lr", _set(["history", 2, "lr"], 0.5), "history epoch 2's lr 0.5 is not"),
    ("n_groups", _set(["history", 0, "n_groups"], 7), "history epoch 0's n_groups 7"),
    (
        "mean 1.0",
        _set(["history", 1, "mean_test_error"], 1.0),
        "history epoch 1's mean_test_error 1.0 is not the mean",
    ),
    (
        "mean NaN",
        _set(["history", 0, "mean_test_error"], math.nan),
        "history epoch 0's mean_test_error nan is not the mean",
    ),
    (
        "mean None",
        _set(["history", 0, "mean_test_error"], None),
        "history epoch 0's mean_test_error None is not the mean",
    ),
    ("missing forged", _set(["history", 0, "missing"], [3]), "history epoch 0's missing [3]"),
    (
        "loss negative",
        _set(["history", 0, "train_loss", 2], -1.0),
        "client 2's training loss -1.0 is not a number >= 0",
    ),
    (
        "loss absent",
        _set(["history", 0, "train_loss", 2], None),
        "client 2 has an error but did not train",
    ),
    ("loss short", _set(["history", 0, "train_loss"], [0.1]), "must give 8 training losses"),
    ("final missing", _set(["final", "missing"], [4]), "its final missing does not name"),
    (
        "best missing",
        _set(["final", "best_over_epochs", "missing"], [0]),
        "its final best_over_epochs missing",
    ),
    (
        "aggregator",
        _set(["aggregation", "aggregator"], "median"),
        "its aggregation names 'median', its config 'mean'",
    ),
    ("aggregation list", _set(["aggregation"], []), "its aggregation names []"),
    (
        "few in a mean run",
        _set(["aggregation", "few_replies"], [{"epoch": 0, "groups": [[0, 1]]}]),
        "its aggregation few_replies is not what a mean run records",
    ),
    (
        "rejected forged",
        _set(["rejected"], [{"client": 2, "epoch": 1, "reason": "norm rule"}]),
        "says client 2's reply was refused in epoch 1, but the client has an error",
    ),
    (
        "rejected client",
        _set(["rejected"], [{"client": 8, "epoch": 1, "reason": "x"}]),
        "its rejected holds",
    ),
    (
        "rejected epoch",
        _set(["rejected"], [{"client": 1, "epoch": 3, "reason": "x"}]),
        "its rejected holds",
    ),
    (
        "rejected reason",
        _set(["rejected"], [{"client": 1, "epoch": 0, "reason": ""}]),
        "its rejected holds",
    ),
    ("rejected shape", _set(["rejected"], ["client 1"]), "its rejected holds"),
    ("rejected dict", _set(["rejected"], {"client": 1}), "its rejected is dict, not a list"),
]


@pytest.mark.parametrize(("name", "change", "words"), CASES, ids=[c[0] for c in CASES])
def test_every_derived_field_is_checked_against_its_source(runs, name, change, words, tmp_path):
    plain, _ = runs
    assert result_problem(plain) is None
    edited = _edit(plain, change)
    problem = result_problem(edited)
    assert problem is not None and words in problem, problem
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(edited))
    reason = reuse_problem(str(path), make_config("rotated-digits", "global", 0, epochs=3))
    assert reason.startswith("not a complete result") and words in reason


def test_a_robust_runs_records_are_checked_against_its_config_and_sizes(runs):
    _, robust = runs
    assert result_problem(robust) is None
    assert robust["aggregation"]["vouched_counts"] == [224, 112, 112]  # 8 x 112 cut to 2 x 112
    cases = [
        (_set(["aggregation", "vouched_counts"], [896, 112, 112]), "its vouched counts"),
        (lambda r: r["aggregation"].pop("vouched_counts"), "its vouched counts"),
        (_set(["sizes", 0], 112), "its vouched counts"),
        (
            _set(["aggregation", "few_replies"], [{"epoch": 9, "groups": [[0, 1]]}]),
            "its aggregation few_replies is not what a krum-mean run records",
        ),
        (_set(["aggregation", "disputes"], "none"), "its aggregation disputes"),
        (_set(["aggregation", "no_update"], [{"epoch": -1, "members": [0]}]), "no_update"),
        (_set(["aggregation", "same_voice"], [{"epoch": 0}]), "its aggregation same_voice"),
    ]
    for change, words in cases:
        problem = result_problem(_edit(robust, change))
        assert problem is not None and words in problem, problem


def test_older_results_without_the_newer_records_still_pass(runs):
    plain, _ = runs
    older = _edit(
        plain, lambda r: [r.pop("aggregation"), r.pop("rejected"), r["final"].pop("missing")]
    )
    assert result_problem(older) is None

"""A silo's replies read field by field: refusals are sentences, never raw exceptions."""

from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("flwr")

from hcct_lite.deploy.flower.common import to_record  # noqa: E402
from hcct_lite.deploy.flower.reading import enrolment, metric, training_result  # noqa: E402
from hcct_lite.deploy.flower.server import FlowerBackend  # noqa: E402
from hcct_lite.training.local import LocalResult  # noqa: E402
from hcct_lite.training.replies import Rejected  # noqa: E402

START = {"fc.weight": torch.zeros(2, 3), "fc.bias": torch.zeros(2)}
GOOD = {"num-examples": 40, "train-loss": 0.5, "train-acc": 0.9}
NAMES = list(START)


def _trained(**change):
    state = {k: v + 0.1 for k, v in START.items()}
    state.update(change)
    return to_record(state)


@pytest.mark.parametrize(
    ("content", "sentence"),
    [
        ({"metrics": GOOD}, "the reply has no model record"),
        ({"model": _trained()}, "the reply has no metrics record"),
        (
            {"model": to_record({"fc.weight": torch.ones(2, 3)}), "metrics": GOOD},
            "missing parameter fc.bias",
        ),
        (
            {"model": _trained(**{"fc.bias": torch.ones(7)}), "metrics": GOOD},
            r"parameter fc.bias has shape \(7,\); the model sent has \(2,\)",
        ),
        (
            {"model": _trained(), "metrics": {"num-examples": 40, "train-loss": 0.5}},
            "missing metric train-acc",
        ),
        (
            {"model": _trained(), "metrics": {**GOOD, "train-loss": "lots"}},
            r"metric train-loss is not a number \('lots'\)",
        ),
        ({"model": "not a record", "metrics": GOOD}, "its model record cannot be read"),
    ],
)
def test_a_bad_training_reply_is_refused_with_a_sentence(content, sentence):
    with pytest.raises(ValueError, match=f"^{sentence}"):
        training_result(content, START, NAMES, 0.1)


def test_a_good_training_reply_becomes_a_local_result():
    result = training_result({"model": _trained(), "metrics": GOOD}, START, NAMES, 0.1)
    assert isinstance(result, LocalResult)
    assert torch.allclose(result.update["fc.bias"], torch.full((2,), -1.0))
    assert metric({"metrics": {"error": "12.5"}}, "error") == 12.5


@pytest.mark.parametrize(
    ("info", "words"),
    [
        ({"partition-id": 1, "num-examples": 9.3e18}, "num-examples 9.3e+18 is not a whole number"),
        ({"partition-id": 1, "num-examples": 0}, "num-examples 0 is not a whole number from 1"),
        ({"partition-id": 1, "num-examples": float("nan")}, "num-examples nan"),
        ({"partition-id": 7, "num-examples": 40}, "partition-id 7 is not in 0..3"),
        ({"num-examples": 40}, "unreadable enrolment"),
    ],
)
def test_enrolments_out_of_range_are_refused_with_the_reason(info, words):
    who, why = enrolment({"info": info}, 4)
    assert who is None and words in why
    assert enrolment({"info": {"partition-id": 1, "num-examples": 40}}, 4) == (1, 40)


def _backend(replies):
    backend = object.__new__(FlowerBackend)  # no Grid: its rounds are stubbed
    backend.client_of, backend.node_of = {10: 0, 11: 1}, {0: 10, 1: 11}
    backend._round = lambda contents, kind, group="": replies
    return backend


def test_evaluation_and_probe_replies_without_metrics_are_rejected_not_raised():
    replies = {
        10: SimpleNamespace(content={"metrics": {"error": 20.0, "loss": 0.3}}),
        11: SimpleNamespace(content={}),  # no metrics record at all
        99: SimpleNamespace(content={"metrics": {"error": 1.0}}),  # a node nobody asked
    }
    backend = _backend(replies)
    out = backend.evaluate({0: START, 1: START})
    assert out[0] == 20.0 and set(out) == {0, 1}
    assert isinstance(out[1], Rejected) and "has no metrics record" in out[1].reason
    assert backend.probe(0, START) == (0.3, 0.8)
    assert isinstance(backend.probe(1, START), Rejected)


def test_discovery_waits_for_the_listed_silos_whatever_else_connects():
    calls = []

    def node_ids():
        calls.append(1)
        return [7, 9] if len(calls) < 3 else [7, 9, 8]  # silo 8 late; node 9 not listed

    backend = object.__new__(FlowerBackend)
    backend.grid = SimpleNamespace(get_node_ids=node_ids)
    backend.cfg = SimpleNamespace(n_clients=2)
    backend.silo_nodes, backend.discovery_timeout = [7, 8], 5.0

    def enrol(contents, kind, timeout=None):
        ids = {7: 0, 8: 1, 9: 0}
        return {
            n: SimpleNamespace(content={"info": {"partition-id": ids[n], "num-examples": 40}})
            for n in contents
        }

    backend._round = enrol
    node_of, sizes, unenrolled = backend._discover(wait=30.0)
    assert node_of == {0: 7, 1: 8} and sizes == {0: 40, 1: 40} and len(calls) >= 3
    assert unenrolled == {}

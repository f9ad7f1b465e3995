"""One silo's crafted replies, through the real ServerApp and ClientApp message handling.

The federation runs in process (:class:`hcct_lite.flower.inline.InlineGrid`, every message
serialized as over the wire): hcct-lite's ClientApp with the poisoning mod of
``tests/flower_poison_app`` on one silo, the ServerApp's own
:func:`~hcct_lite.flower.server.run_on_grid` on the other side.
"""

import sys
from pathlib import Path

import pytest

pytest.importorskip("flwr")

sys.path.insert(0, str(Path(__file__).parent / "flower_poison_app"))

from poison_app import poison  # noqa: E402

from hcct_lite.flower.client import make_client_app  # noqa: E402
from hcct_lite.flower.inline import InlineGrid  # noqa: E402
from hcct_lite.flower.server import REPORTED_BY_SILOS, run_on_grid  # noqa: E402
from hcct_lite.training.config import make_config  # noqa: E402
from hcct_lite.training.engine import run_experiment  # noqa: E402

EPOCHS = 3


def _run(scheme="hcct", poisoned=None, run_config=None, **kw):
    cfg = make_config("rotated-digits", scheme, 0, epochs=EPOCHS, **kw)
    nodes = {100 + i: {"partition-id": i} for i in range(cfg.n_clients)}
    for i, kind in (poisoned or {}).items():
        nodes[100 + i]["poison"] = kind
    grid = InlineGrid(make_client_app(cfg, mods=[poison]), nodes)
    return run_on_grid(grid, run_config or {"discovery-timeout": 5.0}, cfg)


def test_an_honest_federation_decides_as_the_local_engine():
    result = _run()
    local = run_experiment(make_config("rotated-digits", "hcct", 0, epochs=EPOCHS), progress=False)
    assert [h["groups"] for h in result["history"]] == [h["groups"] for h in local["history"]]
    assert result["final"]["mean"] == pytest.approx(local["final"]["mean"], abs=0.01)
    assert result["unenrolled"] == {} and result["reported_by_silos"] == REPORTED_BY_SILOS


@pytest.mark.parametrize(
    ("kind", "words"),
    [("enrol-zero", "num-examples 0 is not a whole number"),
     ("enrol-huge", "num-examples 9.3e+18 is not a whole number")],
)  # fmt: skip
def test_a_refused_enrolment_makes_that_silo_missing_not_the_run_fail(kind, words):
    result = _run(poisoned={2: kind})
    assert result["status"] == {"state": "complete"}
    assert (
        list(result["unenrolled"]) == ["2"]
        and "no node enrolled as client 2" in (result["unenrolled"]["2"])
    )
    assert all(2 in h["missing"] for h in result["history"])
    assert result["sizes"][2] == 0 and result["domains"][2] == "not enrolled"
    assert sum(e is not None for e in result["final"]["client_test_error"]) == 7


def test_a_listed_silo_declaring_another_id_is_missing_with_the_reason():
    nodes = " ".join(str(100 + i) for i in range(8))
    result = _run(poisoned={3: "enrol-as-5"}, run_config={"silo-nodes": nodes})
    assert result["status"] == {"state": "complete"}
    assert result["unenrolled"] == {
        "3": "node 103 refused: declares partition-id 5, but silo-nodes makes it client 3"
    }


def test_two_nodes_claiming_one_silo_are_both_refused():
    result = _run(poisoned={3: "enrol-as-5"})  # no silo-nodes: ids as declared
    assert result["status"] == {"state": "complete"}
    assert "both claim partition 5" in result["unenrolled"]["5"]
    assert "no node enrolled as client 3" in result["unenrolled"]["3"]
    assert all({3, 5} <= set(h["missing"]) for h in result["history"])


@pytest.mark.parametrize(
    ("scheme", "kind", "words"),
    [("hcct", "no-metrics", "the reply has no metrics record"),
     ("hcct", "no-model", "the reply has no model record"),
     ("maxfl", "no-model", "the reply has no model record"),
     ("global", "boost", "norm rule: at most 20 times"),
     ("hcct-e", "nan", "non-finite")],
)  # fmt: skip
def test_a_crafted_reply_is_rejected_with_a_sentence_and_the_run_completes(scheme, kind, words):
    kw = {"maxfl_reference_epochs": 1} if scheme == "maxfl" else {}
    result = _run(scheme, poisoned={1: kind}, **kw)
    assert result["status"] == {"state": "complete"}
    reasons = [r["reason"] for r in result["rejected"] if r["client"] == 1]
    assert reasons and all(words in why for why in reasons), reasons
    assert all(r["client"] == 1 for r in result["rejected"])


def test_a_free_rider_trains_alone_and_ends_nothing():
    result = _run(poisoned={4: "free-ride"})
    assert result["status"] == {"state": "complete"}
    assert all([4] in h["groups"] and 4 in h.get("unchanged", [4]) for h in result["history"])


def test_maxfl_retries_a_lost_reference_with_fresh_epoch_numbers_the_silo_accepts():
    """A silo trains each epoch number once; a reference whose reply was lost is retried."""
    seen, lost = [], []

    def lose_first_reference(msg, context, call_next):
        reply = call_next(msg, context)
        i, epoch = context.node_config["partition-id"], msg.content["config"].get("epoch")
        if msg.metadata.message_type == "train" and i == 2:
            seen.append((epoch, reply.error.reason if reply.has_error() else "ok"))
            if epoch == -1 and not lost:  # trained, but the reply never reaches the server
                lost.append(epoch)
                raise ConnectionError("reply lost")
        return reply

    cfg = make_config("rotated-digits", "maxfl", 0, epochs=EPOCHS, maxfl_reference_epochs=1)
    nodes = {100 + i: {"partition-id": i} for i in range(cfg.n_clients)}
    grid = InlineGrid(make_client_app(cfg, mods=[lose_first_reference]), nodes)
    result = run_on_grid(grid, {"discovery-timeout": 5.0}, cfg)
    assert result["status"] == {"state": "complete"} and lost == [-1]
    references = [(e, why) for e, why in seen if e < 0]
    assert references == [(-1, "ok"), (-2, "ok")]  # refused as "already trained" before
    assert all(why == "ok" for _, why in seen)

"""One silo's crafted replies, through the real ServerApp and ClientApp message handling.

The federation runs in process (:class:`hcct_lite.deploy.inline.InlineGrid`, every message
serialized as over the wire): hcct-lite's ClientApp with the poisoning mod of
``tests/deploy/flower_poison_app`` on one silo, the ServerApp's own
:func:`~hcct_lite.deploy.flower.server.run_on_grid` on the other side.
"""

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("flwr")

sys.path.insert(0, str(Path(__file__).parent / "flower_poison_app"))

from poison_app import poison  # noqa: E402

from hcct_lite.deploy.flower.client import make_client_app  # noqa: E402
from hcct_lite.deploy.flower.common import deployment_defence  # noqa: E402
from hcct_lite.deploy.flower.server import REPORTED_BY_SILOS, run_on_grid  # noqa: E402
from hcct_lite.deploy.inline import InlineGrid  # noqa: E402
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
    [
        ("enrol-zero", "num-examples 0 is not a whole number"),
        ("enrol-huge", "num-examples 9.3e+18 is not a whole number"),
    ],
)
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
    [
        ("hcct", "no-metrics", "the reply has no metrics record"),
        ("hcct", "no-model", "the reply has no model record"),
        ("maxfl", "no-model", "the reply has no model record"),
        ("global", "boost", "norm rule: at most 20 times"),
        ("hcct-e", "nan", "non-finite"),
    ],
)
def test_a_crafted_reply_is_rejected_with_a_sentence_and_the_run_completes(scheme, kind, words):
    kw = {"maxfl_reference_epochs": 1} if scheme == "maxfl" else {}
    if kind == "boost":  # the norm rule, as a deployment's app sets it (off in-process)
        kw["norm_limit"] = 20.0
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


def _run_for(epochs, scheme, aggregator, poisoned, **settings):
    cfg = make_config("rotated-digits", scheme, 0, epochs=epochs, aggregator=aggregator, **settings)
    nodes = {100 + i: {"partition-id": i} for i in range(cfg.n_clients)}
    for i, kind in poisoned.items():
        nodes[100 + i]["poison"] = kind
    grid = InlineGrid(make_client_app(cfg, mods=[poison]), nodes)
    result = run_on_grid(grid, {"discovery-timeout": 5.0}, cfg)
    honest = [e for i, e in enumerate(result["final"]["client_test_error"]) if i not in poisoned]
    return sum(honest) / len(honest), result


def test_a_flip_within_the_norm_rule_wrecks_fedavg_but_not_centred_clipping():
    """Silo 1 sends its update times -10: never rejected, it turns FedAvg around."""
    errors = {}
    for aggregator in ("mean", "centered-clip"):
        clean, _ = _run_for(8, "global", aggregator, {})
        attacked, result = _run_for(8, "global", aggregator, {1: "flip"})
        assert result["rejected"] == [] and result["aggregation"]["aggregator"] == aggregator
        errors[aggregator] = (clean, attacked)
    assert errors["mean"][1] > errors["mean"][0] + 10  # 73.6 -> 91.7 when measured
    assert errors["centered-clip"][1] < errors["centered-clip"][0] + 2  # 73.5 -> 72.5


def test_a_declared_count_buys_nothing_under_the_deployments_defence():
    """Silo 1 declares 10^6 of its 112 samples and sends its update x -28,125."""
    liar = {1: "enrol-million+x-28125"}
    defence = deployment_defence()
    clean, _ = _run_for(8, "global", **defence, poisoned={})
    attacked, result = _run_for(8, "global", **defence, poisoned=liar)
    assert result["sizes"][1] == 10**6  # what it declared, and what the server vouched for:
    assert result["aggregation"]["vouched_counts"] == [112] + [896] + [112] * 6
    assert attacked < clean + 2  # 71.2 -> 68.6 when measured (8 epochs)
    off = {**defence, "aggregator": "mean", "count_bound": 0.0}
    undefended, result = _run_for(4, "global", **off, poisoned=liar)
    assert undefended > 85  # chance is 90: 90.4 in 4 epochs, the flip let through the rule
    assert not any(r["client"] == 1 and r["epoch"] == 0 for r in result["rejected"])


def test_a_deployment_defends_by_default():
    assert deployment_defence() == {
        "aggregator": "krum-mean",
        "clip_factor": 4.0,
        "count_bound": 8.0,
        "norm_limit": 20.0,
        "trim_fraction": 0.25,
    }
    paper = make_config("rotated-digits", "global")
    assert (paper.option("aggregator"), paper.option("count_bound")) == (
        "mean",
        0.0,
    )  # the paper's runs


def test_two_silos_are_averaged_without_a_robust_rule_and_the_result_says_so():
    cfg = make_config(
        "rotated-digits",
        "global",
        0,
        epochs=2,
        n_clients=2,
        aggregator="centered-clip",
        norm_limit=20.0,
    )
    nodes = {100 + i: {"partition-id": i} for i in range(2)}
    nodes[101]["poison"] = "boost"
    grid = InlineGrid(make_client_app(cfg, mods=[poison]), nodes)
    result = run_on_grid(grid, {"discovery-timeout": 5.0}, cfg)
    # of two, the shorter update is the norm rule's reference: the booster is refused
    assert {r["client"] for r in result["rejected"]} == {1}
    assert "the round's smaller" in result["rejected"][0]["reason"]
    clean = run_on_grid(
        InlineGrid(make_client_app(cfg), {100: {"partition-id": 0}, 101: {"partition-id": 1}}),
        {"discovery-timeout": 5.0},
        cfg,
    )
    assert clean["aggregation"]["few_replies"] == [{"epoch": t, "groups": [[0, 1]]} for t in (0, 1)]
    assert "no robust rule can tell which is honest" in clean["aggregation"]["few_replies_note"]


def test_a_deployed_serverapp_whose_experiment_stopped_fails_after_writing_it(tmp_path):
    from flwr.app import Context, RecordDict

    from hcct_lite.deploy.flower.server import make_server_app

    cfg = make_config("rotated-digits", "global", 0, epochs=2, n_clients=3)
    nodes = {100 + i: {"partition-id": i, "poison": "nan"} for i in range(3)}
    grid = InlineGrid(make_client_app(cfg, mods=[poison]), nodes)
    out = tmp_path / "stopped.json"
    run_config = {"discovery-timeout": 5.0, "json-out": str(out)}
    context = Context(
        run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=run_config
    )
    app = make_server_app(cfg, fail_when_stopped=True)
    with pytest.raises(RuntimeError, match="the experiment stopped in epoch 0: no client answered"):
        app(grid, context)
    stored = json.loads(out.read_text())
    assert stored["status"]["state"] == "stopped" and len(stored["rejected"]) == 3
    # the simulation's app reports instead of failing: flower-sim prints the reason itself
    grid = InlineGrid(make_client_app(cfg, mods=[poison]), nodes)
    quiet = make_server_app(cfg)
    quiet(grid, context)
    assert quiet.last_result["status"]["state"] == "stopped"


def test_three_colluders_of_eight_are_left_out_by_the_models_history():
    """Silos 0-2 each send their update times -10 (the ClientApp's ``flip``), together."""
    flips = dict.fromkeys(range(3), "flip")
    _, result = _run_for(6, "global", **deployment_defence(), poisoned=flips)
    left = {e["epoch"]: e["groups"] for e in result["aggregation"]["history_left_out"]}
    # from the second epoch with a history on, the three and only they are left out
    assert [left.get(t) for t in range(2, 6)] == [[[0, 1, 2]]] * 4
    assert result["rejected"] == []  # nothing refused: the history alone leaves them out

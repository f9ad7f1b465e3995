"""What a curious server can read from a silo's training replies, and what the silo refuses.

The leaks of docs/deploy.md are shown working, then the silo's cheap guards: its own
bounds on the learning rate, the batch size and the local epochs, one training per epoch
number, an evaluation budget that repeated training cannot refill, and a config that
carries only what a silo needs; last, the two leaks that remain within every guard.
"""

import json

import numpy as np
import pytest
import torch

pytest.importorskip("flwr")

from flwr.app import ConfigRecord, Message, RecordDict  # noqa: E402

from hcct_lite.deploy.flower.client import make_client_app  # noqa: E402
from hcct_lite.deploy.flower.common import (  # noqa: E402
    SILO_FIELDS,
    config_from_text,
    from_record,
    silo_config_text,
    to_record,
)
from hcct_lite.deploy.inline import InlineGrid  # noqa: E402
from hcct_lite.training.config import make_config  # noqa: E402
from hcct_lite.training.local import SGDTrainer  # noqa: E402
from hcct_lite.training.models import build_model, head_names  # noqa: E402
from hcct_lite.training.tasks import build_clients  # noqa: E402

CFG = make_config("rotated-digits", "hcct", 0)


def _zero_model(model) -> dict:
    return {k: torch.zeros_like(v) for k, v in model.state_dict().items()}


def test_one_training_message_with_a_zero_model_and_a_large_batch_reveals_the_labels():
    data = build_clients(CFG)[0]
    model = build_model(CFG.model)
    n = len(data.y_train)
    res = SGDTrainer(model, 1, batch_size=n, seed=0).train_one(_zero_model(model), data, 1.0, 0, 0)
    bias = next(k for k in head_names(model) if res.state[k].ndim == 1)
    # one full-batch step from zero: bias = -(1/10 - share of each class)
    shares = 0.1 + res.state[bias].double().numpy()
    assert np.allclose(shares * n, np.bincount(data.y_train.numpy(), minlength=10), atol=1e-4)


def _grid(node_config=None):
    nodes = {100: {"partition-id": 0, **(node_config or {})}}
    return InlineGrid(make_client_app(), nodes)


def _send(grid, kind, model, **config):
    content = RecordDict(
        {
            "model": to_record(model),
            "config": ConfigRecord(
                {"keep-head": False, **config, "config-json": silo_config_text(CFG)}
            ),
        }
    )
    (reply,) = grid.send_and_receive([Message(content, dst_node_id=100, message_type=kind)])
    return reply


def _always(model, c: int) -> dict:
    state = _zero_model(model)
    bias = next(k for k in head_names(model) if state[k].ndim == 1)
    state[bias][c] = 10.0
    return state


def test_training_at_learning_rate_0_would_read_the_label_histogram_and_is_refused():
    model = build_model(CFG.model)
    data = build_clients(CFG)[0]
    # the leak: at lr 0 the model does not move, so train-acc is the share of class c
    res = SGDTrainer(model, 1, 64, seed=0).train_one(_always(model, 3), data, 0.0, 0, 0)
    assert res.train_acc == pytest.approx(float((data.y_train == 3).float().mean()))
    grid = _grid()
    reply = _send(grid, "train", _always(model, 3), lr=0.0, epoch=0)
    assert reply.has_error() and "outside this silo's lr-range" in reply.error.reason


def test_a_silo_trains_once_per_epoch_and_repeated_training_refills_no_evaluation():
    model = build_model(CFG.model)
    grid = _grid({"max-evaluations": 1})
    start = model.state_dict()
    assert not _send(grid, "train", start, lr=0.1, epoch=0).has_error()
    again = _send(grid, "train", start, lr=0.1, epoch=0)
    assert again.has_error() and "epoch 0 was already trained" in again.error.reason
    assert not _send(grid, "evaluate", start, split="test").has_error()
    _send(grid, "train", start, lr=0.1, epoch=0)  # refused: the budget stays spent
    assert "at most 1 evaluation" in _send(grid, "evaluate", start, split="test").error.reason
    assert not _send(grid, "train", start, lr=0.1, epoch=1).has_error()  # a new epoch
    assert not _send(grid, "evaluate", start, split="test").has_error()
    # fresh numbers past the run's end neither train nor refill the budget
    for epoch in (CFG.epochs, 10_000):
        beyond = _send(grid, "train", start, lr=0.1, epoch=epoch)
        assert f"epoch {epoch} is beyond this run's {CFG.epochs} epochs" in beyond.error.reason
    assert "at most 1 evaluation" in _send(grid, "evaluate", start, split="test").error.reason


@pytest.mark.parametrize(
    ("node_config", "settings", "words"),
    [
        ({"lr-range": "0.01 0.5"}, {"lr": 0.9}, "learning rate 0.9 is outside"),
        ({"batch-size-range": "16 128"}, {"batch_size": 500}, "batch size 500 is outside"),
        ({"max-local-epochs": 3}, {"local_epochs": 5}, "5 local epochs; this silo runs at most 3"),
        ({"lr-range": "0.01"}, {}, 'lr-range must be two numbers "low high"'),
        ({"lr-range": "0.5 0.01"}, {}, "with low <= high; got '0.5 0.01'"),
        ({"batch-size-range": "8 many"}, {}, "batch-size-range must be two numbers"),
        (
            {"max-local-epochs": "x"},
            {},
            "node config max-local-epochs must be a whole number >= 0; got 'x'",
        ),
    ],
)
def test_a_silo_refuses_training_outside_its_own_bounds(node_config, settings, words):
    global CFG
    keep, CFG = (
        CFG,
        make_config(
            "rotated-digits", "hcct", 0, **{k: v for k, v in settings.items() if k != "lr"}
        ),
    )
    try:
        reply = _send(
            _grid(node_config),
            "train",
            build_model(CFG.model).state_dict(),
            lr=settings.get("lr", 0.1),
            epoch=0,
        )
    finally:
        CFG = keep
    assert reply.has_error() and words in reply.error.reason


@pytest.mark.parametrize("cap", ["abc", "-1", "2.5"])
def test_a_malformed_evaluation_budget_is_refused_with_its_name(cap):
    reply = _send(
        _grid({"max-evaluations": cap}),
        "evaluate",
        build_model(CFG.model).state_dict(),
        split="test",
    )
    assert reply.has_error()
    assert f"node config max-evaluations must be a whole number >= 0; got '{cap}'" in (
        reply.error.reason
    )


@pytest.mark.parametrize(
    "kind, config", [("train", {"lr": 0.1, "epoch": 0}), ("evaluate", {"split": "test"})]
)
@pytest.mark.parametrize("keep", ["yes", "true", 1, 0.0, [True]])
def test_a_silo_refuses_a_keep_head_that_is_not_true_or_false(kind, config, keep):
    # the silo runs no scheme: the server says whether it keeps its classifier (HCCT-P)
    model = build_model(CFG.model)
    reply = _send(_grid(), kind, model.state_dict(), **config, **{"keep-head": keep})
    assert reply.has_error() and "keep-head must be true or false" in reply.error.reason


def test_the_silo_learns_keep_head_from_the_server_not_from_the_schemes():
    import ast

    import hcct_lite.deploy.flower.client as client

    tree = ast.parse(open(client.__file__).read())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not any("schemes" in m for m in imported), imported


def test_silos_receive_only_the_settings_they_need():
    cfg = make_config("rotated-digits", "hcct", 0, data_root="/srv/coordinator/data", alpha=7.0)
    sent = json.loads(silo_config_text(cfg))
    assert set(sent) == set(SILO_FIELDS)
    assert "/srv/coordinator" not in silo_config_text(cfg) and "alpha" not in sent
    back = config_from_text(silo_config_text(cfg))
    assert all(getattr(back, k) == getattr(cfg, k) for k in SILO_FIELDS)


def test_within_every_guard_ten_training_messages_still_read_the_label_histogram():
    # a leak docs/deploy.md admits: lr 1e-4 is inside the default lr-range, and each
    # "always class c" model goes out under a fresh epoch number of the run's 30, so no
    # guard refuses it
    model = build_model(CFG.model)
    data = build_clients(CFG)[0]
    grid = _grid()
    read = []
    for c in range(10):
        reply = _send(grid, "train", _always(model, c), lr=1e-4, epoch=c)
        assert not reply.has_error()
        read.append(float(reply.content["metrics"]["train-acc"]))
    truth = np.bincount(data.y_train.numpy(), minlength=10) / data.y_train.numel()
    assert np.allclose(read, truth, atol=1e-9)


@pytest.mark.parametrize("batch", [8, 16])
def test_within_every_guard_one_training_message_reads_the_label_histogram(batch):
    # a leak docs/deploy.md admits: a batch inside batch-size-range that divides the silo's
    # 112 samples; from a zero model at lr 1e-4 every batch's softmax stays uniform, so the
    # output bias moves by -lr * sum over batches of (1/10 - the batch's class shares)
    global CFG
    keep, CFG = CFG, make_config("rotated-digits", "hcct", 0, batch_size=batch)
    try:
        model = build_model(CFG.model)
        reply = _send(_grid(), "train", _zero_model(model), lr=1e-4, epoch=0)
    finally:
        CFG = keep
    assert not reply.has_error()
    data = build_clients(CFG)[0]
    n, lr = len(data.y_train), 1e-4
    state = from_record(reply.content["model"])
    bias = next(k for k in head_names(model) if state[k].ndim == 1)
    counts = batch * (n / batch / 10 + state[bias].double().numpy() / lr)
    truth = np.bincount(data.y_train.numpy(), minlength=10)
    assert np.array_equal(np.rint(counts), truth)

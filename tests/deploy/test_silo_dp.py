"""What one training message gives away, and DP-SGD at the silo (Opacus), through the ClientApp.

The imprint construction (``benchmarks/leaks.py``) reads whole training images from a
single reply at every guard's default; with ``dp-noise-multiplier`` set, the same message
gives back none, the reply says the epsilon spent, and the silo keeps its account across
messages and runs (its ledger) and refuses to go over its budget.
"""

import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("flwr")
pytest.importorskip("opacus")

from flwr.app import ConfigRecord, Message, RecordDict  # noqa: E402

from hcct_lite.deploy.flower.client import make_client_app  # noqa: E402
from hcct_lite.deploy.flower.common import from_record, silo_config_text, to_record  # noqa: E402
from hcct_lite.deploy.inline import InlineGrid  # noqa: E402
from hcct_lite.deploy.privacy import (  # noqa: E402
    LEDGER_FILE,
    DPSettings,
    dp_settings,
    private_train,
)
from hcct_lite.training.config import make_config  # noqa: E402
from hcct_lite.training.models import build_model  # noqa: E402
from hcct_lite.training.tasks import build_clients  # noqa: E402

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from leaks import histogram_from_bias, imprint_model, reconstruct, recovered  # noqa: E402


def _train(grid, cfg, state, epoch=0, lr=1e-4):
    content = RecordDict(
        {
            "model": to_record(state),
            "config": ConfigRecord(
                {"lr": lr, "epoch": epoch, "config-json": silo_config_text(cfg), "keep-head": False}
            ),
        }
    )
    (reply,) = grid.send_and_receive([Message(content, dst_node_id=100, message_type="train")])
    return reply


def _imprinted(batch, node):
    cfg = make_config("rotated-digits", "hcct", 0, batch_size=batch)
    clients = build_clients(cfg)
    public = clients[2].x_train.reshape(-1, 64).mean(1).numpy()  # another silo's brightness
    state = imprint_model(build_model(cfg.model), public)
    reply = _train(InlineGrid(make_client_app(), {100: {"partition-id": 0, **node}}), cfg, state)
    images = clients[0].x_train.reshape(len(clients[0].x_train), -1)
    return reply, images, reconstruct(state, from_record(reply.content["model"]))


@pytest.mark.parametrize("batch", [8, 64])
def test_one_training_message_gives_back_training_images_unless_the_silo_uses_dp(batch):
    reply, images, guesses = _imprinted(batch, {})
    assert recovered(images, guesses, 0.05) >= 10  # 19 of 112 (batch 8), 16 (64) measured
    reply, images, guesses = _imprinted(batch, {"dp-noise-multiplier": 1.0})
    assert recovered(images, guesses, 0.05) == 0 and recovered(images, guesses, 0.3) == 0
    eps = reply.content["metrics"]["dp-epsilon"]
    assert 0 < eps < 10  # 2.9 (batch 8), 5.4 (64) measured
    assert reply.content["metrics"]["train-acc"] == 0.0  # withheld: an exact data statistic


def test_the_one_message_label_histogram_is_exact_without_dp_and_noise_with_it():
    cfg = make_config("rotated-digits", "hcct", 0, batch_size=8)
    model = build_model(cfg.model)
    zero = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    truth = np.bincount(build_clients(cfg)[0].y_train.numpy(), minlength=10)
    errors = {}
    for sigma in (0.0, 1.0):
        node = {"partition-id": 0, "dp-noise-multiplier": sigma}
        reply = _train(InlineGrid(make_client_app(), {100: node}), cfg, zero)
        got = histogram_from_bias(zero, from_record(reply.content["model"]), 1e-4, 112, 14)
        errors[sigma] = float(np.abs(got - truth).sum())
    assert errors[0.0] < 0.05 and errors[1.0] > 20  # 112 samples: off by >= 20 in all


def _epsilons(node, runs, per_run):
    """Each reply's ``dp-epsilon`` (None: refused) over ``runs`` runs of ``per_run`` epochs.

    Each run is a fresh grid: a fresh Flower context, as a server's new run gets.
    """
    cfg = make_config("rotated-digits", "hcct", 0)
    state = build_model(cfg.model).state_dict()
    out, reasons = [], []
    for run in range(runs):
        grid = InlineGrid(make_client_app(), {100: node}, run_id=run + 1)
        for epoch in range(per_run):
            reply = _train(grid, cfg, state, epoch=epoch, lr=0.1)
            refused = reply.has_error()
            out.append(None if refused else reply.content["metrics"]["dp-epsilon"])
            reasons += [reply.error.reason] if refused else []
    return out, reasons


def test_the_silo_keeps_its_account_over_messages_and_keeps_its_budget(tmp_path):
    node = {"partition-id": 0, "dp-noise-multiplier": 1.0, "dp-max-epsilon": 8.0}
    (first, second, third), (reason,) = _epsilons(
        {**node, "dp-ledger-dir": str(tmp_path / "silo")}, 1, 3
    )
    # 112 samples, batches of 64: 5.4 after one epoch, 7.6 after two (delta 1e-5)
    assert 0 < first < second < 8.0  # the same silo: spending adds up
    assert third is None and "over its budget 8 (node config dp-max-epsilon)" in reason  # 9.0


def test_the_budget_adds_up_over_every_run_the_silo_serves(tmp_path):
    # issue 74: a server that started a new run met a fresh budget (70 messages, epsilon 40)
    node = {"partition-id": 0, "dp-noise-multiplier": 1.0, "dp-max-epsilon": 8.0}
    one_run, _ = _epsilons({**node, "dp-ledger-dir": str(tmp_path / "a")}, 1, 3)
    folder = tmp_path / "b"
    many_runs, reasons = _epsilons({**node, "dp-ledger-dir": str(folder)}, 4, 1)
    assert many_runs[:3] == one_run and one_run[2] is None and many_runs[3] is None
    assert all("over its budget 8" in r for r in reasons)
    entries = json.loads((folder / LEDGER_FILE).read_text())  # a refusal spends nothing
    assert len(entries) == 2 and entries[0] == entries[1] and entries[0][:2] == [1.0, 0.5]
    assert os.stat(folder).st_mode & 0o777 == 0o700


def test_without_a_budget_no_ledger_is_needed_and_the_account_lasts_one_run():
    node = {"partition-id": 0, "dp-noise-multiplier": 1.0}
    epsilons, reasons = _epsilons(node, 2, 2)
    assert not reasons and epsilons[0] < epsilons[1] and epsilons[2:] == epsilons[:2]


def test_a_budget_without_a_ledger_is_refused_in_one_line():
    node = {"partition-id": 0, "dp-noise-multiplier": 1.0, "dp-max-epsilon": 8.0}
    epsilons, (reason,) = _epsilons(node, 1, 1)
    assert epsilons == [None] and "\n" not in reason
    assert "node config dp-max-epsilon needs dp-ledger-dir" in reason


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b'{"history": []}',
        b"[[1.0, 0.5]]",
        b"[[1.0, 0.5, -1]]",
        b"[[true, 0.5, 2]]",
        b"",
    ],
)
def test_a_corrupt_ledger_is_refused_naming_it_never_reset(tmp_path, content):
    folder = tmp_path / "silo"
    folder.mkdir(mode=0o700)
    (folder / LEDGER_FILE).write_bytes(content)
    node = {"partition-id": 0, "dp-noise-multiplier": 1.0, "dp-max-epsilon": 8.0}
    epsilons, (reason,) = _epsilons({**node, "dp-ledger-dir": str(folder)}, 1, 1)
    assert epsilons == [None] and "\n" not in reason
    assert f"{folder / LEDGER_FILE}: is not a DP ledger" in reason
    assert (folder / LEDGER_FILE).read_bytes() == content


def test_a_ledger_that_is_a_link_is_refused_naming_it(tmp_path):
    folder = tmp_path / "silo"
    folder.mkdir(mode=0o700)
    (tmp_path / "elsewhere.json").write_text("[]")
    (folder / LEDGER_FILE).symlink_to(tmp_path / "elsewhere.json")
    node = {"partition-id": 0, "dp-noise-multiplier": 1.0, "dp-max-epsilon": 8.0}
    _, (reason,) = _epsilons({**node, "dp-ledger-dir": str(folder)}, 1, 1)
    assert f"{folder / LEDGER_FILE}: cannot be read" in reason


@pytest.mark.parametrize(
    ("node", "words"),
    [
        ({"dp-noise-multiplier": "lots"}, "dp-noise-multiplier must be a finite number"),
        ({"dp-noise-multiplier": math.inf}, "dp-noise-multiplier must be a finite number"),
        ({"dp-noise-multiplier": True}, "dp-noise-multiplier must be a finite number"),
        ({"dp-noise-multiplier": -1.0}, "dp-noise-multiplier is out of range"),
        ({"dp-noise-multiplier": 1.0, "dp-max-grad-norm": 0}, "dp-max-grad-norm is out of range"),
        ({"dp-noise-multiplier": 1.0, "dp-delta": 1.0}, "dp-delta is out of range"),
        ({"dp-noise-multiplier": 1.0, "dp-max-epsilon": -2}, "dp-max-epsilon is out of range"),
        ({"dp-noise-multiplier": 1.0, "dp-max-epsilon": 8}, "dp-max-epsilon needs dp-ledger-dir"),
        ({"dp-noise-multiplier": 1.0, "dp-ledger-dir": "silo"}, "must be an absolute path"),
        ({"dp-noise-multiplier": 1.0, "dp-ledger-dir": 3}, "must be an absolute path"),
    ],
)
def test_dp_settings_are_validated_naming_the_key(node, words):
    with pytest.raises(ValueError, match=words):
        dp_settings(node)
    assert dp_settings({}) is None and dp_settings({"dp-noise-multiplier": 0}) is None


def test_a_model_with_batch_norm_is_refused_not_trained_wrongly():
    cfg = make_config("rotated-digits", "hcct", 0, model="digit_cnn_small")
    model = build_model(cfg.model)
    data = build_clients(make_config("rotated-digits", "hcct", 0))[0]
    with pytest.raises(ValueError, match="DP-SGD cannot train this model per sample"):
        private_train(model, model.state_dict(), data, 0.1, 0, 1, 64, DPSettings(1.0))


def test_dp_training_is_seeded():
    cfg = make_config("rotated-digits", "hcct", 0)
    data = build_clients(cfg)[0]
    model = build_model(cfg.model)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    a, _, eps_a = private_train(model, start, data, 0.1, 7, 1, 64, DPSettings(1.0))
    b, _, eps_b = private_train(model, start, data, 0.1, 7, 1, 64, DPSettings(1.0))
    c, _, _ = private_train(model, start, data, 0.1, 8, 1, 64, DPSettings(1.0))
    assert all(torch.equal(a.state[k], b.state[k]) for k in a.state) and eps_a == eps_b
    assert not torch.equal(a.state["fc1.weight"], c.state["fc1.weight"])

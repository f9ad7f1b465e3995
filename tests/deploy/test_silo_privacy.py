"""What evaluation replies reveal about a silo's labels, and the silo's cap on them."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from hcct_lite.training.config import make_config
from hcct_lite.training.local import evaluate
from hcct_lite.training.models import build_model, head_names
from hcct_lite.training.tasks import build_clients


def _always(model, c: int) -> dict:
    """A crafted model: every weight zero, the output bias one-hot on class ``c``."""
    state = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    bias = next(k for k in head_names(model) if state[k].ndim == 1)
    state[bias][c] = 10.0
    return state


def test_ten_crafted_evaluations_reveal_a_silos_label_histogram():
    # the attack docs/deploy.md warns about: error of "always class c" = 1 - share of c
    cfg = make_config("rotated-digits", "hcct", 0)
    data = build_clients(cfg)[0]
    model = build_model(cfg.model)
    shares = [
        1 - evaluate(model, _always(model, c), data.x_train, data.y_train)[1] / 100
        for c in range(10)
    ]
    counts = np.bincount(data.y_train.numpy(), minlength=10)
    assert np.allclose(np.array(shares) * len(data.y_train), counts, atol=1e-6)


def test_a_silo_caps_the_evaluations_between_training_rounds():
    pytest.importorskip("flwr")
    from flwr.app import MetricRecord, RecordDict

    from hcct_lite.deploy.flower.client import _count_evaluation

    context = SimpleNamespace(node_config={"max-evaluations": 2}, state=RecordDict())
    _count_evaluation(context)
    _count_evaluation(context)
    with pytest.raises(PermissionError, match="at most 2 evaluation"):
        _count_evaluation(context)
    context.state["evaluations"] = MetricRecord({"n": 0})  # what a training round does
    _count_evaluation(context)
    free = SimpleNamespace(node_config={}, state=RecordDict())
    for _ in range(50):  # no cap by default
        _count_evaluation(free)

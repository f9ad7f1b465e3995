"""HCCT-E's layer choice."""

import numpy as np
import pytest
import torch

from hcct_lite.partition.layer_selection import layer_scores, select_layer


def client(rng, spread):
    return {
        "conv.weight": torch.tensor(1.0 + 0.01 * rng.standard_normal(6)),
        "conv.bias": torch.tensor(1.0 + 0.01 * rng.standard_normal(2)),
        "fc.weight": torch.tensor(1.0 + spread * rng.standard_normal(4)),
        "fc.bias": torch.tensor(np.ones(1)),
    }


def test_the_layer_that_varies_across_clients_is_chosen():
    rng = np.random.default_rng(0)
    updates = [client(rng, spread=0.5) for _ in range(5)]
    assert select_layer(updates) == "fc"
    scores = layer_scores(updates)
    assert set(scores) == {"conv", "fc"}
    assert scores["fc"] > 10 * scores["conv"]
    assert select_layer(updates, by="entry") == "fc.weight"


def test_relative_variance_uses_abs_mean_and_guards_zero():
    same = {"a": np.ones(3), "b": -np.ones(3)}
    assert layer_scores([same, same]) == {"a": 0.0, "b": 0.0}
    varied = [
        {"a": np.array([1.0, -1.0]), "b": -np.ones(2)},
        {"a": np.array([-1.0, 1.0]), "b": -3 * np.ones(2)},
    ]
    scores = layer_scores(varied)
    assert scores["a"] == float("inf")  # mean exactly 0 but it varies
    assert scores["b"] == pytest.approx(1.0 / 2.0)  # var 1, |mean| 2


def test_bad_input():
    with pytest.raises(ValueError, match="by must be"):
        select_layer([{"a": np.ones(2)}], by="layer")
    with pytest.raises(ValueError, match="layer 'a'"):
        layer_scores([{"a": np.ones(2)}, {"a": np.array([np.nan, 1.0])}])

"""The Fig. 4-7 studies and the buffer ablation, on the embedded task."""

import numpy as np

from hcct_lite.experiments.paper_figures import (
    alpha_ratio_grid,
    buffers_ablation,
    fixed_k_curve,
    incoming_curves,
)


def test_incoming_curves_lengths():
    c = incoming_curves("rotated-digits", (0, 2), initial=4, epochs=7, join_every=3)
    assert list(c) == ["0 new per 3 epochs", "2 new per 3 epochs"]
    assert all(len(v) == 7 for v in c.values())
    # the first clients hold the same data in both runs: identical until the first arrival
    assert c["0 new per 3 epochs"][:3] == c["2 new per 3 epochs"][:3]


def test_alpha_ratio_grid_keys():
    g = alpha_ratio_grid("rotated-digits", [1.0, 100.0], [0.3, 0.5], epochs=2)
    assert set(g) == {(0.3, 1.0), (0.3, 100.0), (0.5, 1.0), (0.5, 100.0)}
    assert all(0 <= v <= 100 for v in g.values())


def test_fixed_k_curve_forces_k_groups_and_reports_utility():
    errors, utils = fixed_k_curve("rotated-digits", [1, 4, 8], epochs=3)
    assert len(errors) == len(utils) == 3
    # with every client alone each has utility 1 - alpha / D_i, the largest K here
    assert utils[2] > utils[0]


def test_buffers_ablation_on_a_model_without_batch_norm_changes_nothing():
    out = buffers_ablation("rotated-digits", epochs=2)
    a, b = out["parameters"], out["with buffers"]
    np.testing.assert_allclose(a["cosines"], b["cosines"])  # no buffers in this model
    assert a["groups"] == b["groups"] and a["mean_error"] == b["mean_error"]

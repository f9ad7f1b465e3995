"""Theorem 1 helpers, the sliders' callbacks and their headless widget wiring."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from hcct_lite.lessons.gradient_similarity import label_mix_similarity
from hcct_lite.partition.synthetic import clustered_updates  # noqa: E402
from hcct_lite.theory import (
    alpha_equivalent,
    error_bound,
    join_gain,
    learning_rate_sum,
    sample_term,
    utility,
)
from hcct_lite.viz.plots import plot_bound, plot_label_similarity, plot_utility_curves  # noqa: E402
from hcct_lite.viz.widgets import bound_explorer, draw_bound, draw_partition, partition_explorer


def test_bound_terms():
    assert sample_term(100, lipschitz=1, mu=1, delta=0.1) == pytest.approx(0.4)
    assert error_bound(100, 0.2, delta=0.1, lam=0.05) == pytest.approx(0.65)
    assert alpha_equivalent(delta=0.1) == pytest.approx(40.0)
    # joining 300 more samples at divergence 0.1: 0.4 -> 0.1 + 0.1
    assert join_gain(100, 400, 0.1, delta=0.1) == pytest.approx(0.2)
    assert join_gain(100, 400, 0.5, delta=0.1) < 0
    np.testing.assert_allclose(utility(40.0, [100, 400], 1.0), [0.6, 0.9])
    with pytest.raises(ValueError, match="delta"):
        sample_term(10, delta=1.5)
    with pytest.raises(ValueError, match="group_size"):
        sample_term(0)
    with pytest.raises(ValueError, match="divergence"):
        error_bound(10, -0.1)


def test_label_mix_similarity_is_negative_and_seeded():
    d1, c1, r1 = label_mix_similarity(n_pairs=12, seed=3)
    d2, c2, r2 = label_mix_similarity(n_pairs=12, seed=3)
    np.testing.assert_array_equal(c1, c2)
    assert d1.shape == c1.shape == (12,) and (0 <= d1).all() and (d1 <= 1).all()
    assert r1 == r2 < 0
    with pytest.raises(ValueError, match="n_pairs"):
        label_mix_similarity(n_pairs=2)


def test_bound_and_utility_plots_draw_their_lines():
    ax = plot_bound(100, 0.1)
    assert len(ax.get_lines()) >= 3 and ax.get_legend() is not None
    ax = plot_utility_curves(40.0, 100, cosines=(1.0, 0.5))
    assert len(ax.get_lines()) == 3
    ax = plot_label_similarity(np.array([0.1, 0.5, 0.9]), np.array([0.8, 0.5, 0.1]), -0.99)
    assert "r = -0.99" in ax.get_legend().get_texts()[0].get_text()
    plt.close("all")


def test_draw_bound_callback_reports_the_gain():
    fig, gain = draw_bound(0.1, 0.1, 100, 400)
    assert gain == pytest.approx(0.2) and "helps" in fig.axes[0].get_title()
    fig, gain = draw_bound(0.1, 0.5, 100, 400)
    assert gain < 0 and "hurts" in fig.axes[0].get_title()
    plt.close("all")


def test_draw_partition_callback():
    u, d, _ = clustered_updates([2, 2], dim=100, noise=0.3, seed=0)
    fig, p = draw_partition(u, d, 100.0)
    assert p.groups == [[0, 1], [2, 3]] and "2 group(s)" in fig.axes[0].get_title()
    _, p = draw_partition(u, d, 1e5)
    assert p.n_groups == 1
    plt.close("all")


def test_widgets_wire_sliders_to_callbacks_headless():
    u, d, _ = clustered_updates([2, 2], dim=100, noise=0.3, seed=0)
    w = partition_explorer(u, d, alpha=100.0)
    w.update()
    assert w.result.groups == [[0, 1], [2, 3]]
    w.children[0].value = 1e5  # move the alpha slider
    assert w.result.n_groups == 1
    b = bound_explorer(own_size=100, group_size=400)
    b.update()
    assert b.result == pytest.approx(0.2)
    divergence = next(c for c in b.children if getattr(c, "description", "") == "divergence")
    divergence.value = 0.5
    assert b.result < 0
    plt.close("all")


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: utility(float("nan"), 10, 0.5), "alpha"),
        (lambda: utility(1.0, 10, 5.0), "cosine"),
        (lambda: error_bound(10, 0.1, lam=-5), "lam"),
        (lambda: error_bound(10, float("nan")), "divergence"),
        (lambda: error_bound(10, 0.1, delta=float("nan")), "delta"),
        (lambda: label_mix_similarity(n_pairs=3, samples=0), "samples"),
        (lambda: learning_rate_sum(10, decay=1.5), "decay"),
        (lambda: learning_rate_sum(2.5), "epochs"),
        (lambda: learning_rate_sum(10, lr=0), "lr"),
    ],
)
def test_theory_helpers_name_the_bad_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def eta(t):
    """Table III's rate of epoch t, epochs counted from 1: the first trains at 0.1."""
    return 0.1 * 0.995 ** (t - 1)


def test_learning_rate_sum_is_the_schedules_sum_and_its_limit():
    # xi_T = eta^1 + ... + eta^T: T terms, the first 0.1 (not the paper's t = 0 .. T-1)
    assert learning_rate_sum(1) == pytest.approx(0.1, rel=1e-12)
    assert learning_rate_sum(2) == pytest.approx(0.1 + 0.0995, rel=1e-12)
    assert learning_rate_sum(3) == pytest.approx(0.1 + 0.0995 + 0.09900250, rel=1e-12)
    for epochs in (1, 2, 3, 20, 50):
        exact = sum(eta(t) for t in range(1, epochs + 1))
        assert learning_rate_sum(epochs) == pytest.approx(exact, rel=1e-12)
    assert learning_rate_sum(20) == pytest.approx(1.91, abs=0.005)  # notebook 02 prints it
    assert learning_rate_sum(0) == 0.0
    assert learning_rate_sum(None) == pytest.approx(20.0)  # 0.1 / (1 - 0.995)
    assert learning_rate_sum(1000) < learning_rate_sum(None)
    assert learning_rate_sum(30, decay=1.0) == pytest.approx(3.0)
    assert learning_rate_sum(None, decay=1.0) == float("inf")


def test_learning_rate_sum_adds_the_rates_the_training_uses():
    # the engine's recorded rate per epoch, the first at 0.1, sums to xi_T epoch by epoch
    from hcct_lite.training.config import make_config
    from hcct_lite.training.engine import run_experiment

    cfg = make_config("rotated-digits", "independent", 0, epochs=3)
    rates = [h["lr"] for h in run_experiment(cfg, progress=False)["history"]]
    assert rates == pytest.approx([eta(1), eta(2), eta(3)], rel=1e-12)
    for epochs in (1, 2, 3):
        assert sum(rates[:epochs]) == pytest.approx(learning_rate_sum(epochs), rel=1e-12)

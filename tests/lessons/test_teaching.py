"""The teaching helpers behind the notebooks' lessons: benefit parts, choices, decisions."""

from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from hcct_lite.lessons.decisions import (  # noqa: E402
    consecutive_agreement,
    decision_claims,
    epoch_groups,
    group_labels,
    truth_agreement,
)
from hcct_lite.lessons.modes import solutions_shown  # noqa: E402
from hcct_lite.partition.merge_steps import (  # noqa: E402
    benefit_parts,
    break_even_alpha,
    pair_benefit_parts,
    pair_benefits,
)
from hcct_lite.partition.synthetic import clustered_updates  # noqa: E402
from hcct_lite.reproduction.figure_checks import figure_claims  # noqa: E402
from hcct_lite.reproduction.motivating_example import (  # noqa: E402
    pattern_ranking,
    selfish_choices,
)
from hcct_lite.reproduction.report_tables import setup_table  # noqa: E402
from hcct_lite.viz.decisions import ALONE, plot_group_timeline  # noqa: E402

NOTEBOOKS = sorted(Path(__file__).parents[2].joinpath("notebooks").glob("*.ipynb"))


def test_a_benefit_is_a_similarity_part_plus_alpha_times_a_data_part():
    u, d, _ = clustered_updates([2, 2], dim=200, noise=0.4, seed=1)
    for alpha in (0.5, 30.0, 900.0):
        sim, data = pair_benefit_parts(u, d, alpha)
        np.testing.assert_allclose(sim + data, pair_benefits(u, d, alpha), rtol=1e-12)
        s01, g01 = benefit_parts(u, d, [0], [1])
        assert sim[0, 1] == pytest.approx(s01) and data[0, 1] == pytest.approx(alpha * g01)
    # the data part depends on the sample counts alone; the similarity part is never positive
    s, g = benefit_parts(u, d, [0], [2])
    assert g == pytest.approx(1 / d[0] + 1 / d[2] - 2 / (d[0] + d[2]))
    assert s <= 0
    assert break_even_alpha(u, d, [0], [2]) == pytest.approx(-s / g)
    # groups: |A|/D_A + |B|/D_B - |A u B|/D_AuB
    _, g = benefit_parts(u, d, [0, 1], [2])
    assert g == pytest.approx(2 / d[:2].sum() + 1 / d[2] - 3 / d[:3].sum())
    with pytest.raises(ValueError, match="disjoint"):
        benefit_parts(u, d, [0], [0, 1])
    with pytest.raises(ValueError, match="alpha"):
        pair_benefit_parts(u, d, -1.0)


def test_a_smaller_client_makes_a_larger_data_part():
    u = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    _, small = benefit_parts(u, [10, 100, 100], [0], [1])
    _, large = benefit_parts(u, [1000, 100, 100], [0], [1])
    assert small > 5 * large


def _runs(errors):
    return {k: [{"seed": 0, "final": {"client_test_error": e}}] for k, e in errors.items()}


def test_selfish_choices_keep_ties_and_the_ranking_sorts_by_mean():
    res = _runs({"independent": [40, 20, 10], "(1,2)": [25, 21, 10], "(1,3)": [95, 20, 12]})
    expected = {1: ["(1,2)"], 2: ["independent", "(1,3)"], 3: ["independent", "(1,2)"]}
    assert selfish_choices(res) == expected
    means = {"a": np.array([3.0, 3.0]), "b": np.array([1.0, 2.0]), "c": np.array([9.0, 0.0])}
    assert pattern_ranking(means) == ["b", "a", "c"]


@pytest.mark.parametrize(
    ("value", "shown"), [(None, False), ("0", False), ("1", True), ("", False)]
)
def test_solutions_are_hidden_unless_asked_for(value, shown):
    env = {} if value is None else {"HCCT_SOLUTIONS": value}
    assert solutions_shown(env) is shown


def test_a_bad_solutions_switch_is_a_clear_error():
    with pytest.raises(ValueError, match="HCCT_SOLUTIONS must be 0 or 1; got 'yes'"):
        solutions_shown({"HCCT_SOLUTIONS": "yes"})


def test_group_labels_and_agreement():
    assert group_labels([[2, 0], [1]], 4).tolist() == [0, 1, 0, 3]
    with pytest.raises(ValueError, match="outside 0..2"):
        group_labels([[0, 5]], 3)
    truth = np.array([0, 0, 1, 1])
    ari = truth_agreement([[[0], [1], [2], [3]], [[0, 1], [2, 3]], [[0, 2], [1, 3]]], truth)
    assert ari[1] == 1.0 and ari[0] < 1 and ari[2] < 0.5
    same = consecutive_agreement([[[0], [1], [2]], [[0], [1], [2]], [[0, 1], [2]]], 3)
    assert same[0] == 1.0 and same[1] < 1
    runs = [
        {"seed": 1, "scheme": "hcct", "history": [{"groups": [[0, 1]]}]},
        {"seed": 0, "scheme": "global", "history": [{"groups": [[0, 1]]}]},
    ]
    assert epoch_groups(runs) == {1: [[[0, 1]]]}


def test_the_timeline_greys_lonely_clients_and_colours_groups():
    from matplotlib.colors import to_rgba

    ax = plot_group_timeline([[[0], [1], [2]], [[0, 2], [1]]])
    image = ax.images[0]
    rgba = image.cmap(image.norm(image.get_array()))
    assert tuple(rgba[1, 0]) == tuple(rgba[1, 1]) == to_rgba(ALONE)  # client 2 always alone
    assert tuple(rgba[0, 1]) == tuple(rgba[2, 1]) != to_rgba(ALONE)  # clients 1, 3 together
    assert tuple(rgba[0, 0]) == to_rgba(ALONE)


def _run(task, scheme, alpha, n=4):
    cfg = dict(
        n_clients=n,
        batch_size=64,
        lr=0.1,
        lr_decay=0.995,
        local_epochs=1,
        epochs=3,
        cluster_models=2,
        soft_groups=2,
        alpha=alpha,
    )
    return {"task": task, "scheme": scheme, "config": cfg, "sizes": [100, 200, 300, 400]}


def test_setup_table_reads_what_the_runs_used():
    runs = {"a": [_run("a", "hcct", 1.0), _run("a", "hcct-e", 10.0)], "b": [_run("b", "global", 1)]}
    header, rows = setup_table(runs)
    table = {r[0]: r[1:] for r in rows}
    assert header == ["setting", "a", "b"]
    assert table["training samples per client (mean)"] == ["250", "250"]
    assert table["alpha (HCCT)"] == ["1", "-"] and table["alpha (HCCT-E)"] == ["10", "-"]


def _fixed_k(k, error, utility):
    return {
        "seed": 0,
        "config": {"n_clients": 8, "fixed_groups": k},
        "final": {"mean": error},
        "history": [{"total_utility": utility}],
    }


def test_fixed_k_claims_tell_utility_from_error():
    runs = [_fixed_k(1, 9, 1), _fixed_k(2, 5, 2), _fixed_k(4, 7, 3), _fixed_k(8, 12, 4)]
    claims = figure_claims(runs, "fixed-k-digit")
    assert claims["Fig. 5: the total utility rises with K, to its highest at K = N"]
    assert claims["Fig. 5: the lowest error is at a small K (at most N/4), not at maximum utility"]
    runs[-1] = _fixed_k(8, 1, 4)  # now the error is lowest where the utility is highest
    claims = figure_claims(runs, "fixed-k-digit")
    assert not claims[
        "Fig. 5: the lowest error is at a small K (at most N/4), not at maximum utility"
    ]


def test_decision_claims_on_the_shipped_runs_are_booleans():
    claims = decision_claims()
    assert len(claims) == 7 and all(isinstance(v, bool) for v in claims.values())


def _texts(fig):
    from matplotlib.text import Text

    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def _scheme_run(scheme, seed, final, best):
    return {
        "task": "fmnist",
        "scheme": scheme,
        "seed": seed,
        "final": {"mean": final, "best_over_epochs": {"mean": best}},
    }


def test_every_figure_is_readable_projected():
    import matplotlib.pyplot as plt

    from hcct_lite.lessons.modes import classroom_style
    from hcct_lite.partition.greedy import client_partition
    from hcct_lite.partition.merge_steps import merge_steps
    from hcct_lite.viz import charts, plots

    classroom_style()
    u, d, _ = clustered_updates([3, 3, 2], dim=200, noise=0.5, seed=0)
    runs = [_scheme_run(s, k, 30.0 + k, 25.0) for s in ("global", "hcct") for k in range(2)]
    figures = [
        plots.plot_merge_steps(merge_steps(u, d, alpha=100.0)).flat[0].figure,
        plots.plot_dendrogram(client_partition(u, d, alpha=100.0)).figure,
        plots.plot_bound(own_size=100, divergence=0.1).figure,
        plots.plot_utility_curves(alpha=40.0, own_size=100).figure,
        plots.plot_scheme_bars(runs, "fmnist", protocol="best").figure,
        charts.plot_pattern_bars({"a": np.ones(3)}).figure,
        charts.plot_curves({"x": [3, 2, 1]}, arrivals=[1]).figure,
        charts.plot_alpha_ratio({(0.1, a): 10.0 for a in (0.1, 1.0, 10.0)}).figure,
        charts.plot_fixed_k([1, 2, 4], [3, 2, 1], [1, 2, 3]).figure,
        charts.plot_fixed_k_by_size({8: ([1, 2], [3, 2], [1, 2])}).figure,
        charts.plot_cosines_side_by_side({"a": np.eye(10)}, labels=list("abcdefghij"))[0].figure,
        plot_group_timeline([[[0, 1], [2]]] * 3).figure,
    ]
    for fig in figures:
        fig.canvas.draw()
        small = [(t.get_text(), t.get_fontsize()) for t in _texts(fig) if t.get_fontsize() < 12]
        assert not small, small
    plt.close("all")


def test_scheme_bars_mark_the_papers_values_and_the_alpha_axis_labels_every_alpha():
    import matplotlib.pyplot as plt

    from hcct_lite.reproduction.paper import TABLE_IV
    from hcct_lite.viz import charts, plots

    runs = [_scheme_run(s, 0, 30.0, 25.0) for s in ("global", "hcct")]
    ax = plots.plot_scheme_bars(runs, "fmnist", protocol="best")
    ticks = ax.collections[-1].get_offsets()[:, 1].tolist()
    assert ticks == [TABLE_IV["global"]["fmnist"][0], TABLE_IV["hcct"]["fmnist"][0]]
    assert [p.get_height() for p in ax.patches] == [25.0, 25.0]  # the best-epoch bars
    with pytest.raises(ValueError, match="protocol"):
        plots.plot_scheme_bars(runs, "fmnist", protocol="last")
    ax = charts.plot_alpha_ratio({(0.1, a): 10.0 for a in (0.1, 1.0, 100.0)})
    ax.figure.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.1", "1", "100"]
    plt.close("all")


def test_explorers_draw_a_static_picture_with_a_note_for_the_book(monkeypatch, capsys):
    import matplotlib.pyplot as plt

    from hcct_lite.viz.widgets import STATIC_ENV, bound_explorer, partition_explorer

    monkeypatch.setenv(STATIC_ENV, "1")
    u, d, _ = clustered_updates([2, 2], dim=100, noise=0.3, seed=0)
    assert partition_explorer(u, d, alpha=100.0) is None
    assert bound_explorer() is None
    out = capsys.readouterr().out
    assert out.count("Static page: this picture is the slider's starting value") == 2
    assert "alpha = 100: 2 group(s)" in out
    monkeypatch.setenv(STATIC_ENV, "0")
    assert partition_explorer(u, d, alpha=100.0) is not None  # the real slider otherwise
    plt.close("all")

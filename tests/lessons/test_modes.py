"""The notebooks' modes, their shipped data, and the figure fixes the notebooks rely on."""

import json
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from hcct_lite.lessons import shipped  # noqa: E402
from hcct_lite.lessons.modes import (  # noqa: E402
    QUICK,
    Mode,
    notebook_mode,
    results_dir,
    task_settings,
)
from hcct_lite.partition.greedy import client_partition  # noqa: E402
from hcct_lite.partition.merge_steps import break_even_alpha, merge_steps  # noqa: E402
from hcct_lite.partition.synthetic import clustered_updates  # noqa: E402
from hcct_lite.reproduction import report_tables  # noqa: E402
from hcct_lite.reproduction.motivating_example import (  # noqa: E402
    PATTERNS,
    alone_in,
    pattern_claims,
)
from hcct_lite.reproduction.paper_grids import grid_jobs  # noqa: E402
from hcct_lite.training.config import make_config  # noqa: E402
from hcct_lite.viz.charts import plot_curves, plot_pattern_bars  # noqa: E402
from hcct_lite.viz.plots import plot_bound, plot_merge_steps  # noqa: E402
from hcct_lite.viz.widgets import draw_bound, draw_partition  # noqa: E402


def test_mode_comes_from_one_variable_with_a_clear_error():
    assert notebook_mode({}).name == "shipped"
    assert notebook_mode({"HCCT_MODE": " Quick "}).name == "quick"
    assert notebook_mode({"HCCT_MODE": "full"}).recompute
    assert not notebook_mode({}).recompute
    with pytest.raises(ValueError, match="HCCT_MODE='fast'.*shipped, quick, full"):
        notebook_mode({"HCCT_MODE": "fast"})
    assert len(Mode("full").seeds) == 5 and len(Mode("quick").seeds) == 3


def test_quick_settings_make_valid_configs_for_every_scheme():
    for task in QUICK:
        settings, _ = task_settings(Mode("quick"), task)
        cfg = make_config(task, "hcct", 0, **settings)
        for key, value in QUICK[task].items():
            assert getattr(cfg, key) == value
    full, _ = task_settings(Mode("full"), "fmnist")
    assert full["device"] == "auto" and "epochs" not in full


def test_results_dir_names_the_variable_when_missing(tmp_path):
    assert (results_dir() / "schemes-fmnist").is_dir()
    with pytest.raises(FileNotFoundError, match="HCCT_RESULTS"):
        results_dir({"HCCT_RESULTS": str(tmp_path / "nowhere")})


def test_shipped_motivating_results_compare_patterns_over_common_seeds():
    res = shipped.motivating_results(Mode("shipped"))
    assert set(res) == set(PATTERNS)
    seeds = {tuple(r["seed"] for r in rs) for rs in res.values()}
    assert len(seeds) == 1 and seeds.pop()  # the same, non-empty seeds everywhere
    claims = pattern_claims(res)
    assert len(claims) == 6 and all(isinstance(v, bool) for v in claims.values())


def _fake(pattern_errors):
    return {
        k: [{"seed": s, "final": {"client_test_error": e}} for s, e in enumerate(v)]
        for k, v in pattern_errors.items()
    }


def test_pattern_claims_follow_the_numbers():
    base = {
        "independent": [[40, 20, 10]],
        "global": [[50, 50, 30]],
        "(1,2)": [[25, 21, 10]],
        "(1,3)": [[95, 20, 10]],
        "(2,3)": [[40, 55, 30]],
    }
    claims = pattern_claims(_fake(base))
    assert all(claims.values()), claims
    worse = dict(base, **{"(1,2)": [[25, 19, 11]]})  # client 2 gains; client 3 drifts
    claims = pattern_claims(_fake(worse))
    assert not claims["client 2 is no better off in (1,2) than alone"]
    assert not claims["a client that trains alone gets the same error in every pattern"]
    assert alone_in("(1,2)") == {2} and alone_in("global") == set()


def test_domain_cosines_split_same_and_other_domains():
    cos = np.array([[1, 0.9, 0.1], [0.9, 1, 0.3], [0.1, 0.3, 1]])
    same, other = report_tables.domain_cosines(cos, ["a", "a", "b"])
    assert same == pytest.approx(0.9) and other == pytest.approx(0.2)
    with pytest.raises(ValueError, match="cosines has shape"):
        report_tables.domain_cosines(cos, ["a", "b"])


def test_quick_jobs_are_small_valid_versions_of_the_paper_grids():
    for grid in (
        "incoming-cifar10",
        "alpha-cifar10",
        "fixed-k-digit",
        "k-vs-n-digit",
        "ablation-digit",
    ):
        jobs = shipped.quick_jobs(grid)
        assert 0 < len(jobs) < len(grid_jobs([grid]))
        for j in jobs:
            assert j.grid == grid
            make_config(j.task, j.scheme, j.seed, **j.overrides)
    with pytest.raises(ValueError, match="no quick version"):
        shipped.quick_jobs("schemes-fmnist")


def test_grid_progress_counts_shipped_files():
    text = shipped.grid_progress("schemes-fmnist")
    assert text == "schemes-fmnist: 45 of 45 runs shipped"
    ran = shipped.grid_runs(Mode("shipped"), "schemes-fmnist", out_dir="unused")
    assert len(ran) == 45 and json.dumps(ran[0]["config"])


def test_break_even_alpha_is_where_the_merge_starts_to_pay():
    u, d, _ = clustered_updates([2, 1], dim=200, noise=0.4, seed=0)
    a = break_even_alpha(u, d, [0], [1])
    assert a > 0
    assert client_partition(u, d, a * 0.99).groups == [[0], [1], [2]]
    assert client_partition(u, d, a * 1.01).groups[0] == [0, 1]
    b = break_even_alpha(u, d, [0, 1], [2])
    assert client_partition(u, d, b * 1.01).n_groups == 1
    assert client_partition(u, d, b * 0.99).n_groups == 2
    with pytest.raises(ValueError, match="disjoint"):
        break_even_alpha(u, d, [0], [0, 1])


def test_figures_fixed_for_the_classroom():
    # the bound starts at the client's own size: no group smaller than the client
    ax = plot_bound(own_size=100, divergence=0.1)
    assert min(ax.lines[0].get_xdata()) == 100
    with pytest.raises(ValueError, match="group_size"):
        draw_bound(0.1, 0.1, own_size=100, group_size=50)
    with pytest.raises(ValueError, match="own_size"):
        draw_bound(0.1, 0.1, own_size=0, group_size=50)
    # nobody merges: the dendrogram still draws the refused merges, and says so
    u, d, _ = clustered_updates([2, 2], dim=100, noise=0.3, seed=0)
    fig, p = draw_partition(u, d, 1e-3)
    assert p.n_groups == 4 and "no merge pays off" in fig.axes[0].get_title()
    assert any(len(c.get_segments()) for c in fig.axes[0].collections)
    _, p = draw_partition(u, d, np.full(4, 100.0))  # a per-client alpha titles too
    # heatmaps: a colour bar and the values written in
    axes = plot_merge_steps(merge_steps(u, d, alpha=100.0))
    fig = axes.flat[0].figure
    assert len(fig.axes) > axes.size  # the colour bar's axes
    assert any(t.get_text() for t in axes.flat[0].texts)
    # legend outside the bars; arrival markers in the curves
    ax = plot_pattern_bars({"a": np.ones(3), "b": np.ones(3)})
    assert ax.get_legend().get_bbox_to_anchor().x0 > ax.get_window_extent().x1 - 1
    ax = plot_curves({"x": [3, 2, 1]}, arrivals=[1])
    assert "new clients arrive" in [t.get_text() for t in ax.get_legend().get_texts()]
    plt.close("all")


def test_every_teaching_name_resolves_from_the_package():
    import hcct_lite

    for name in hcct_lite._LAZY:
        assert getattr(hcct_lite, name) is not None, name
    public = dir(hcct_lite)
    assert set(hcct_lite._LAZY) <= set(public) and set(hcct_lite.__all__) <= set(public)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        hcct_lite.nope  # noqa: B018


def test_a_star_import_loads_no_teaching_module():
    # a fresh interpreter: this one has loaded them already
    code = (
        "import sys\nfrom hcct_lite import *\n"
        "print(sorted(m for m in sys.modules if m.startswith(('hcct_lite.viz', "
        "'hcct_lite.lessons', 'matplotlib'))))\n"
        "print(run_experiment.__name__, 'plot_curves' in globals())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "run_experiment False"], out.stdout


def test_the_runs_cache_is_keyed_on_the_code(monkeypatch):
    from hcct_lite.runs import store

    a = store.settings_dir("runs/x", epochs=2)
    assert a == store.settings_dir("runs/x", epochs=2)
    monkeypatch.setattr(store, "code_fingerprint", lambda: "changed!")
    assert store.settings_dir("runs/x", epochs=2) != a


def test_code_fingerprint_is_a_stable_short_hash():
    from hcct_lite.runs.store import code_fingerprint

    assert code_fingerprint() == code_fingerprint() and len(code_fingerprint()) == 8

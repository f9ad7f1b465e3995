"""Helpers the notebooks call: motivating example, paper tables, charts."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from hcct_lite.reproduction.motivating_example import (  # noqa: E402
    PATTERNS,
    motivating_table,
    pattern_means,
    pattern_stds,
)
from hcct_lite.reproduction.paper import TABLE_II, TABLE_III_ALPHA, TABLE_IV, TABLE_V  # noqa: E402
from hcct_lite.reproduction.report_tables import beside_paper  # noqa: E402
from hcct_lite.runs.store import settings_dir  # noqa: E402
from hcct_lite.training.config import make_config, parse_partition  # noqa: E402
from hcct_lite.training.tasks import available_source  # noqa: E402
from hcct_lite.viz.charts import (  # noqa: E402
    plot_alpha_ratio,
    plot_cosines_side_by_side,
    plot_curves,
    plot_fixed_k,
    plot_fixed_k_by_size,
    plot_pattern_bars,
)


def fake(task, scheme, seed, errors):
    e = np.asarray(errors, dtype=float)
    return {
        "task": task,
        "scheme": scheme,
        "seed": seed,
        "final": {
            "client_test_error": e.tolist(),
            "mean": e.mean(),
            "std": e.std(),
            "min": e.min(),
            "max": e.max(),
            "best_over_epochs": {"mean": e.mean() - 1.0},
        },
    }


def test_paper_tables_are_complete():
    assert set(PATTERNS) == set(TABLE_II)
    assert all(set(v) == {"digit", "fmnist", "cifar10"} for v in TABLE_IV.values())
    assert TABLE_V["hcct"][0] == TABLE_IV["hcct"]["digit"][0]


def test_each_task_runs_at_table_iii_alpha():
    from hcct_lite.training.config import make_config

    for scheme, by_task in TABLE_III_ALPHA.items():
        for task, alpha in by_task.items():
            assert make_config(task, scheme, 0).alpha == alpha, (scheme, task)


def test_table1_and_pattern_means():
    results = {p: [fake("motivating", "x", s, [10 + s, 20, 30]) for s in (0, 1)] for p in PATTERNS}
    means = pattern_means(results)
    np.testing.assert_allclose(means["global"], [10.5, 20, 30])
    header, rows = motivating_table(results)
    assert header[1] == "client 1" and rows[0][1] == "10.50 ± 0.50"
    assert rows[0][-2] == f"{TABLE_II['independent']['mean']:.2f}"


def test_pattern_bars_carry_each_clients_spread_over_seeds():
    results = {
        p: [fake("motivating", "x", s, [10 + 2 * s, 20, 30]) for s in (0, 1)] for p in PATTERNS
    }
    stds = pattern_stds(results)
    np.testing.assert_allclose(stds["global"], [1.0, 0.0, 0.0])
    ax = plot_pattern_bars(pattern_means(results), TABLE_II, stds=stds)
    bars = [c for c in ax.containers if getattr(c, "errorbar", None) is not None]
    assert len(bars) == len(PATTERNS)
    (lines,) = bars[0].errorbar.lines[2]  # the vertical segments: client 1 spans 11 +- 1
    assert lines.get_segments()[0][:, 1].tolist() == [10.0, 12.0]
    plt.close("all")


def test_beside_paper_puts_the_paper_next_to_ours():
    rs = [fake("digit", "hcct", 0, [10, 30]), fake("digit", "hcct", 1, [20, 40])]
    (h3, r3), (h4, r4) = beside_paper(rs, ["hcct", "global"], ["digit"])
    assert h3 == ["scheme", "digit final", "digit best epoch", "digit (paper)"]
    assert r3[0] == ["hcct", "25.00 ± 5.00", "24.00 ± 5.00", "20.06 ± 0.66"]
    assert r3[1][1] == r3[1][2] == "-" and r3[1][3] == "29.55 ± 1.37"
    assert r4 == [
        ["hcct", "25.00", "10.00", "15.00", "35.00", "24.00", "20.06", "13.47", "4.19", "39.44"]
    ]


def test_charts_draw():
    plot_pattern_bars({"a": [1, 2, 3], "b": [3, 2, 1]}, {"a": TABLE_II["independent"]})
    ax = plot_curves({"x": [3, 2, 1]})
    assert len(ax.get_lines()) == 1
    ax = plot_alpha_ratio({(0.1, 1.0): 5, (0.1, 10.0): 4, (0.5, 1.0): 3, (0.5, 10.0): 2})
    assert len(ax.get_lines()) == 2
    ax = plot_fixed_k([1, 2, 5], [5, 4, 6], [1.0, 2.0, 3.0], stds=[0.5, 0.2, 0.1])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "5"]  # every K, no 2.5
    (bars,) = ax.containers[0].lines[2]  # the error bars: one segment per K, +- its std
    np.testing.assert_allclose(
        [seg[:, 1] for seg in bars.get_segments()], [[4.5, 5.5], [3.8, 4.2], [5.9, 6.1]]
    )
    summary = {10: ([1, 2, 10], [5, 4, 9], [0] * 3), 30: ([1, 2], [4, 3], [0] * 2)}
    ax = plot_fixed_k_by_size(summary, partial=[30], seeds={10: [0, 1], 30: [0]})
    styles = {line.get_label(): line.get_linestyle() for line in ax.get_lines()}
    assert styles == {"N = 10, 2 seeds": "-", "N = 30, 1 seed (some K pending)": "--"}
    summary = {10: ([1, 2, 10], [5, 4, 9], [0] * 3), 30: ([1, 2], [4, 3], [0] * 2)}
    ax = plot_fixed_k_by_size(summary, partial=[30])
    styles = {line.get_label(): line.get_linestyle() for line in ax.get_lines()}
    assert styles == {"N = 10": "-", "N = 30 (some K pending)": "--"}
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "10"]
    axes = plot_cosines_side_by_side({"a": np.eye(2), "b": np.ones((2, 2))})
    assert len(axes) == 2
    plt.close("all")


def test_fixed_partition_settings():
    assert parse_partition("0,1|2") == [[0, 1], [2]]
    with pytest.raises(ValueError, match="look like"):
        parse_partition("a|b")
    with pytest.raises(ValueError, match="partition must split"):
        make_config("motivating", "fixed", 0, partition=[[0, 1]])
    assert make_config("motivating", "fixed", 0, partition=[[0, 2], [1]]).partition


def test_available_source_without_data(tmp_path, monkeypatch):
    monkeypatch.setenv("HCCT_DATA_DIR", str(tmp_path))
    monkeypatch.setattr("hcct_lite.training.data.default_data_root", lambda: str(tmp_path))
    monkeypatch.setattr(
        "hcct_lite.training.data._load_torchvision",
        lambda *a: (_ for _ in ()).throw(OSError("offline")),
    )
    assert available_source("rotated-digits") == ({}, "")
    src, note = available_source("cifar10")
    assert src == {"dataset": "digits", "model": "small_digits"} and "not found" in note
    src, note = available_source("digit")
    assert src["domains"] == ["digits"] and "no Digit domain" in note
    with pytest.raises(ValueError, match="unknown task"):
        available_source("imagenet")


def test_settings_dir_depends_on_settings():
    a = settings_dir("runs/x", epochs=2, seeds=[0])
    assert a == settings_dir("runs/x", seeds=[0], epochs=2)
    assert a != settings_dir("runs/x", epochs=3, seeds=[0]) and a.startswith("runs/x-")

"""The dendrogram figure, the synthetic federation and `make demo`'s partition demo."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from hcct_lite import demo  # noqa: E402
from hcct_lite.partition.greedy import client_partition  # noqa: E402
from hcct_lite.partition.synthetic import clustered_updates  # noqa: E402
from hcct_lite.viz.plots import plot_dendrogram, save_figure  # noqa: E402


def test_clustered_updates_shapes_and_seed():
    u, d, truth = clustered_updates([2, 3], dim=40, noise=0.1, seed=5)
    assert u.shape == (5, 40) and d.shape == (5,) and truth.tolist() == [0, 0, 1, 1, 1]
    u2, d2, _ = clustered_updates([2, 3], dim=40, noise=0.1, seed=5)
    np.testing.assert_array_equal(u, u2)
    np.testing.assert_array_equal(d, d2)
    cos = u @ u.T / np.outer(np.linalg.norm(u, axis=1), np.linalg.norm(u, axis=1))
    assert cos[0, 1] > 0.9 and abs(cos[0, 4]) < 0.6
    with pytest.raises(ValueError, match="cluster_sizes"):
        clustered_updates([0], dim=3)
    with pytest.raises(ValueError, match="noise"):
        clustered_updates([1], dim=3, noise=-1)


def test_dendrogram_hides_virtual_links_and_marks_the_stop():
    u, d, truth = clustered_updates([3, 3], dim=200, noise=0.3, seed=0)
    p = client_partition(u, d, alpha=100.0)
    assert p.groups == [[0, 1, 2], [3, 4, 5]]
    ax = plot_dendrogram(p)
    colors = [tuple(c.get_edgecolor()[0]) for c in ax.collections]
    hidden = [c for c in colors if c[3] == 0.0]
    assert len(hidden) == len(p.virtual_rows) == 1
    assert any(line.get_linestyle() == "--" for line in ax.get_lines())
    plt.close("all")
    with pytest.raises(ValueError, match="labels"):
        plot_dendrogram(p, labels=["a"])


def test_save_figure_uses_hcct_fig_dir(tmp_path, monkeypatch):
    fig, _ = plt.subplots()
    monkeypatch.delenv("HCCT_FIG_DIR", raising=False)
    assert save_figure(fig, "x") is None
    monkeypatch.setenv("HCCT_FIG_DIR", str(tmp_path))
    assert save_figure(fig, "x") == str(tmp_path / "x.png")
    assert (tmp_path / "x.png").stat().st_size > 0
    plt.close(fig)


def test_partition_demo_prints_the_groups_and_saves_the_dendrogram(tmp_path, capsys):
    assert demo.main(["--partition", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "alpha =     100:  3 group(s) [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]" in out
    assert (tmp_path / "partition_dendrogram.png").exists()


def test_training_demo_prints_tables_groups_and_saves_the_chart(tmp_path, capsys):
    runs = tmp_path / "runs"
    assert demo.main(["--out", str(tmp_path), "--runs", str(runs), "--seeds", "0"]) == 0
    out = capsys.readouterr().out
    assert "Table IV layout" in out and "Table V layout (rotated-digits)" in out
    assert "seed 0: [[0, 1], [2, 3], [4, 5], [6, 7]]" in out
    assert (tmp_path / "rotated_digits_schemes.png").exists()
    assert len(list(runs.glob("*.json"))) == 9

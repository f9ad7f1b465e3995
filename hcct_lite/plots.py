"""Figures: the partition's merge history as a dendrogram."""

from __future__ import annotations

import os

import numpy as np
from scipy.cluster.hierarchy import dendrogram

from .partition import Partition

__all__ = ["plot_dendrogram", "save_figure"]


def plot_dendrogram(partition: Partition, ax=None, labels=None, hide_virtual: bool = True):
    """Draw the greedy merge history of ``partition`` as a scipy dendrogram.

    Links of real merges are coloured by the final group they belong to; virtual links
    (above the last real merge, see :attr:`Partition.virtual_rows`) are hidden or, with
    ``hide_virtual=False``, drawn dotted grey. A dashed line marks benefit 0, the paper's
    stopping level.

    Parameters
    ----------
    partition : Partition from :func:`hcct_lite.partition.client_partition`
    ax : matplotlib Axes, optional
    labels : sequence of N str, optional leaf labels (default: client indices)
    hide_virtual : bool

    Returns
    -------
    matplotlib Axes
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(max(4.0, 0.35 * partition.n_clients + 2), 3.5))
    n = partition.n_clients
    if labels is None:
        labels = [str(i) for i in range(n)]
    if len(labels) != n:
        raise ValueError(f"labels must have one entry per client ({n}); got {len(labels)}")
    if n == 1:
        ax.text(0.5, 0.5, f"one client: {labels[0]}", ha="center", transform=ax.transAxes)
        return ax
    z = partition.linkage()
    # Cluster n + k is made by real merge k; colour it by the final group it lies in.
    group_of_cluster = {
        n + k: int(partition.labels[m.left[0]]) for k, m in enumerate(partition.merges)
    }

    def color(cluster_id):
        if cluster_id in group_of_cluster:
            return f"C{group_of_cluster[cluster_id] % 10}"
        return "none" if hide_virtual else "0.75"

    dendrogram(z, ax=ax, labels=list(labels), link_color_func=color)
    if not hide_virtual:
        for line in ax.collections:
            line.set_linestyle(":")
    ax.axhline(partition.stop_height(), color="k", ls="--", lw=0.8, label="benefit = 0")
    ax.set_ylabel("max benefit − benefit")
    ax.set_xlabel("client")
    ax.set_title(f"HCCT merges: {partition.n_groups} group(s)")
    ax.legend(loc="upper left", frameon=False)
    ax.set_yticks(np.round(ax.get_yticks(), 3))
    return ax


def save_figure(fig, name: str, directory: str | None = None) -> str | None:
    """Save ``fig`` as ``<directory>/<name>.png``; ``directory`` defaults to ``$HCCT_FIG_DIR``.

    Returns the path written, or ``None`` when no directory is given or set.
    """
    directory = directory if directory is not None else os.environ.get("HCCT_FIG_DIR")
    if not directory:
        return None
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{name}.png")
    fig.savefig(path, dpi=120, bbox_inches="tight")
    return path


def plot_scheme_bars(results, task: str, schemes=None, ax=None):
    """Bar chart of the final mean test error per scheme: mean ± std over seeds.

    Parameters
    ----------
    results : list of result dicts (from :func:`hcct_lite.engine.run_experiment`)
    task : the task to plot
    schemes : order of the bars (default: as they first appear in ``results``)
    """
    import matplotlib.pyplot as plt

    from .results import table3

    t3 = table3([r for r in results if r["task"] == task])
    if schemes is None:
        schemes = list(dict.fromkeys(r["scheme"] for r in results if r["task"] == task))
    schemes = [s for s in schemes if (task, s) in t3]
    if not schemes:
        raise ValueError(f"no results for task {task!r}")
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 * len(schemes) + 2, 3.5))
    means = [t3[(task, s)][0] for s in schemes]
    stds = [t3[(task, s)][1] for s in schemes]
    colors = ["C3" if s.startswith("hcct") else "C0" for s in schemes]
    ax.bar(range(len(schemes)), means, yerr=stds, color=colors, capsize=3)
    ax.set_xticks(range(len(schemes)), schemes, rotation=30, ha="right")
    ax.set_ylabel("mean test error (%)")
    n_seeds = t3[(task, schemes[0])][2]
    ax.set_title(f"{task}: final test error, mean ± std over {n_seeds} seed(s)")
    return ax

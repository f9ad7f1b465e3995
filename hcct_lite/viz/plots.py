"""Figures: the partition's merge history as a dendrogram."""

from __future__ import annotations

import os

import numpy as np
from scipy.cluster.hierarchy import dendrogram

from ..partition.utility import Partition

__all__ = ["axes", "plot_dendrogram", "save_figure"]


def axes(ax=None, size=(6, 3.5)):
    """``ax``, or a new figure's axes of ``size`` inches when ``ax`` is None."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=size)
    return ax


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
    labels : sequence of N str, optional leaf labels (default: client numbers, from 1)
    hide_virtual : bool

    Returns
    -------
    matplotlib Axes
    """
    ax = axes(ax, (max(5.0, 0.6 * partition.n_clients + 2), 4.0))
    n = partition.n_clients
    if labels is None:
        labels = [str(i + 1) for i in range(n)]  # clients counted from 1, as the notebooks do
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

    dendrogram(z, ax=ax, labels=list(labels), link_color_func=color, leaf_rotation=45)
    if not hide_virtual:
        for line in ax.collections:
            line.set_linestyle(":")
    ax.axhline(partition.stop_height(), color="k", ls="--", lw=0.8, label="benefit = 0")
    ax.set_ylabel("max benefit − benefit")
    ax.set_xlabel("client")
    ax.set_title(f"HCCT merges: {partition.n_groups} group(s)")
    ax.legend(loc="upper left", frameon=False)
    ax.set_yticks(np.round(ax.get_yticks(), 3))
    for tick in ax.get_xticklabels():
        tick.set_horizontalalignment("right")
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


def plot_scheme_bars(results, task: str, schemes=None, ax=None, protocol: str = "final"):
    """Bar chart of the mean test error per scheme (mean ± std over seeds), the paper's beside.

    Parameters
    ----------
    results : list of result dicts (from :func:`hcct_lite.training.engine.run_experiment`)
    task : the task to plot; where the paper's Table IV has it, its values are black ticks
    schemes : order of the bars (default: as they first appear in ``results``)
    protocol : ``"final"`` (final epoch) or ``"best"`` (each client's best epoch, the
        authors' code's protocol, the one to compare with the paper's ticks)
    """
    from ..reproduction.paper import TABLE_IV
    from ..runs.reading import by_scheme

    if protocol not in ("final", "best"):
        raise ValueError(f"protocol must be 'final' or 'best'; got {protocol!r}")
    stats = by_scheme([r for r in results if r["task"] == task])
    if schemes is None:
        schemes = list(dict.fromkeys(r["scheme"] for r in results if r["task"] == task))
    schemes = [s for s in schemes if s in stats]
    if not schemes:
        raise ValueError(f"no results for task {task!r}")
    ax = axes(ax, (1.0 * len(schemes) + 2, 3.5))
    pick = 0 if protocol == "final" else 1
    means = [stats[s][pick][0] for s in schemes]
    stds = [stats[s][pick][1] for s in schemes]
    colors = ["C3" if s.startswith("hcct") else "C0" for s in schemes]
    ax.bar(range(len(schemes)), means, yerr=stds, color=colors, capsize=3)
    known = TABLE_IV
    paper = [(k, known[s][task][0]) for k, s in enumerate(schemes) if task in known.get(s, {})]
    if paper:
        x, y = zip(*paper, strict=True)
        ax.scatter(x, y, marker="_", s=300, lw=3, color="k", zorder=3, label="the paper")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_xticks(range(len(schemes)), schemes, rotation=30, ha="right")
    ax.set_ylabel("mean test error (%)")
    n_seeds = stats[schemes[0]][pick][2]
    which = "final epoch" if protocol == "final" else "best epoch"
    ax.set_title(f"{task}: {which}, mean ± std over {n_seeds} seeds")
    return ax


def plot_merge_steps(steps, axes=None, labels=None):
    """One benefit heatmap per step of :func:`hcct_lite.partition.merge_steps.merge_steps`.

    Every cell is labelled with its benefit; the diagonal (a group with itself: no merge)
    is grey; the chosen pair is boxed; the last panel is where the algorithm stops (every
    benefit <= 0); one colour bar serves every panel. Returns the array of Axes.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    if axes is None:
        cols = min(4, len(steps))
        rows = -(-len(steps) // cols)
        _, axes = plt.subplots(rows, cols, figsize=(4.8 * cols, 4.6 * rows), squeeze=False)
    flat = np.asarray(axes).ravel()
    cmap = plt.get_cmap("RdBu").with_extremes(bad="0.85")  # the diagonal (NaN): no merge
    finite = np.concatenate([s.benefits[np.isfinite(s.benefits)] for s in steps] + [[0.0]])
    lim = float(np.abs(finite).max()) or 1.0
    for k, (ax, step) in enumerate(zip(flat, steps, strict=False)):
        names = [",".join(str(i + 1) for i in g) for g in step.groups]  # counted from 1
        names = names if labels is None else labels[k]
        image = ax.imshow(step.benefits, cmap=cmap, vmin=-lim, vmax=lim)
        ax.set_xticks(range(len(names)), names, rotation=90, fontsize=12)
        ax.set_yticks(range(len(names)), names, fontsize=12)
        if len(names) <= 8:
            for (r, c), v in np.ndenumerate(step.benefits):
                if np.isfinite(v):
                    ax.text(c, r, f"{v:.1f}", ha="center", va="center", fontsize=12)
        if step.chosen is None:
            ax.set_title(f"step {k + 1}: stop", fontsize=12)
        else:
            a, b = step.chosen
            for r, c in ((a, b), (b, a)):
                ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, ec="k", lw=2))
            ax.set_title(f"step {k + 1}: merge, benefit {step.benefit:+.3f}", fontsize=12)
    for ax in flat[len(steps) :]:
        ax.axis("off")
    cbar = plt.colorbar(image, ax=list(flat), shrink=0.8)
    cbar.set_label("benefit of merging (blue: merge pays)")
    return axes


def plot_bound(own_size, divergence, lipschitz=1.0, mu=1.0, delta=0.1, max_size=None, ax=None):
    """Theorem 1's bound against the group's sample count D_G.

    Draws the sample-size term ``4 L^2 / (delta mu D_G)``, the divergence term, their sum
    for a group with that divergence, and the client alone (D_G = own size, divergence 0);
    the shaded range of D_G is where joining lowers the bound. A client's group holds at
    least its own samples, so the axis starts at ``own_size``. Returns the Axes.
    """
    from ..theory import error_bound, sample_term

    ax = axes(ax, (6, 3.5))
    if own_size <= 0:
        raise ValueError(f"own_size must be > 0; got {own_size}")
    top = max_size or 20 * own_size
    d = np.linspace(own_size, top, 400)
    ax.plot(d, sample_term(d, lipschitz, mu, delta), label="sample-size term 4L²/(δμD)")
    ax.axhline(divergence, color="C1", ls=":", label="divergence term d₁")
    ax.plot(
        d, error_bound(d, divergence, lipschitz, mu, delta), color="C2", label="bound in the group"
    )
    alone = float(error_bound(own_size, 0.0, lipschitz, mu, delta))
    ax.axhline(alone, color="k", ls="--", lw=0.8, label=f"alone (D = {own_size:g})")
    ax.fill_between(
        d,
        0,
        1,
        where=error_bound(d, divergence, lipschitz, mu, delta) < alone,
        color="C2",
        alpha=0.1,
        transform=ax.get_xaxis_transform(),
        label="joining helps",
    )
    ax.set_xlabel("group sample count D_G")
    ax.set_ylabel("bound on test error")
    ax.set_ylim(0, 3 * alone + divergence)
    ax.legend()
    return ax


def plot_label_similarity(distance, cosine, r, ax=None):
    """Scatter of update cosine against label-distribution distance, with the fit line."""
    ax = axes(ax, (4.5, 3.5))
    ax.scatter(distance, cosine, s=14)
    slope, intercept = np.polyfit(distance, cosine, 1)
    x = np.linspace(min(distance), max(distance), 2)
    ax.plot(x, slope * x + intercept, color="C3", label=f"Pearson r = {r:.2f}")
    ax.set_xlabel("total-variation distance of label distributions")
    ax.set_ylabel("cosine of the two updates")
    ax.legend()
    return ax


def plot_utility_curves(alpha, own_size, cosines=(1.0, 0.9, 0.7, 0.5), max_size=None, ax=None):
    """Plot HCCT's utility ``-alpha / D_G + cos`` against D_G, one line per cosine.

    The dashed line is the client alone (``1 - alpha / D_i``).
    """
    from ..theory import utility

    ax = axes(ax, (6, 3.5))
    d = np.linspace(own_size, max_size or 20 * own_size, 300)
    for c in cosines:
        ax.plot(d, utility(alpha, d, c), label=f"cos = {c:g}")
    ax.axhline(
        float(utility(alpha, own_size, 1.0)),
        color="k",
        ls="--",
        lw=0.8,
        label=f"alone (D = {own_size:g})",
    )
    ax.set_xlabel("group sample count D_G")
    ax.set_ylabel("utility")
    ax.set_title(f"alpha = {alpha:g}", fontsize=12)
    ax.legend()
    return ax

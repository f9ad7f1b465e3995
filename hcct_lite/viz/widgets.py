"""Sliders for the notebooks.

Each callback is a plain function (tested directly); the ``*_explorer`` functions only wire it to
ipywidgets.
"""

from __future__ import annotations

from ..partition.greedy import client_partition
from ..theory import join_gain

__all__ = ["draw_partition", "partition_explorer", "draw_bound", "bound_explorer"]


def _display(fig):
    """Show ``fig`` in the widget's output area once, then free it."""
    import matplotlib.pyplot as plt
    from IPython.display import display

    display(fig)
    plt.close(fig)


def draw_partition(updates, sizes, alpha, labels=None):
    """Partition at ``alpha`` and draw its dendrogram. Returns ``(figure, partition)``."""
    import matplotlib.pyplot as plt

    from .plots import plot_dendrogram

    p = client_partition(updates, sizes, alpha=alpha)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    plot_dendrogram(p, ax=ax, labels=labels)
    ax.set_title(f"alpha = {alpha:g}: {p.n_groups} group(s) {p.groups}", fontsize=9)
    return fig, p


def partition_explorer(updates, sizes, labels=None, alpha_range=(-1.0, 4.0), alpha=100.0):
    """An ``ipywidgets.interactive`` with a log-scale alpha slider redrawing the partition."""
    import ipywidgets as w

    def show(alpha):
        fig, p = draw_partition(updates, sizes, alpha, labels)
        _display(fig)
        return p

    slider = w.FloatLogSlider(
        value=alpha,
        base=10,
        min=alpha_range[0],
        max=alpha_range[1],
        step=0.05,
        description="alpha",
        continuous_update=False,
    )
    return w.interactive(show, alpha=slider)


def draw_bound(delta, divergence, own_size, group_size, lipschitz=1.0, mu=1.0):
    """Draw Theorem 1's bound and mark the chosen group.

    Returns ``(figure, join gain)``; a positive gain means joining a group of ``group_size`` samples
    with that divergence lowers the client's bound.
    """
    import matplotlib.pyplot as plt

    from ..theory import error_bound
    from .plots import plot_bound

    fig, ax = plt.subplots(figsize=(6.5, 3.5))
    plot_bound(
        own_size,
        divergence,
        lipschitz,
        mu,
        delta,
        max_size=max(20 * own_size, 2 * group_size),
        ax=ax,
    )
    ax.plot(
        [group_size],
        [error_bound(group_size, divergence, lipschitz, mu, delta)],
        "o",
        color="C3",
        label="this group",
    )
    gain = float(join_gain(own_size, group_size, divergence, lipschitz, mu, delta))
    ax.set_title(
        f"joining {'helps' if gain > 0 else 'hurts'}: the bound changes by {-gain:+.3f}", fontsize=9
    )
    return fig, gain


def bound_explorer(own_size=100, group_size=400):
    """Sliders for delta, the divergence and the two sample counts of :func:`draw_bound`."""
    import ipywidgets as w

    def show(delta, divergence, own_size, group_size):
        fig, gain = draw_bound(delta, divergence, own_size, group_size)
        _display(fig)
        return gain

    return w.interactive(
        show,
        delta=w.FloatSlider(value=0.1, min=0.01, max=0.99, step=0.01, description="δ"),
        divergence=w.FloatSlider(value=0.1, min=0.0, max=1.0, step=0.01, description="divergence"),
        own_size=w.IntSlider(value=own_size, min=10, max=2000, step=10, description="D_i"),
        group_size=w.IntSlider(value=group_size, min=10, max=5000, step=10, description="D_G"),
    )

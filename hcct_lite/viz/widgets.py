"""Sliders for the notebooks.

Each callback is a plain function (tested directly); the ``*_explorer`` functions only wire it to
ipywidgets.
"""

from __future__ import annotations

import os

from ..lessons.decisions import numbered
from ..partition.greedy import client_partition
from ..theory import join_gain

__all__ = [
    "draw_partition",
    "partition_explorer",
    "draw_bound",
    "bound_explorer",
    "STATIC_ENV",
    "static_widgets",
]

# Set by `make book`: a static page has no kernel to move a slider, and an embedded widget
# renders blank offline, so each explorer shows its starting picture and says so.
STATIC_ENV = "HCCT_STATIC_WIDGETS"
STATIC_NOTE = (
    "(Static page: this picture is the slider's starting value. Open the notebook in "
    "Jupyter to move the sliders.)"
)


def static_widgets() -> bool:
    """Whether widgets should draw a static picture (``HCCT_STATIC_WIDGETS=1``, the book)."""
    return os.environ.get(STATIC_ENV, "0").strip() == "1"


def _display(fig):
    """Show ``fig`` in the widget's output area once, then free it."""
    import matplotlib.pyplot as plt
    from IPython.display import display

    display(fig)
    plt.close(fig)


def _alpha_text(alpha) -> str:
    """``alpha`` for a title: a number, or a word such as ``"size"``, or "per client"."""
    if isinstance(alpha, str):
        return alpha
    try:
        return f"{float(alpha):g}"
    except TypeError:
        return "per client"


def draw_partition(updates, sizes, alpha, labels=None):
    """Partition at ``alpha`` and draw its dendrogram. Returns ``(figure, partition)``.

    When no merge pays off (every client alone), the merges the algorithm refused are
    drawn dotted, so the plot is never empty.
    """
    import matplotlib.pyplot as plt

    from .plots import plot_dendrogram

    p = client_partition(updates, sizes, alpha=alpha)
    fig, ax = plt.subplots(figsize=(7, 4))
    alone = p.n_groups == p.n_clients
    plot_dendrogram(p, ax=ax, labels=labels, hide_virtual=not alone)
    if alone:
        title = f"alpha = {_alpha_text(alpha)}: no merge pays off, all alone (dotted: refused)"
    else:
        title = f"alpha = {_alpha_text(alpha)}: {p.n_groups} group(s) {numbered(p.groups)}"
    ax.set_title(title, fontsize=12)
    return fig, p


def partition_explorer(updates, sizes, labels=None, alpha_range=(-1.0, 4.0), alpha=100.0):
    """An ``ipywidgets.interactive`` with a log-scale alpha slider redrawing the partition.

    With ``HCCT_STATIC_WIDGETS=1`` (the static book) it shows the picture at ``alpha`` and
    a note instead, and returns None.
    """
    if static_widgets():
        fig, p = draw_partition(updates, sizes, alpha, labels)
        _display(fig)
        print(f"alpha = {alpha:g}: {p.n_groups} group(s) {numbered(p.groups)}\n{STATIC_NOTE}")
        return None
    import ipywidgets as w

    def show(alpha):
        fig, p = draw_partition(updates, sizes, alpha, labels)
        _display(fig)
        print(
            f"alpha = {alpha:g}: {p.n_groups} group(s) {numbered(p.groups)}"
        )  # readable as text too
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
    with that divergence lowers the client's bound. The group includes the client, so
    ``group_size >= own_size > 0``.
    """
    import matplotlib.pyplot as plt

    if not own_size > 0:
        raise ValueError(f"own_size must be > 0; got {own_size}")
    if not group_size >= own_size:
        raise ValueError(
            f"group_size ({group_size}) must be >= own_size ({own_size}): the group includes "
            "the client's own samples"
        )
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
    verdict = "helps" if gain > 0 else "hurts"
    ax.set_title(f"joining {verdict}: the bound changes by {-gain:+.3f}", fontsize=12)
    return fig, gain


def bound_explorer(own_size=100, group_size=400):
    """Sliders for delta, the divergence and the sample counts of :func:`draw_bound`.

    The second count is what the *other* members bring (D_G - D_i >= 0), so no setting
    describes a group smaller than the client. With ``HCCT_STATIC_WIDGETS=1`` (the static
    book) it shows the starting picture (delta 0.1, divergence 0.1) and a note, and returns
    None.
    """
    if static_widgets():
        fig, _ = draw_bound(0.1, 0.1, own_size, max(group_size, own_size))
        _display(fig)
        print(STATIC_NOTE)
        return None
    import ipywidgets as w

    def show(delta, divergence, own_size, others):
        fig, gain = draw_bound(delta, divergence, own_size, own_size + others)
        _display(fig)
        return gain

    return w.interactive(
        show,
        delta=w.FloatSlider(value=0.1, min=0.01, max=0.99, step=0.01, description="δ"),
        divergence=w.FloatSlider(value=0.1, min=0.0, max=1.0, step=0.01, description="divergence"),
        own_size=w.IntSlider(value=own_size, min=10, max=2000, step=10, description="D_i"),
        others=w.IntSlider(
            value=max(0, group_size - own_size), min=0, max=5000, step=10, description="D_G − D_i"
        ),
    )

"""Figures of HCCT's decisions: which clients shared a model, epoch by epoch."""

from __future__ import annotations

import numpy as np

from ..runs.reading import group_labels
from .plots import axes

__all__ = ["plot_group_timeline", "plot_group_timelines"]

ALONE = "0.93"  # a client training alone: light grey, so groups stand out


def plot_group_timeline(epochs, ax=None, title=None, client_names=None):
    """Clients (rows) against epochs (columns), coloured by the group each client was in.

    A client alone is light grey; clients that share a colour in one column trained one
    model in that epoch (the colour is the group's smallest member, so a group that persists
    keeps its colour).

    Parameters
    ----------
    epochs : list of T partitions (each a list of groups of 0-based client indices)
    ax : matplotlib Axes, optional
    title : str, optional
    client_names : sequence of N str, optional row labels (default ``1..N``)
    """
    from matplotlib.colors import ListedColormap, to_rgba

    n = 1 + max(i for groups in epochs for g in groups for i in g)
    grid = np.full((n, len(epochs)), -1)
    for t, groups in enumerate(epochs):
        labels = group_labels(groups, n)
        shared = np.bincount(labels, minlength=n)[labels] > 1
        grid[shared, t] = labels[shared]
    colours = [to_rgba(ALONE)] + [to_rgba(f"C{k % 10}") for k in range(n)]
    ax = axes(ax, (6, 0.3 * n + 1.5))
    ax.imshow(
        grid + 1,
        cmap=ListedColormap(colours),
        vmin=0,
        vmax=n,
        aspect="auto",
        interpolation="nearest",
    )
    names = client_names or [str(i + 1) for i in range(n)]
    step = max(1, n // 10)  # at most ~10 row labels keep 12-pt text readable
    ax.set_yticks(range(0, n, step), names[::step])
    ticks = range(0, len(epochs), max(1, len(epochs) // 5))
    ax.set_xticks(list(ticks), [str(t + 1) for t in ticks])
    ax.set_xlabel("epoch")
    ax.set_ylabel("client")
    if title:
        ax.set_title(title)
    return ax


def plot_group_timelines(runs: dict, titles: dict, truth: dict | None = None):
    """One :func:`plot_group_timeline` panel per run, side by side; returns the axes.

    Parameters
    ----------
    runs : name -> result dict (its ``history`` holds each epoch's groups)
    titles : name -> panel title
    truth : name -> (N,) true cluster per client, optional; the panel's title then adds the
        adjusted Rand index of the last epoch's groups against it
    """
    import matplotlib.pyplot as plt

    from ..lessons.decisions import truth_agreement

    fig, axs = plt.subplots(1, len(runs), figsize=(4.2 * len(runs), 4.6), layout="constrained")
    for ax, (name, r) in zip(np.atleast_1d(axs), runs.items(), strict=True):
        epochs = [h["groups"] for h in r["history"]]
        title = titles[name]
        if truth and name in truth:
            ari = truth_agreement(epochs, truth[name])
            title += f"\ntrue groups in {int((ari == 1).sum())} of {ari.size} epochs"
        plot_group_timeline(epochs, ax=ax, title=title)
    fig.text(
        0.5,
        -0.02,
        "grey: alone; one colour in a column: one shared model",
        ha="center",
        fontsize=12,
    )
    return axs

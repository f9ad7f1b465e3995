"""Figures of the experiments: Table II's patterns, learning curves, alpha, fixed K, cosines."""

from __future__ import annotations

import numpy as np

from .plots import axes

__all__ = [
    "plot_pattern_bars",
    "plot_curves",
    "plot_alpha_ratio",
    "plot_fixed_k",
    "plot_fixed_k_by_size",
    "plot_cosines_side_by_side",
]


def plot_pattern_bars(ours: dict, paper: dict | None = None, ax=None, stds: dict | None = None):
    """Grouped bars: per-client test error of each collaboration pattern.

    Parameters
    ----------
    ours : pattern -> (N,) per-client mean test error
    paper : pattern -> {"clients": [(mean, std), ...]}, drawn as black ticks (optional)
    stds : pattern -> (N,) per-client std over seeds, drawn as error bars (optional)
    """
    ax = axes(ax, (7, 3.5))
    patterns = list(ours)
    n = len(next(iter(ours.values())))
    width = 0.8 / len(patterns)
    for k, pat in enumerate(patterns):
        x = np.arange(n) + (k - (len(patterns) - 1) / 2) * width
        err = None if stds is None else stds[pat]
        ax.bar(x, ours[pat], width, label=pat, color=f"C{k}", yerr=err, capsize=2)
        if paper and pat in paper:
            ref = [m for m, _ in paper[pat]["clients"]]
            ax.scatter(
                x, ref, marker="_", s=200, color="k", zorder=3, label="paper" if k == 0 else None
            )
    ax.set_xticks(range(n), [f"client {i + 1}" for i in range(n)])
    ax.set_ylabel("test error (%)")
    # outside the axes: inside, the legend hid the tallest bars
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return ax


def plot_curves(curves: dict, ax=None, ylabel="mean test error (%)", arrivals=()):
    """Lines ``label -> (epochs,) values``; e.g. mean test error per epoch (Fig. 3).

    ``arrivals``: epochs at which new clients join, drawn as dotted vertical lines.
    """
    ax = axes(ax)
    for label, ys in curves.items():
        ax.plot(np.arange(len(ys)), ys, label=label)
    for k, epoch in enumerate(arrivals):
        ax.axvline(epoch, color="0.5", ls=":", lw=1, label="new clients arrive" if k == 0 else None)
    ax.set_xlabel("epoch")
    ax.set_ylabel(ylabel)
    ax.legend()
    return ax


def plot_alpha_ratio(errors: dict, ax=None):
    """Fig. 4: mean test error against alpha, one line per train ratio.

    ``errors``: ``(train_ratio, alpha) -> mean test error``.
    """
    ax = axes(ax)
    for ratio in sorted({r for r, _ in errors}):
        alphas = sorted(a for r, a in errors if r == ratio)
        ax.plot(
            alphas, [errors[(ratio, a)] for a in alphas], marker="o", label=f"train ratio {ratio:g}"
        )
    values = sorted({a for _, a in errors})
    if values[0] > 0:
        ax.set_xscale("log")
    else:  # alpha = 0 has no log: linear up to the smallest positive alpha
        ax.set_xscale("symlog", linthresh=min(a for a in values if a > 0))
    ax.set_xticks(values, [f"{a:g}" for a in values])  # every alpha labelled, 0.1 included
    ax.minorticks_off()
    ax.set_xlabel("alpha")
    ax.set_ylabel("final mean test error (%)")
    ax.legend()
    return ax


def plot_fixed_k(ks, errors, utilities=None, ax=None, stds=None):
    """Fig. 5: mean test error (and total utility, right axis) against the fixed K.

    ``ks``, ``errors``, ``utilities``: (n_K,) as from
    :func:`hcct_lite.reproduction.figure_checks.fixed_k_summary`; ``stds`` (n_K,), the
    error's std over seeds (:func:`~hcct_lite.reproduction.figure_checks.fixed_k_std`),
    drawn as error bars. Every K run is a tick.
    """
    ax = axes(ax)
    ax.errorbar(ks, errors, yerr=stds, marker="o", color="C0", capsize=3, label="mean test error")
    ax.set_xticks(list(ks), [str(k) for k in ks])
    ax.set_xlabel("number of groups K")
    ax.set_ylabel("mean test error (%)", color="C0")
    if utilities is not None:
        right = ax.twinx()
        right.plot(ks, utilities, marker="s", color="C3", label="total utility")
        right.set_ylabel("total utility", color="C3")
    return ax


def plot_fixed_k_by_size(summary: dict, ax=None, partial=(), seeds=None):
    """Fig. 6: mean test error against the fixed K, one line per federation size N.

    ``summary``: ``N -> (ks, errors, utilities)``, as from
    :func:`hcct_lite.reproduction.figure_checks.fixed_k_summary`. ``partial``: the N whose
    K are not all run yet, drawn dashed and labelled so. ``seeds``: ``N -> seeds`` averaged
    (:func:`~hcct_lite.reproduction.figure_checks.seeds_by_size`), named in the legend. K is
    on a log axis, every K labelled, so that K = 1, 2, 5 stay apart beside K = 50.
    """
    ax = axes(ax)
    for n, (ks, errors, _) in sorted(summary.items()):
        part = n in partial
        label = f"N = {n}"
        if seeds is not None:
            label += f", {len(seeds[n])} seed" + "s" * (len(seeds[n]) > 1)
        label += " (some K pending)" if part else ""
        ax.plot(ks, errors, marker="o", linestyle="--" if part else "-", label=label)
    values = sorted({k for ks, _, _ in summary.values() for k in ks})
    ax.set_xscale("log")
    ax.set_xticks(values, [str(k) for k in values])
    ax.minorticks_off()
    ax.set_xlabel("number of groups K")
    ax.set_ylabel("final mean test error (%)")
    ax.legend()
    return ax


def plot_cosines_side_by_side(matrices: dict, labels=None, axes=None):
    """Heatmaps of update cosine matrices, e.g. with and without batch-norm buffers."""
    import matplotlib.pyplot as plt

    if axes is None:
        # constrained layout keeps each panel's client labels clear of its neighbour
        _, axes = plt.subplots(
            1, len(matrices), figsize=(6.5 * len(matrices), 6.0), layout="constrained"
        )
    axes = np.atleast_1d(axes)
    for ax, (title, m) in zip(axes, matrices.items(), strict=True):
        im = ax.imshow(np.asarray(m), vmin=-1, vmax=1, cmap="RdBu")
        n = len(m)
        names = labels if labels is not None else [str(i + 1) for i in range(n)]
        ax.set_xticks(range(n), names, rotation=90, fontsize=12)
        ax.set_yticks(range(n), names, fontsize=12)
        ax.set_title(title, fontsize=12)
    plt.colorbar(im, ax=list(axes), shrink=0.8)
    return axes

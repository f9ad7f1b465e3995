"""Figures of notebook 05: where HCCT's utility misleads."""

from __future__ import annotations

import numpy as np

from .plots import axes

__all__ = ["plot_scheme_study", "plot_break_even", "plot_alpha_sweep"]


def plot_scheme_study(summary: dict):
    """Two panels: final error and agreement with the rotations, per scheme and local epochs.

    ``summary``: ``(scheme, local_epochs) -> dict(error, agreement)``, as from
    :func:`hcct_lite.lessons.misleads.scheme_summary`. Returns the two Axes.
    """
    import matplotlib.pyplot as plt

    schemes = list(dict.fromkeys(s for s, _ in summary))
    locals_ = sorted({k for _, k in summary})
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
    width = 0.8 / len(locals_)
    for j, local in enumerate(locals_):
        x = np.arange(len(schemes)) + (j - (len(locals_) - 1) / 2) * width
        label = f"{local} local epoch{'s' if local > 1 else ''}"
        for ax, key in ((left, "error"), (right, "agreement")):
            ax.bar(x, [summary[s, local][key] for s in schemes], width, label=label, color=f"C{j}")
    for ax, ylabel in ((left, "final mean test error (%)"), (right, "agreement with rotations")):
        ax.set_xticks(range(len(schemes)), schemes)
        ax.set_ylabel(ylabel)
    right.set_ylim(0, 1)
    left.legend()
    return left, right


def plot_break_even(sizes, cosines, grid, ax=None, alpha=None):
    """Heatmap of break-even alphas (log colour scale), each cell written in.

    ``grid``: (len(sizes), len(cosines)) from
    :func:`hcct_lite.lessons.misleads.break_even_grid`. With ``alpha``, cells whose
    merge pays at that alpha are outlined.
    """
    from matplotlib.colors import LogNorm
    from matplotlib.patches import Rectangle

    ax = axes(ax, (1.4 * len(cosines) + 2, 0.8 * len(sizes) + 1.5))
    g = np.asarray(grid, dtype=float)
    image = ax.imshow(g, cmap="viridis", norm=LogNorm(vmin=max(g.min(), 1e-2), vmax=g.max()))
    for (r, c), v in np.ndenumerate(g):
        ax.text(
            c,
            r,
            f"{v:.3g}",
            ha="center",
            va="center",
            fontsize=12,
            color="w" if v < np.sqrt(g.min() * g.max()) else "k",
        )
        if alpha is not None and v < alpha:
            ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, ec="r", lw=3))
    ax.set_xticks(range(len(cosines)), [f"{c:g}" for c in cosines])
    ax.set_yticks(range(len(sizes)), [str(d) for d in sizes])
    ax.set_xlabel("cosine of the two updates")
    ax.set_ylabel("samples per client D")
    ax.figure.colorbar(image, ax=ax, label="break-even alpha")
    return ax


def plot_alpha_sweep(summary: dict, ax=None):
    """Final error (left axis) and agreement with the rotations (right) against alpha.

    ``summary`` from :func:`hcct_lite.lessons.misleads.alpha_summary`; errors are means
    over its seeds.
    """
    ax = axes(ax, (7, 3.8))
    alphas = sorted(summary)
    errors = [np.mean(list(summary[a]["errors"].values())) for a in alphas]
    ax.plot(alphas, errors, marker="o", color="C0")
    ax.set_xscale("log")
    ax.set_xticks(alphas, [f"{a:g}" for a in alphas])
    ax.minorticks_off()
    ax.set_xlabel("alpha")
    ax.set_ylabel("final mean test error (%)", color="C0")
    right = ax.twinx()
    right.plot(alphas, [summary[a]["agreement"] for a in alphas], marker="s", color="C3")
    right.set_ylim(-0.05, 1.05)
    right.set_ylabel("agreement with rotations", color="C3")
    return ax

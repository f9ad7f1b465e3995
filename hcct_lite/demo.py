"""``make demo``: every scheme on ``rotated-digits``, the embedded task needing no download.

Eight clients hold scikit-learn's 8x8 digits rotated by 0, 90, 180 or 270 degrees, two per
rotation, so the right groups are known. :func:`training_demo` runs every scheme and prints
Tables IV and V; ``--partition`` runs :func:`partition_demo` on synthetic updates alone.
"""

from __future__ import annotations

import argparse
import os

from .partition.exact import optimal_partition
from .partition.greedy import client_partition
from .partition.synthetic import clustered_updates
from .training.config import SCHEMES

TASK = "rotated-digits"


def partition_demo(out: str, seed: int = 0) -> None:
    """Print and draw the greedy partition of synthetic clustered updates, and its dendrogram."""
    updates, sizes, truth = clustered_updates([4, 4, 2], dim=5_000, noise=0.6, seed=seed)
    print("A federation of 10 clients in 3 hidden clusters")
    print(f"  true cluster of each client: {truth.tolist()}")
    print(f"  sample counts D_i:           {sizes.tolist()}\n")
    print("Groups found by HCCT's greedy merge (Algorithm 2):")
    for alpha in (0.0, 10.0, 100.0, 1000.0, 10000.0):
        p = client_partition(updates, sizes, alpha=alpha)
        print(f"  alpha = {alpha:>7g}: {p.n_groups:>2} group(s) {p.groups}")
    alpha = 100.0
    p = client_partition(updates, sizes, alpha=alpha)
    print(f"\nMerge history at alpha = {alpha:g}:")
    for k, m in enumerate(p.merges, 1):
        print(
            f"  step {k}: {list(m.left)} + {list(m.right)}  benefit {m.benefit:+.4f}"
            f"  total utility {m.total_utility:.4f}"
        )
    best = optimal_partition(updates, sizes, alpha=alpha)
    print(
        f"\nTotal utility: greedy {p.total_utility:.4f}, exhaustive optimum "
        f"{best.total_utility:.4f} {best.groups}"
    )

    import matplotlib.pyplot as plt

    from .viz.plots import plot_dendrogram

    fig, ax = plt.subplots(figsize=(6, 3.5))
    plot_dendrogram(p, ax=ax, labels=[f"{i}\n(c{truth[i]})" for i in range(len(truth))])
    path = _save(fig, out, "partition_dendrogram")
    print(f"\nDendrogram saved to {path}")


def _save(fig, out, name):
    import matplotlib.pyplot as plt

    from .viz.plots import save_figure

    path = save_figure(fig, name, out)
    plt.close(fig)
    return path


def training_demo(out: str, runs: str, seeds) -> None:
    """Run every scheme on rotated-digits; print Table IV/V layouts and save a chart.

    A rerun resumes from the result files already in ``runs``.
    """
    from .runs.results import save_tables
    from .runs.runner import run_grid

    print(
        f"Task {TASK}: 8 clients, rotations 0/90/180/270 degrees (clients 2k and 2k+1 "
        f"share a rotation)\nSchemes: {', '.join(SCHEMES)}; seeds {list(seeds)}\n"
    )
    results = run_grid(TASK, list(SCHEMES), seeds, runs, progress=True)
    print()
    print(save_tables(results, list(SCHEMES), [TASK], runs))
    print("\nGroups HCCT found in the last epoch:")
    for r in results:
        if r["scheme"] == "hcct":
            print(f"  seed {r['seed']}: {r['history'][-1]['groups']}")

    import matplotlib.pyplot as plt

    from .viz.plots import plot_scheme_bars

    fig, ax = plt.subplots(figsize=(8, 3.5))
    plot_scheme_bars(results, TASK, list(SCHEMES), ax=ax)
    path = _save(fig, out, "rotated_digits_schemes")
    print(f"\nTables saved in {runs}/; bar chart saved to {path}")


def main(argv=None) -> int:
    """``make demo``: the partition demo, then the training demo."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="figures", help="folder for figures")
    parser.add_argument(
        "--runs",
        default=os.path.join("runs", "demo"),
        help="folder for result JSON files and tables",
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument(
        "--partition", action="store_true", help="only the partition demo on synthetic updates"
    )
    args = parser.parse_args(argv)
    from .lessons.modes import classroom_style

    classroom_style()  # the saved figures are read projected, as the notebooks' are
    if args.partition:
        partition_demo(args.out, args.seeds[0])
    else:
        training_demo(args.out, args.runs, args.seeds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

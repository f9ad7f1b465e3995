"""The paper's experiments at its Table III settings, as resumable grids of runs.

Each job writes one JSON file under ``results/<grid>/``; a job whose file exists is skipped.
What differs from the paper is set here once: Digit on the three domains that can be read
offline, and CIFAR-10 on the offline subset.
"""

from __future__ import annotations

from ..runs.jobs import Job
from ..training.config import SCHEMES
from .motivating_example import PATTERNS as MOTIVATING_PATTERNS
from .study_grids import STUDY_GRIDS, STUDY_PARTS

__all__ = [
    "GRIDS",
    "OFFLINE_DIGIT_DOMAINS",
    "PAPER_PART",
    "PATTERNS",
    "RENAMED",
    "TABLE1_NAMES",
    "current_grid",
    "grid_jobs",
    "grids_using",
]

OFFLINE_DIGIT_DOMAINS = ["mnist", "usps", "mnistm"]
SEEDS = (0, 1, 2, 3, 4)
# Table II's collaboration patterns, named for file names ("(1,2)" -> "pair-12"), and
# HCCT's own choice; TABLE1_NAMES maps each back to the paper's row.
TABLE1_NAMES = {
    (f"pair-{name.strip('()').replace(',', '')}" if name.startswith("(") else name): name
    for name in MOTIVATING_PATTERNS
}
PATTERNS = {grid: MOTIVATING_PATTERNS[paper] for grid, paper in TABLE1_NAMES.items()}
PATTERNS["hcct"] = ("hcct", None)
FIG5_ALPHAS = (0.1, 1.0, 10.0, 100.0, 1000.0)
FIG5_RATIOS = (0.05, 0.1, 0.2, 0.5)
FIG6_KS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20)
FIG7_NS = (10, 20, 30, 40, 50)


def _table3(grid, task, seeds, **kw):
    return [
        Job(grid, f"{s}-seed{seed}", task, s, seed, dict(kw)) for s in SCHEMES for seed in seeds
    ]


def _fmnist_network(seeds):
    # The authors' FMNIST network, with and without their second softmax (docs/schemes.md).
    return [
        Job("fmnist-network", f"{model}-{s}-seed{seed}", "fmnist", s, seed, {"model": model})
        for model in ("fmnist_mlp_dropout", "fmnist_mlp_authors")
        for s in ("independent", "global", "hcct")
        for seed in seeds
    ]


def _table1(seeds):
    return [
        Job(
            "motivating",
            f"{name}-seed{seed}",
            "motivating",
            scheme,
            seed,
            {"partition": part} if part else {},
        )
        for name, (scheme, part) in PATTERNS.items()
        for seed in seeds
    ]


def _fig4(seeds):
    # 10 clients, then 0, 1 or 2 join every 10 epochs (arrivals at epochs 10..40): every
    # curve builds the same 18-client federation, so the first 10 hold the same data.
    kw = dict(n_clients=18, initial_clients=10, join_every=10)
    return [
        Job(
            "incoming-cifar10",
            f"new{n}-seed{seed}",
            "cifar10",
            "hcct",
            seed,
            dict(kw, new_clients=n),
        )
        for n in (0, 1, 2)
        for seed in seeds
    ]


def _fig5(seeds):
    return [
        Job(
            "alpha-cifar10",
            f"ratio{r}-alpha{a:g}-seed{seed}",
            "cifar10",
            "hcct",
            seed,
            {"alpha": a, "train_ratio": r},
        )
        for r in FIG5_RATIOS
        for a in FIG5_ALPHAS
        for seed in seeds
    ]


def _fig6(seeds):
    kw = dict(n_clients=20, domains=OFFLINE_DIGIT_DOMAINS)
    return [
        Job("fixed-k-digit", f"k{k}-seed{seed}", "digit", "hcct", seed, dict(kw, fixed_groups=k))
        for seed in seeds
        for k in FIG6_KS
    ]


def _fig7(seeds):
    jobs = []
    for seed in seeds:
        for n in FIG7_NS:
            for k in sorted({1, 2, 5, 10, n}):
                kw = dict(n_clients=n, fixed_groups=k, domains=OFFLINE_DIGIT_DOMAINS)
                jobs.append(Job("k-vs-n-digit", f"n{n}-k{k}-seed{seed}", "digit", "hcct", seed, kw))
    return jobs


def _ablation(seeds):
    return [
        Job(
            "ablation-digit",
            f"{label}-seed{seed}",
            "digit",
            "hcct",
            seed,
            {
                "update_includes_buffers": flag,
                "record_cosines": True,
                "domains": OFFLINE_DIGIT_DOMAINS,
            },
        )
        for seed in seeds
        for label, flag in (("parameters", False), ("buffers", True))
    ]


# name -> (builder of its jobs from seeds, default seeds); ordered by priority.
GRIDS = {
    "schemes-fmnist": (lambda s: _table3("schemes-fmnist", "fmnist", s), SEEDS),
    "schemes-rotated-digits": (
        lambda s: _table3("schemes-rotated-digits", "rotated-digits", s),
        SEEDS,
    ),
    "fmnist-network": (_fmnist_network, SEEDS),
    "motivating": (_table1, SEEDS),
    "schemes-digit": (
        lambda s: _table3("schemes-digit", "digit", s, domains=OFFLINE_DIGIT_DOMAINS),
        SEEDS,
    ),
    "schemes-cifar10": (lambda s: _table3("schemes-cifar10", "cifar10", s), SEEDS),
    "ablation-digit": (_ablation, SEEDS[:3]),
    "incoming-cifar10": (_fig4, SEEDS[:3]),
    "alpha-cifar10": (_fig5, SEEDS[:3]),
    "fixed-k-digit": (_fig6, SEEDS[:3]),
    "k-vs-n-digit": (_fig7, SEEDS[:3]),
    **STUDY_GRIDS,
}


# What each grid reproduces, in the compiled paper's numbering (Roman tables, IEEE style).
PAPER_PART = {
    "schemes-fmnist": "Table IV, FMNIST",
    "schemes-rotated-digits": "Table IV layout, rotated digits (not in the paper)",
    "fmnist-network": "Table IV, FMNIST: the authors' network",
    "motivating": "Table II, the motivating example",
    "schemes-digit": "Tables IV and V, Digit",
    "schemes-cifar10": "Table IV, CIFAR-10",
    "ablation-digit": "Digit: updates with and without batch-norm buffers",
    "incoming-cifar10": "Fig. 3, incoming clients",
    "alpha-cifar10": "Fig. 4, alpha against the train ratio",
    "fixed-k-digit": "Fig. 5, a fixed number of groups K",
    "k-vs-n-digit": "Fig. 6, K against the number of clients N",
    **STUDY_PARTS,
}
# Grids were once named by table and figure numbers that were not the compiled paper's;
# files written then still say so in their "grid" field.
RENAMED = {
    "table3-fmnist": "schemes-fmnist",
    "table3-rotated-digits": "schemes-rotated-digits",
    "table3-digit": "schemes-digit",
    "table3-cifar10": "schemes-cifar10",
    "table1-motivating": "motivating",
    "fig4-cifar10": "incoming-cifar10",
    "fig5-cifar10": "alpha-cifar10",
    "fig6-digit": "fixed-k-digit",
    "fig7-digit": "k-vs-n-digit",
}


def current_grid(name: str) -> str:
    """A grid's name today (``RENAMED`` maps the old ones a stored result may carry)."""
    return RENAMED.get(name, name)


def grid_jobs(names, seeds=None) -> list:
    """Every job of the grids ``names`` (each grid's own seeds unless ``seeds`` is given)."""
    jobs = []
    for name in names:
        if name in RENAMED:
            raise ValueError(f"grid {name!r} is now called {RENAMED[name]!r}")
        if name not in GRIDS:
            raise ValueError(f"unknown grid {name!r}; choose from {list(GRIDS)}")
        build, default = GRIDS[name]
        jobs += build(tuple(default if seeds is None else seeds))
    return jobs


def grids_using(part: str, names=None) -> dict:
    """Grid -> how many of its runs compute with ``part`` (e.g. ``"scheme maxfl"``).

    A part is a key of :func:`~hcct_lite.training.provenance.compute_version`; bumping its
    version makes these runs' stored results stale. ``names``: the grids (default all).
    """
    from ..training.config import make_config
    from ..training.provenance import compute_version

    counts = {}
    for job in grid_jobs(list(GRIDS) if names is None else names):
        cfg = make_config(job.task, job.scheme, job.seed, **job.overrides)
        if part in compute_version(cfg):
            counts[job.grid] = counts.get(job.grid, 0) + 1
    return counts

"""The notebooks' data in every mode: shipped result files, or runs recomputed now.

Each function takes a :class:`~hcct_lite.lessons.modes.Mode`. In ``shipped`` mode it reads
``results/``; otherwise it trains with :func:`~hcct_lite.lessons.modes.task_settings`. Both
modes summarise runs with the same functions, so they draw the same quantities.
"""

from __future__ import annotations

import os

import numpy as np

from ..reproduction.motivating_example import PATTERNS, run_patterns
from ..reproduction.paper_grids import TABLE1_NAMES, grid_jobs
from ..reproduction.study_grids import STUDY_GRIDS
from ..runs.jobs import Job, job_path
from ..runs.reading import by_scheme, complete_seeds, load_grid, read_results, variant
from ..runs.runner import run_grid, run_jobs
from ..runs.store import settings_dir
from ..training.config import SCHEMES
from .modes import Mode, results_dir, task_settings

__all__ = [
    "grid_progress",
    "pending_note",
    "quick_jobs",
    "grid_runs",
    "common_seeds",
    "motivating_results",
    "scheme_runs",
    "best_epoch_means",
    "worst_client",
    "scheme_claims",
]


def grid_progress(grid: str) -> str:
    """``"<grid>: 22 of 45 runs shipped"``, for a notebook to say what is pending."""
    done = len(load_grid(str(results_dir()), grid))
    return f"{grid}: {done} of {len(grid_jobs([grid]))} runs shipped"


def _quick_grid(grid, task, seed, variants) -> list:
    settings, _ = task_settings(Mode("quick"), task)
    return [
        Job(grid, f"{name}-seed{seed}", task, scheme, seed, {**settings, **kw})
        for name, scheme, kw in variants
    ]


def quick_jobs(grid: str, seed: int = 0) -> list:
    """Quick mode's small version of a figure grid of the paper, one seed.

    Fig. 3: 6 clients, then 0, 1 or 2 join every 5 epochs; Fig. 4: alpha 1..1000 at train
    ratios 0.1 and 0.5; Fig. 5: N = 6, K = 1, 2, 3, 6; Fig. 6: N = 3, 6, K = 1, 2, N;
    the ablation: updates over parameters, and with batch-norm buffers.
    """
    if grid == "incoming-cifar10":
        kw = dict(n_clients=12, initial_clients=6, join_every=5)
        v = [(f"new{n}", "hcct", dict(kw, new_clients=n)) for n in (0, 1, 2)]
        return _quick_grid(grid, "cifar10", seed, v)
    if grid == "alpha-cifar10":
        v = [
            (f"ratio{r}-alpha{a:g}", "hcct", {"alpha": a, "train_ratio": r})
            for r in (0.1, 0.5)
            for a in (1.0, 10.0, 100.0, 1000.0)
        ]
        return _quick_grid(grid, "cifar10", seed, v)
    if grid == "fixed-k-digit":
        v = [(f"k{k}", "hcct", {"n_clients": 6, "fixed_groups": k}) for k in (1, 2, 3, 6)]
        return _quick_grid(grid, "digit", seed, v)
    if grid == "k-vs-n-digit":
        v = [
            (f"n{n}-k{k}", "hcct", {"n_clients": n, "fixed_groups": k})
            for n in (3, 6)
            for k in sorted({1, 2, n})
        ]
        return _quick_grid(grid, "digit", seed, v)
    if grid == "ablation-digit":
        v = [
            (label, "hcct", {"update_includes_buffers": flag, "record_cosines": True})
            for label, flag in (("parameters", False), ("buffers", True))
        ]
        return _quick_grid(grid, "digit", seed, v)
    if grid in STUDY_GRIDS:  # small runs already: the shipped grid itself (buffers: 1 seed)
        return grid_jobs([grid], seeds=(seed,) if grid == "buffers-rotated" else (0, 1, 2))
    raise ValueError(f"no quick version of grid {grid!r}")


def runs_cache(mode: Mode, name: str) -> str:
    """The folder a notebook caches its recomputed runs of ``name`` in.

    ``$HCCT_RUNS`` (default ``runs/``) / ``name``, suffixed by a hash of the mode and the
    code, so a code change never reuses stale runs.
    """
    return settings_dir(os.path.join(os.environ.get("HCCT_RUNS", "runs"), name), mode=mode.name)


def grid_runs(mode: Mode, grid: str, out_dir: str | None = None, workers: int = 2) -> list:
    """A figure grid's runs: shipped files, its quick version, or the full grid recomputed.

    Recomputed runs are cached in ``out_dir`` (default :func:`runs_cache`; a grid resumes)
    and run in ``workers`` processes of one torch thread each. Shipped mode returns the
    shipped runs of the seeds that every shipped variant has (:func:`complete_seeds`), so it
    may return fewer runs than planned: see :func:`grid_progress`.
    """
    if not mode.recompute:
        return complete_seeds(load_grid(str(results_dir()), grid))
    out_dir = out_dir or runs_cache(mode, grid)
    quick = mode.name == "quick"
    jobs = quick_jobs(grid) if quick else grid_jobs([grid], seeds=mode.seeds[:3])
    device = None if quick else "auto"
    run_jobs(jobs, out_dir, workers=workers, device=device, log=None, progress=False)
    return read_results([job_path(out_dir, j) for j in jobs])


def pending_note(grid: str) -> str:
    """One line for a figure whose shipped grid is not complete: progress and what to run."""
    return f"pending: {grid_progress(grid)} - run HCCT_MODE=quick for a small version"


def common_seeds(results: dict) -> list:
    """The seeds every entry of ``results`` (name -> list of runs) has, sorted."""
    sets = [{r["seed"] for r in rs} for rs in results.values()]
    return sorted(set.intersection(*sets)) if sets else []


def motivating_results(mode: Mode) -> dict:
    """Table II: pattern -> list of result dicts, every pattern over the same seeds.

    Shipped mode keeps only the seeds every pattern has run, so patterns are compared
    like with like; quick and full modes train every pattern for ``mode.seeds``.
    """
    if mode.recompute:
        settings, _ = task_settings(mode, "motivating")
        return run_patterns(seeds=mode.seeds, log=None, **settings)
    runs = load_grid(str(results_dir()), "motivating")
    out = {pattern: [] for pattern in PATTERNS}
    for r in runs:
        name = TABLE1_NAMES.get(variant(r))
        if name is not None:
            out[name].append(r)
    if not all(out.values()):
        missing = [k for k, v in out.items() if not v]
        raise FileNotFoundError(f"no shipped runs of the pattern(s) {missing} in results/")
    seeds = set(common_seeds(out))
    return {
        k: sorted((r for r in v if r["seed"] in seeds), key=lambda r: r["seed"])
        for k, v in out.items()
    }


def scheme_runs(
    mode: Mode, task: str, out_dir: str | None = None, schemes=SCHEMES, workers: int = 2
) -> list:
    """Table IV's runs of ``task``: shipped files, or every scheme trained for ``mode.seeds``.

    ``out_dir`` caches recomputed runs (resumable; default :func:`runs_cache`); shipped runs
    are read from ``results/schemes-<task>``.
    """
    if not mode.recompute:
        return load_grid(str(results_dir()), f"schemes-{task}")
    out_dir = out_dir or runs_cache(mode, f"schemes-{task}")
    settings, _ = task_settings(mode, task)
    return run_grid(
        task,
        list(schemes),
        list(mode.seeds),
        out_dir,
        progress=False,
        log=None,
        workers=workers,
        **settings,
    )


def best_epoch_means(runs) -> dict:
    """``scheme -> mean error``: the best-epoch mean error over seeds (the paper's protocol)."""
    return {s: v[1][0] for s, v in by_scheme(runs).items()}


def worst_client(runs, scheme: str) -> float:
    """The worst client's final error under ``scheme``, averaged over seeds."""
    return float(np.mean([r["final"]["max"] for r in runs if r["scheme"] == scheme]))


def scheme_claims(runs, task: str) -> dict:
    """The notebook's claims about one task's Table IV column, each True or False.

    Parameters
    ----------
    runs : list of result dicts of ``task`` (every scheme, any seeds)
    task : ``"fmnist"``, ``"digit"``, ``"cifar10"`` or ``"rotated-digits"``
    """
    m = best_epoch_means(runs)
    if task == "fmnist":
        return {
            "FMNIST: HCCT within 2 points of Global": abs(m["hcct"] - m["global"]) < 2,
            "FMNIST: HCCT over 10 points below Independent": m["independent"] - m["hcct"] > 10,
            "FMNIST: MAXFL within 2 points of Global": abs(m["maxfl"] - m["global"]) < 2,
        }
    if task == "digit":
        gap = abs(worst_client(runs, "hcct") - worst_client(runs, "independent"))
        return {
            "Digit: HCCT within 0.5 points of Independent": abs(m["hcct"] - m["independent"]) < 0.5,
            "Digit: Global below HCCT (the paper: HCCT best)": m["global"] < m["hcct"],
            "Digit: HCCT's worst client within 0.5 points of Independent's": gap < 0.5,
        }
    if task == "cifar10":
        return {
            "CIFAR-10: HCCT within 1 point of Independent": abs(m["hcct"] - m["independent"]) < 1,
            "CIFAR-10: Global over 5 points above HCCT": m["global"] - m["hcct"] > 5,
        }
    if task == "rotated-digits":
        return {
            "rotated digits: HCCT below Independent and Global": m["hcct"]
            < min(m["independent"], m["global"]),
        }
    raise ValueError(f"no claims for task {task!r}")

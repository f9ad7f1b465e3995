"""What a robust aggregator costs on clean runs: a Table IV grid under FedAvg and under it.

    python benchmarks/robust_cost.py --grid schemes-fmnist --aggregator centered-clip --workers 2

Reruns every run of the grid (its Table III settings and seeds) with ``--aggregator`` (or
``deployment``: the Flower app's defence, its aggregator and count bound) and prints, per
scheme, the mean final test error over clients (mean +- std over seeds) of the shipped
results (FedAvg) and of the reruns, their difference, and whether that difference lies
within the shipped seed spread (one standard deviation). Nothing is written.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing as mp
from pathlib import Path

import torch

from hcct_lite.reproduction.paper_grids import grid_jobs
from hcct_lite.runs.results import seed_stats
from hcct_lite.training.config import make_config
from hcct_lite.training.engine import run_experiment


def _defence(aggregator: str) -> dict:
    if aggregator != "deployment":
        return {"aggregator": aggregator}
    import tomllib

    from hcct_lite.flower.common import config_from_run_config

    app = Path(__file__).parents[1] / "hcct_lite" / "flower" / "app" / "pyproject.toml"
    cfg = config_from_run_config(tomllib.loads(app.read_text())["tool"]["flwr"]["app"]["config"])
    return {k: getattr(cfg, k) for k in ("aggregator", "clip_factor", "count_bound")}


def _rerun(args):
    job, aggregator = args
    torch.set_num_threads(1)
    logging.getLogger("hcct_lite").setLevel(logging.ERROR)
    cfg = make_config(job.task, job.scheme, job.seed, **_defence(aggregator), **job.overrides)
    return job.scheme, job.seed, run_experiment(cfg, progress=False)["final"]["mean"]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grid", default="schemes-fmnist")
    p.add_argument("--aggregator", default="centered-clip")
    p.add_argument("--results", default="results")
    p.add_argument("--workers", type=int, default=1)
    a = p.parse_args(argv)
    jobs = grid_jobs([a.grid])
    shipped = {}
    for j in jobs:
        path = Path(a.results) / j.grid / f"{j.name}.json"
        shipped.setdefault(j.scheme, []).append(json.loads(path.read_text())["final"]["mean"])
    with mp.get_context("spawn").Pool(a.workers) as pool:
        rows = pool.map(_rerun, [(j, a.aggregator) for j in jobs])
    robust = {}
    for scheme, _, mean in sorted(rows):
        robust.setdefault(scheme, []).append(mean)
    print(f"| scheme | mean (shipped) | {a.aggregator} | difference | within the seed spread |")
    print("|---|---|---|---|---|")
    for scheme, ref in shipped.items():
        (mean, std, _), (new, new_std, _) = seed_stats(ref), seed_stats(robust[scheme])
        within = "yes" if abs(new - mean) <= std else "no"
        print(f"| {scheme} | {mean:.2f} +- {std:.2f} | {new:.2f} +- {new_std:.2f} | "
              f"{new - mean:+.2f} | {within} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()

"""What a robust aggregator costs on clean runs: a Table IV grid under FedAvg and under it.

    python benchmarks/robust_cost.py --grid schemes-fmnist --aggregator centered-clip --workers 2

Reruns every run of the grid (its Table III settings and seeds) with ``--aggregator`` (or
``deployment``: the Flower app's defence, its aggregator, count bound and norm rule) and
prints, per scheme, the mean final test error over clients (mean +- std over seeds) of the
shipped results (FedAvg) and of the reruns, their difference, and the report's verdict on it
(:func:`hcct_lite.reproduction.verdicts.compare`: seed by seed, resolved only where the
defence is higher, or lower, at every seed by more than the rerun noise). Nothing is
written.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing as mp
from pathlib import Path

import torch

from hcct_lite.deploy.flower.common import deployment_defence
from hcct_lite.reproduction.paper_grids import grid_jobs
from hcct_lite.reproduction.verdicts import compare, noise_of
from hcct_lite.runs.results import seed_stats
from hcct_lite.training.config import make_config
from hcct_lite.training.engine import run_experiment


def _defence(aggregator: str) -> dict:
    return deployment_defence() if aggregator == "deployment" else {"aggregator": aggregator}


def _rerun(args):
    job, aggregator = args
    torch.set_num_threads(1)
    logging.getLogger("hcct_lite").setLevel(logging.ERROR)
    cfg = make_config(job.task, job.scheme, job.seed, **{**job.overrides, **_defence(aggregator)})
    return job.scheme, job.seed, run_experiment(cfg, progress=False)["final"]["mean"]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grid", default="schemes-fmnist")
    p.add_argument("--aggregator", default="centered-clip")
    p.add_argument("--results", default="results")
    p.add_argument("--workers", type=int, default=1)
    a = p.parse_args(argv)
    jobs = grid_jobs([a.grid])
    shipped, runs = {}, []
    for j in jobs:
        path = Path(a.results) / j.grid / f"{j.name}.json"
        runs.append(json.loads(path.read_text()))
        shipped.setdefault(j.scheme, {})[j.seed] = runs[-1]["final"]["mean"]
    noise = noise_of(runs)  # the shipped runs' device: the reruns are on this CPU
    with mp.get_context("spawn").Pool(a.workers) as pool:
        rows = pool.map(_rerun, [(j, a.aggregator) for j in jobs])
    robust = {}
    for scheme, seed, mean in rows:
        robust.setdefault(scheme, {})[seed] = mean
    print(f"| scheme | mean (shipped) | {a.aggregator} | difference | verdict, seed by seed |")
    print("|---|---|---|---|---|")
    for scheme, ref in shipped.items():
        (mean, std, _), (new, new_std, _) = (
            seed_stats(list(ref.values())),
            seed_stats(list(robust[scheme].values())),
        )
        c = compare(robust[scheme], ref, noise)
        up = sum(robust[scheme][s] > ref[s] for s in ref)
        print(
            f"| {scheme} | {mean:.2f} +- {std:.2f} | {new:.2f} +- {new_std:.2f} | "
            f"{new - mean:+.2f} | {c.outcome}, higher at {up} of {c.seeds} |",
            flush=True,
        )


if __name__ == "__main__":
    main()

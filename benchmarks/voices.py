"""How close honest silos' updates come: the margin of the one-voice rule.

The robust aggregators hear updates closer than ``SAME_VOICE`` times the longer one's norm
as one voice (``hcct_lite/deploy/defences/robust.py``). This runs honest federations under
the deployment's defaults and prints, per task and scheme, each banded update's distance
to its nearest other in its group, relative to the longer norm: the minimum and low
percentiles. Honest silos must sit well above ``SAME_VOICE``.

    python benchmarks/voices.py [--runs rotated-digits:global fmnist:hcct ...]
        [--epochs 30] [--seed 0] [--domains mnist usps mnistm]
"""

from __future__ import annotations

import argparse
import logging

import numpy as np
import torch

from hcct_lite.deploy.defences import robust
from hcct_lite.deploy.flower.common import deployment_defence
from hcct_lite.training.config import make_config
from hcct_lite.training.engine import run_experiment


def nearest_relative(deltas: list) -> list:
    """Each delta's distance to its nearest other, over the longer of the two norms."""
    flat = [torch.cat([v.reshape(-1).double() for v in d.values()]) for d in deltas]
    out = []
    for i, a in enumerate(flat):
        rel = [
            float((a - b).norm()) / max(float(a.norm()), float(b.norm()), 1e-30)
            for j, b in enumerate(flat)
            if j != i
        ]
        out.extend(rel and [min(rel)])
    return out


def measure(task: str, scheme: str, epochs: int, seed: int, **settings) -> np.ndarray:
    """The nearest relative distances of every group's banded updates in one run."""
    seen = []
    banded = robust.banded

    def spy(*args, **kwargs):
        out = banded(*args, **kwargs)
        seen.extend(nearest_relative(out))
        return out

    robust.banded = spy
    try:
        cfg = make_config(task, scheme, seed, epochs=epochs, **deployment_defence(), **settings)
        run_experiment(cfg, progress=False)
    finally:
        robust.banded = banded
    return np.asarray(seen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", nargs="+", default=["rotated-digits:global", "rotated-digits:hcct"]
    )
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--domains", nargs="+", help="the digit task's domains (its default)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    logging.getLogger("hcct_lite").setLevel(logging.ERROR)
    print(f"SAME_VOICE = {robust.SAME_VOICE:g}\n")
    print("| task | scheme | updates | min | 1 % | 5 % | median |")
    print("|---|---|---|---|---|---|---|")
    for run in args.runs:
        task, scheme = run.split(":")
        extra = {"domains": tuple(args.domains)} if args.domains and task == "digit" else {}
        r = measure(task, scheme, args.epochs, args.seed, **extra)
        if len(r) == 0:  # every group of one: no pair to measure
            print(f"| {task} | {scheme} | 0 | - | - | - | - |", flush=True)
            continue
        q = np.percentile(r, [0, 1, 5, 50])
        print(f"| {task} | {scheme} | {len(r)} | " + " | ".join(f"{v:.3f}" for v in q) + " |")


if __name__ == "__main__":
    main()

"""Seconds per epoch and samples per second of the training engine, per task.

    python benchmarks/bench_engine.py                 # every task whose data is found
    python benchmarks/bench_engine.py --epochs 2 --device cuda

Runs the HCCT scheme for a few epochs of each task at the paper's settings (the Digit
task on the domains found offline when the paper's five are not all there) and prints
one row per task (epochs after the first, which pays one-off warm-up). "samples/s" counts
training samples processed (local epochs included).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys

import torch

from hcct_lite.training.config import make_config
from hcct_lite.training.data import DataNotFoundError, load_dataset
from hcct_lite.training.engine import run_experiment
from hcct_lite.training.tasks import PAPER_DOMAINS


def digit_domains():
    found = []
    for d in PAPER_DOMAINS:
        try:
            load_dataset(d, download=False)
            found.append(d)
        except DataNotFoundError:
            pass
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--tasks", nargs="+", default=["rotated-digits", "fmnist", "cifar10", "motivating", "digit"]
    )
    args = parser.parse_args(argv)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"threads {torch.get_num_threads()}, device {args.device}"
    )
    print(f"{'task':<16}{'clients':>8}{'train samples':>15}{'s/epoch':>10}{'samples/s':>12}  notes")
    for task in args.tasks:
        kw = {"epochs": args.epochs, "device": args.device, "download": False}
        note = ""
        if task == "digit":
            kw["domains"] = digit_domains()
            note = "domains " + ",".join(kw["domains"])
        if task == "fmnist" and not _has("fashion_mnist"):
            kw["dataset"] = "mnist"
            note = "mnist in place of fashion_mnist"
        try:
            cfg = make_config(task, "hcct", 0, **kw)
            r = run_experiment(cfg, progress=False)
        except (DataNotFoundError, ValueError) as err:
            print(f"{task:<16}  skipped: {err}", file=sys.stdout)
            continue
        # setup excluded; the first epoch also pays one-off warm-up, so skip it when we can
        timed = r["timing"]["epoch_seconds"][1:] or r["timing"]["epoch_seconds"]
        per_epoch = sum(timed) / len(timed)
        samples = sum(r["sizes"]) * cfg.local_epochs
        print(
            f"{task:<16}{cfg.n_clients:>8}{sum(r['sizes']):>15}{per_epoch:>10.2f}"
            f"{samples / per_epoch:>12.0f}  {note}"
        )


def _has(name):
    try:
        load_dataset(name, download=False)
        return True
    except DataNotFoundError:
        return False


if __name__ == "__main__":
    main()

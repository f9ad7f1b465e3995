"""The engine's overhead: seconds per epoch of ``run_experiment`` against a hand-written loop.

    python benchmarks/bench_overhead.py                       # hcct and global, three tasks
    python benchmarks/bench_overhead.py --tasks fmnist --schemes hcct --epochs 20

Both do the same work for the scheme. Every client runs the same local SGD steps (same
batch size, local epochs and number of steps) from its group's model; the server takes
each group's D-weighted average, and every client's test split is evaluated once per
epoch. For HCCT the loop also flattens each client's update once, partitions the clients
on them with ``client_partition`` (Algorithm 2) and starts each group from the D-weighted
average of its members' models; Global is one group of everyone. The loop is the shortest
honest PyTorch for that, with no checks; the ratio engine / loop is the price of the
engine's generality (schemes, reply screening, updates, history). "vs FedAvg loop" divides
by the loop of plain FedAvg (the same SGD steps and evaluations, no partition): for HCCT
it also counts the partition's own cost. Epochs after the first are timed; the table shows
the median epoch. Targets on a CPU, one thread: ratio <= 1.3 on fmnist and cifar10, <= 1.5
on rotated-digits.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import time

import torch
from torch import nn

from hcct_lite.partition import client_partition
from hcct_lite.training.config import make_config
from hcct_lite.training.engine import run_experiment
from hcct_lite.training.models import build_model
from hcct_lite.training.tasks import build_clients


def _average(states, weights):
    total = sum(weights)
    return {
        k: sum(s[k].float() * (w / total) for s, w in zip(states, weights, strict=True)).to(v.dtype)
        for k, v in states[0].items()
    }


def _sgd(model, start, c, cfg, lr, loss_fn):
    model.load_state_dict(start)
    model.train()
    perm = torch.randperm(c.size)
    for _ in range(cfg.local_epochs):
        for s in range(math.ceil(c.size / cfg.batch_size)):
            idx = perm[s * cfg.batch_size : (s + 1) * cfg.batch_size]
            loss = loss_fn(model(c.x_train[idx]), c.y_train[idx])
            model.zero_grad(set_to_none=True)
            loss.backward()
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(p.grad, alpha=-lr)


def hand_loop(cfg, clients, scheme="global") -> list:
    """Seconds of each epoch of ``scheme`` (global or hcct) over ``clients``."""
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model)
    sizes = [c.size for c in clients]
    n = len(clients)
    names = [k for k, _ in model.named_parameters()]
    states = [{k: v.clone() for k, v in model.state_dict().items()}] * n
    updates, loss_fn, times = None, nn.CrossEntropyLoss(), []
    for t in range(cfg.epochs):
        t0 = time.perf_counter()
        lr = cfg.lr * cfg.lr_decay**t
        if scheme == "global":
            groups = [list(range(n))]
        elif t == 0:
            groups = [[i] for i in range(n)]
        else:
            groups = client_partition(updates, sizes, alpha=cfg.alpha).groups
        rows = [None] * n
        for g in groups:
            start = (
                states[g[0]]
                if len(g) == 1
                else _average([states[i] for i in g], [sizes[i] for i in g])
            )
            flat_start = torch.cat([start[k].reshape(-1) for k in names])
            ends = []
            for i in g:
                _sgd(model, start, clients[i], cfg, lr, loss_fn)
                ends.append({k: v.clone() for k, v in model.state_dict().items()})
                flat_end = nn.utils.parameters_to_vector(model.parameters()).detach()
                rows[i] = (flat_start - flat_end) / lr if scheme == "hcct" else None
            avg = ends[0] if len(g) == 1 else _average(ends, [sizes[i] for i in g])
            model.load_state_dict(avg)
            model.eval()
            with torch.no_grad():
                errors = [
                    float((model(clients[i].x_test).argmax(1) != clients[i].y_test).float().mean())
                    for i in g
                ]
            assert len(errors) == len(g)
            for i in g:
                states[i] = avg
        updates = torch.stack(rows) if scheme == "hcct" else None
        times.append(time.perf_counter() - t0)
    return times


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--tasks", nargs="+", default=["rotated-digits", "fmnist", "cifar10"])
    parser.add_argument("--schemes", nargs="+", default=["hcct", "global"])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"threads {torch.get_num_threads()}, device cpu, "
        f"median of {args.epochs - 1} epochs (the first not timed)"
    )
    print(
        f"{'task':<16}{'scheme':<8}{'engine s/epoch':>16}{'loop s/epoch':>14}{'ratio':>8}"
        f"{'vs FedAvg loop':>16}"
    )
    for task in args.tasks:
        fedavg = None
        for scheme in args.schemes:
            cfg = make_config(task, scheme, 0, epochs=args.epochs, download=False)
            clients = build_clients(cfg)
            r = run_experiment(cfg, progress=False, clients=clients)
            engine = statistics.median(r["timing"]["epoch_seconds"][1:])  # robust to a busy machine
            loop = statistics.median(hand_loop(cfg, clients, scheme)[1:])
            if fedavg is None:  # the SGD steps and evaluations alone: every scheme's floor
                fedavg = (
                    loop
                    if scheme == "global"
                    else statistics.median(hand_loop(cfg, clients, "global")[1:])
                )
            print(
                f"{task:<16}{scheme:<8}{engine:>16.4f}{loop:>14.4f}{engine / loop:>8.2f}"
                f"{engine / fedavg:>16.2f}"
            )


if __name__ == "__main__":
    main()

"""The engine's overhead: seconds per epoch of ``run_experiment`` against a hand-written loop.

    python benchmarks/bench_overhead.py                       # rotated-digits, fmnist, cifar10
    python benchmarks/bench_overhead.py --tasks fmnist --epochs 4

Both do the same work for the Global scheme (FedAvg): every client runs the same local SGD
steps (same batch size, local epochs and number of steps) from the global model, the
server takes the D-weighted average, and every client's test split is evaluated once per
epoch. The loop is the shortest honest PyTorch for that; the ratio engine / loop is the
price of the engine's generality (schemes, updates, history). Epochs after the first are
timed; the table shows the median epoch. Targets on a CPU: <= 1.3 on fmnist and cifar10,
<= 1.5 on rotated-digits.
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

from hcct_lite.training.config import make_config
from hcct_lite.training.engine import run_experiment
from hcct_lite.training.models import build_model
from hcct_lite.training.tasks import build_clients


def hand_loop(cfg, clients) -> list:
    """Seconds of each epoch of plain FedAvg over ``clients`` (list of ClientData)."""
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model)
    sizes = torch.tensor([c.size for c in clients], dtype=torch.float32)
    weights = (sizes / sizes.sum()).tolist()
    global_state = {k: v.clone() for k, v in model.state_dict().items()}
    loss_fn = nn.CrossEntropyLoss()
    times = []
    for t in range(cfg.epochs):
        t0 = time.perf_counter()
        lr = cfg.lr * cfg.lr_decay**t
        avg = {k: torch.zeros_like(v, dtype=torch.float32) for k, v in global_state.items()}
        for c, w in zip(clients, weights, strict=True):
            model.load_state_dict(global_state)
            model.train()
            n = c.size
            for _ in range(cfg.local_epochs):
                perm = torch.randperm(n)
                for s in range(math.ceil(n / cfg.batch_size)):
                    idx = perm[s * cfg.batch_size : (s + 1) * cfg.batch_size]
                    loss = loss_fn(model(c.x_train[idx]), c.y_train[idx])
                    model.zero_grad(set_to_none=True)
                    loss.backward()
                    with torch.no_grad():
                        for p in model.parameters():
                            p.add_(p.grad, alpha=-lr)
            for k, v in model.state_dict().items():
                avg[k].add_(v.float(), alpha=w)
        global_state = {k: avg[k].to(v.dtype) for k, v in global_state.items()}
        model.load_state_dict(global_state)
        model.eval()
        with torch.no_grad():
            errors = [
                float((model(c.x_test).argmax(1) != c.y_test).float().mean()) for c in clients
            ]
        assert len(errors) == len(clients)
        times.append(time.perf_counter() - t0)
    return times


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--tasks", nargs="+", default=["rotated-digits", "fmnist", "cifar10"])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"threads {torch.get_num_threads()}, device cpu, scheme global, "
        f"median of {args.epochs - 1} epochs (the first not timed)"
    )
    print(f"{'task':<16}{'engine s/epoch':>16}{'loop s/epoch':>14}{'ratio':>8}")
    for task in args.tasks:
        cfg = make_config(task, "global", 0, epochs=args.epochs, download=False)
        clients = build_clients(cfg)
        r = run_experiment(cfg, progress=False, clients=clients)
        engine = r["timing"]["epoch_seconds"][1:]
        loop = hand_loop(cfg, clients)[1:]
        e, lo = statistics.median(engine), statistics.median(loop)  # robust to a busy machine
        print(f"{task:<16}{e:>16.3f}{lo:>14.3f}{e / lo:>8.2f}")


if __name__ == "__main__":
    main()

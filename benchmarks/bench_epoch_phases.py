"""Where an epoch's time goes: local SGD, the scheme's plan and aggregation, evaluation.

    python benchmarks/bench_epoch_phases.py --task digit --clients 20 --device cuda
    python benchmarks/bench_epoch_phases.py --task cifar10 --device cuda --epochs 3
    python benchmarks/bench_epoch_phases.py --task cifar10 --device cuda --batched bf16

Runs HCCT through the engine as a grid does, with each phase's calls timed (the device
synchronised around each, so GPU work is counted where it is queued), and prints seconds
per epoch (every epoch, the first with its warm-up) and each phase's share of the wall
time. The warm-up is seconds on a GPU: to compare two settings, run 5 epochs or more and
alternate them (with 2 epochs a CIFAR-10 A/B showed 30 % that 5 alternated epochs did not).
Phases nest: a client's local SGD includes its forward and backward passes, so the shares
do not add up to 100 %. With ``--batched`` the clients train together (one phase, "all
clients"), and their backward passes (``torch.autograd.grad``) are not listed apart. The
synchronisation slows a GPU run a little; nothing is written.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import torch

import hcct_lite.training.engine as engine
from hcct_lite.gpu.batched import BatchedSGDTrainer
from hcct_lite.gpu.stacked import GPU_PRECISIONS
from hcct_lite.reproduction.paper_grids import OFFLINE_DIGIT_DOMAINS
from hcct_lite.training.config import make_config
from hcct_lite.training.local import SGDTrainer

SPENT = defaultdict(float)


def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def timed(phase, fn, device):
    """``fn`` with its seconds added to ``SPENT[phase]``."""

    def wrapper(*args, **kwargs):
        _sync(device)
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _sync(device)
            SPENT[phase] += time.perf_counter() - start

    return wrapper


def _outermost(call, device):
    """Time a module call only when no other module call is running (the model, not its
    layers, whose timing would add up twice)."""
    depth = [0]
    timed_call = timed("forward passes (train, eval)", call, device)

    def wrapper(module, *args, **kwargs):
        depth[0] += 1
        try:
            return (timed_call if depth[0] == 1 else call)(module, *args, **kwargs)
        finally:
            depth[0] -= 1

    return wrapper


def instrument(device):
    """Wrap the engine's phases: scheme plan and aggregate, local training, evaluation."""
    make = engine.make_scheme

    def make_scheme(name, cfg):
        scheme = make(name, cfg)
        scheme.plan = timed("plan (partition)", scheme.plan, device)
        scheme.aggregate = timed("aggregate", scheme.aggregate, device)
        return scheme

    engine.make_scheme = make_scheme
    SGDTrainer.train_one = timed("local SGD, whole client", SGDTrainer.train_one, device)
    BatchedSGDTrainer.train = timed("local SGD, all clients", BatchedSGDTrainer.train, device)
    torch.nn.Module.__call__ = _outermost(torch.nn.Module.__call__, device)
    torch.Tensor.backward = timed("backward passes", torch.Tensor.backward, device)
    engine.LocalBackend.evaluate = timed("evaluate", engine.LocalBackend.evaluate, device)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="digit")
    p.add_argument("--clients", type=int, help="N (default: the task's)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--device", default="cpu")
    p.add_argument("--tf32", action="store_true", help="TF32 matrix products (moves numbers)")
    p.add_argument(
        "--batched",
        choices=GPU_PRECISIONS,
        help="every client at once (batched_clients) in this gpu_precision",
    )
    a = p.parse_args(argv)
    # Convolutions may use TF32 by PyTorch's default; matrix products may not.
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    kw = dict(epochs=a.epochs, device=a.device)
    if a.clients:
        kw["n_clients"] = a.clients
    if a.task == "digit":
        kw["domains"] = OFFLINE_DIGIT_DOMAINS
    if a.batched:
        kw.update(batched_clients=True, gpu_precision=a.batched)
    cfg = make_config(a.task, "hcct", 0, **kw)
    instrument(a.device)
    result = engine.run_experiment(cfg, progress=False)
    epochs = result["timing"]["epoch_seconds"]
    wall = sum(epochs)
    flags = f"TF32 matmul {a.tf32}, TF32 conv {torch.backends.cudnn.allow_tf32}"
    flags += f", batched {a.batched}" if a.batched else ""
    print(
        f"{cfg.task}, N = {cfg.n_clients}, {a.device} ({flags}): "
        f"{wall / len(epochs):.2f} s per epoch, {result['final']['mean']:.2f}% error"
    )
    if torch.device(a.device).type == "cuda":
        print(f"peak GPU memory allocated: {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
    print(f"{'phase':<28} {'s per epoch':>12} {'share':>7}")
    for phase, secs in sorted(SPENT.items(), key=lambda kv: -kv[1]):
        print(f"{phase:<28} {secs / len(epochs):>12.3f} {secs / wall:>7.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

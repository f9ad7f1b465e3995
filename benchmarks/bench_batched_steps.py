"""Local steps one client at a time against every client at once, on one GPU, one run alone.

    python benchmarks/bench_batched_steps.py --json bench.json

For each task (Digit at N = 20, CIFAR-10 at N = 10: HCCT without the norm rule, seed 0) and
each mode (``eager``: one client after another; ``batched-<precision>``: every client at
once on stacked networks, ``hcct_lite.gpu.batched``, in torch's default arithmetic
(float32, cuDNN's convolutions in TF32), with TF32 matrix products too, or with bf16
activations and channels_last) one run trains
``--epochs`` epochs in this process. Prints one row per setting: seconds per epoch (the mean
over epochs 2 onwards: the first holds cuDNN's warm-up), local SGD steps per second (each
client's batch-64 steps), the useful TFLOP/s they make (a step's forward and backward
FLOPs counted by torch's FlopCounterMode) and their fraction of the card's dense rate (an
8192 x 8192 x 8192 product in TF32, and in bf16, measured here), the peak memory and the
run's final mean test error. ``--cudnn-benchmark`` lets cuDNN time its algorithms for each
shape and keep the fastest (``torch.backends.cudnn.benchmark``, for the whole process: a
choice that may move the numbers, measured here, not used by the library). Nothing is
written but ``--json``.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import torch

from hcct_lite.reproduction.paper_grids import OFFLINE_DIGIT_DOMAINS
from hcct_lite.training.config import make_config
from hcct_lite.training.engine import run_experiment
from hcct_lite.training.models import MODEL_INPUT, build_model
from hcct_lite.training.tasks import build_clients

MODES = ("eager", "batched-default", "batched-tf32", "batched-bf16")
TASKS = ("digit:20", "cifar10:10")


def task_config(spec: str, device: str = "cuda", **overrides):
    """The RunConfig of HCCT, seed 0, for ``spec`` = "task:N" (Digit on the offline domains)."""
    task, n = spec.split(":")
    kw = {"domains": OFFLINE_DIGIT_DOMAINS} if task == "digit" else {}
    return make_config(task, "hcct", 0, n_clients=int(n), device=device, **kw, **overrides)


def step_flops(model_name: str, device, batch: int = 64) -> float:
    """FLOPs of one SGD step (forward and backward) of ``model_name`` on ``batch`` images."""
    from torch.utils.flop_counter import FlopCounterMode

    side, ch = MODEL_INPUT[model_name]
    model = build_model(model_name).to(device)
    x = torch.randn(batch, ch, side, side, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    with FlopCounterMode(display=False) as count:
        torch.nn.functional.cross_entropy(model(x), y).backward()
    return float(count.get_total_flops())


def dense_rate(dtype, tf32: bool, n: int = 8192, reps: int = 10) -> float:
    """TFLOP/s of an n x n x n matrix product on this card (random data, after a warm-up)."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a, b = (torch.randn(n, n, device="cuda", dtype=dtype) for _ in range(2))
    for _ in range(3):
        a @ b
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        a @ b
    end.record()
    torch.cuda.synchronize()
    torch.backends.cuda.matmul.allow_tf32 = before
    return 2 * n**3 * reps / (start.elapsed_time(end) / 1000) / 1e12


def measure(spec: str, mode: str, epochs: int, clients) -> dict:
    """One run of ``mode``: seconds per epoch, steps per second, peak GiB, final error."""
    kw = dict(epochs=epochs, norm_limit=0.0)
    if mode != "eager":
        kw.update(batched_clients=True, gpu_precision=mode.split("-")[1])
    cfg = task_config(spec, **kw)
    torch.cuda.reset_peak_memory_stats()
    r = run_experiment(cfg, progress=False, clients=clients)
    secs = r["timing"]["epoch_seconds"][1:]
    per_epoch = sum(secs) / len(secs)
    steps = sum(cfg.local_epochs * math.ceil(c.y_train.shape[0] / cfg.batch_size) for c in clients)
    return dict(
        task=cfg.task,
        n=cfg.n_clients,
        mode=mode,
        s_per_epoch=per_epoch,
        steps_per_s=steps / per_epoch,
        peak_gib=torch.cuda.max_memory_allocated() / 2**30,
        final=r["final"]["mean"],
        model=cfg.model,
    )


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", nargs="+", default=list(TASKS), help="task:N")
    p.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--cudnn-benchmark", action="store_true", help="cuDNN's autotuner on")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    torch.backends.cudnn.benchmark = a.cudnn_benchmark
    t0 = time.time()
    peak = {"tf32": dense_rate(torch.float32, True), "bf16": dense_rate(torch.bfloat16, False)}
    print(
        f"card: {torch.cuda.get_device_name()}; dense products: TF32 {peak['tf32']:.0f}, "
        f"bf16 {peak['bf16']:.0f} TFLOP/s; cuDNN benchmark {a.cudnn_benchmark}"
    )
    print("| task | N | mode | s per epoch | steps per s | TFLOP/s | of dense | peak GiB | error |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for spec in a.tasks:
        cfg = task_config(spec)
        clients = build_clients(cfg)
        flops = step_flops(cfg.model, "cuda")
        for mode in a.modes:
            row = measure(spec, mode, a.epochs, clients)
            row["tflops"] = row["steps_per_s"] * flops / 1e12
            row["of_dense"] = row["tflops"] / peak["bf16" if mode.endswith("bf16") else "tf32"]
            rows.append(row)
            print(
                f"| {row['task']} | {row['n']} | {mode} | {row['s_per_epoch']:.3f} "
                f"| {row['steps_per_s']:.0f} "
                f"| {row['tflops']:.1f} | {row['of_dense']:.1%} | {row['peak_gib']:.1f} "
                f"| {row['final']:.2f} |",
                flush=True,
            )
    if a.json:
        with open(a.json, "w") as f:
            json.dump(
                dict(
                    dense=peak,
                    rows=rows,
                    seconds=time.time() - t0,
                    cudnn_benchmark=a.cudnn_benchmark,
                ),
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()

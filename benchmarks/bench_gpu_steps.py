"""Eager against CUDA-graph local steps on a GPU, one run alone and several sharing the card.

    python benchmarks/bench_gpu_steps.py --task digit --clients 20 --procs 1 8
    python benchmarks/bench_gpu_steps.py --task cifar10 --procs 1 8 --epochs 8

For every number of processes P and each mode (eager, graphs; either with ``-tf32``: the
matrix products in TF32 too), P processes (one torch thread each, as a grid's workers)
build their federation (HCCT without the norm rule, seeds 0..P-1), wait for
each other, and train ``--epochs`` epochs at once. Prints one row per setting: seconds per
epoch of one run (the median over processes of the mean over epochs 2 onwards: the first
holds cuDNN's warm-up and the graphs' recording), client-epochs per second of the card
(every process's clients over its seconds per epoch, summed) and the peak GPU memory of one
process, with each run's final mean test error in seed order (two modes compare run by
run). Run it under CUDA MPS to measure what a grid's workers get. Nothing is written.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics

from hcct_lite.reproduction.paper_grids import OFFLINE_DIGIT_DOMAINS


def _worker(args, seed, mode, barrier, queue):
    import torch

    from hcct_lite.training.config import make_config
    from hcct_lite.training.engine import run_experiment
    from hcct_lite.training.tasks import build_clients

    torch.set_num_threads(1)
    # "-tf32": matrix products in TF32 too (cuDNN's convolutions already use it)
    torch.backends.cuda.matmul.allow_tf32 = mode.endswith("-tf32")
    graphs = mode.startswith("graphs")
    kw = dict(
        n_clients=args.clients,
        epochs=args.epochs,
        device=args.device,
        cuda_graphs=graphs,
        norm_limit=0.0,
    )
    if args.task == "digit":
        kw["domains"] = OFFLINE_DIGIT_DOMAINS
    cfg = make_config(args.task, "hcct", seed, **kw)
    clients = build_clients(cfg)
    barrier.wait()
    r = run_experiment(cfg, progress=False, clients=clients)
    secs = r["timing"]["epoch_seconds"][1:]
    gib = torch.cuda.max_memory_allocated() / 2**30 if args.device == "cuda" else 0.0
    queue.put((seed, sum(secs) / len(secs), gib, r["final"]["mean"]))


def measure(args, procs: int, mode: str) -> tuple:
    """(s per epoch of one run, client-epochs per s, peak GiB of a process, final errors).

    The final mean test errors are in seed order, so that two modes compare run by run.
    """
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(procs), ctx.Queue()
    ps = [ctx.Process(target=_worker, args=(args, s, mode, barrier, queue)) for s in range(procs)]
    for p in ps:
        p.start()
    rows = sorted(queue.get(timeout=args.timeout) for _ in ps)  # by seed
    for p in ps:
        p.join()
    per_epoch = [r[1] for r in rows]
    rate = sum(args.clients / s for s in per_epoch)
    return statistics.median(per_epoch), rate, max(r[2] for r in rows), [r[3] for r in rows]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="digit", choices=["digit", "cifar10", "fmnist"])
    p.add_argument("--clients", type=int, default=None, help="default: the task's Table III N")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--procs", type=int, nargs="+", default=[1, 8])
    p.add_argument(
        "--modes",
        nargs="+",
        default=["eager", "graphs"],
        choices=["eager", "graphs", "eager-tf32", "graphs-tf32"],
    )
    p.add_argument("--device", default="cuda", help="cpu only to try this script out")
    p.add_argument("--timeout", type=float, default=600, help="seconds to wait for a process")
    args = p.parse_args(argv)
    if args.clients is None:
        from hcct_lite.training.tasks import TASKS

        args.clients = TASKS[args.task]["n_clients"]
    print(f"{args.task}, N = {args.clients}, {args.epochs} epochs per run")
    head = "processes | steps | s per epoch (one run) | client-epochs per s | peak GiB"
    print(f"| {head} | final errors |")
    print("|---|---|---|---|---|---|")
    for procs in args.procs:
        for mode in args.modes:
            sec, rate, gib, finals = measure(args, procs, mode)
            errs = " ".join(f"{e:.1f}" for e in finals)
            print(f"| {procs} | {mode} | {sec:.3f} | {rate:.1f} | {gib:.2f} | {errs} |", flush=True)


if __name__ == "__main__":
    main()

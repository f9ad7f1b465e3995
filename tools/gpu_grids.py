"""Run the paper's GPU grids on one card before a deadline, and log what the card did.

    python tools/gpu_grids.py --grids k-vs-n-digit --workers 13 --deadline 540 --log runs.jsonl

The same runs, result files and queue as ``hcct-lite reproduce --device cuda --reuse-older``
(:func:`hcct_lite.runs.gpu_queue.run_queue`: longest runs first, admitted by memory, a
failed run retried once); ``--deadline`` adds that a run starts only if its expected time,
from the runs finished so far, ends before it, so that a lease of a few minutes ends with
whole results rather than runs cut off. Each finished or failed run is one line of
``--log`` (name, clients, start, end, runs in flight, expected and peak memory), for the
utilisation tables of ``results/README.md``.
"""

from __future__ import annotations

import argparse
import os
import time

from hcct_lite.reproduction.paper_grids import grid_jobs
from hcct_lite.runs.gpu_queue import QueueOptions, run_queue
from hcct_lite.runs.jobs import with_settings
from hcct_lite.runs.runner import pending_jobs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grids", nargs="+", required=True)
    p.add_argument("--out", default="results")
    p.add_argument("--workers", type=int, default=13)
    p.add_argument("--deadline", type=float, required=True, help="seconds from now")
    p.add_argument(
        "--memory-gb", type=float, help="GPU memory to fill (default: 92 %% of the card's)"
    )
    p.add_argument("--log", default="runs.jsonl")
    p.add_argument("--device", default="cuda", help="cpu only to try this script out")
    p.add_argument("--norm-limit", type=float, help="every run's norm rule (reproduce's)")
    p.add_argument("--cuda-graphs", action="store_true", default=None, help="local steps as graphs")
    p.add_argument("--batched-clients", action="store_true", default=None,
                   help="every client of an epoch at once (reproduce's)")  # fmt: skip
    p.add_argument("--gpu-precision", choices=["default", "tf32", "bf16"])
    a = p.parse_args(argv)
    t0 = time.time()
    say = lambda msg: print(f"[{time.time() - t0:6.1f} s] {msg}", flush=True)  # noqa: E731
    settings = dict(norm_limit=a.norm_limit, cuda_graphs=a.cuda_graphs,
                    batched_clients=a.batched_clients, gpu_precision=a.gpu_precision)  # fmt: skip
    jobs = with_settings(grid_jobs(a.grids), **settings)
    todo = pending_jobs(jobs, a.out, a.device, True, lambda m: None)
    opts = QueueOptions(workers=a.workers, memory_gb=a.memory_gb, deadline=a.deadline, log=a.log)
    left = run_queue(todo, a.out, a.device, opts, say)
    say(f"{len(todo) - len(left)} runs written; {len(left)} left")
    return 1 if left else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())

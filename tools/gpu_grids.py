"""Run the paper's GPU grids on one card before a deadline, and log what the card did.

    python tools/gpu_grids.py --grids k-vs-n-digit --workers 13 --deadline 540 --log runs.jsonl

The same runs and the same result files as ``hcct-lite reproduce --device cuda
--reuse-older`` (each run is ``runner``'s own job function, in a spawned process of one
torch thread); only the order and the admission differ, so that a lease of a few minutes
ends with whole results rather than runs cut off:

- runs go in priority order (the grid's seed 0 first, then seed 1, ...), a run of many
  clients paired with one of few so that the card's memory holds the runs in flight;
- a run starts only while the estimated memory of the runs in flight plus its own fits
  ``--memory-gb`` (the card's total by default), and only if its estimated time, from the
  seconds per client of the runs finished so far, ends before ``--deadline``;
- a run that fails (out of memory, say) goes back to the queue once.

Each finished or failed run is one line of ``--log`` (name, clients, start, end, runs in
flight), for the utilisation table of ``results/README.md``.
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing as mp
import os
import subprocess
import time

from hcct_lite.reproduction.paper_grids import grid_jobs
from hcct_lite.runs.jobs import one_torch_thread, run_job, with_settings
from hcct_lite.runs.runner import pending_jobs
from hcct_lite.training.config import make_config


@functools.cache  # asked of every job in flight twice a second
def n_clients(job) -> int:
    kw = dict(job.overrides, cuda_graphs=False)  # the count only; no device needed for it
    return make_config(job.task, job.scheme, job.seed, **kw).n_clients


def ordered(todo) -> list:
    """Seed-major priority; within it, big and small runs alternate."""
    big = [j for j in todo if n_clients(j) >= 40]
    small = [j for j in todo if n_clients(j) < 40]
    key = lambda j: (j.seed, -n_clients(j))  # noqa: E731
    big.sort(key=key)
    small.sort(key=key)
    out = []
    while big or small:
        for side in (big, small):
            if side:
                out.append(side.pop(0))
    return sorted(out, key=lambda j: j.seed)  # stable: the pairing holds within a seed


def run_and_release(job, out, device):
    """``run_job``, then the worker's cached GPU memory handed back: a pool worker lives on
    after its run, and memory its allocator keeps would be counted twice by the admission."""
    try:
        return run_job(job, out, device)
    finally:
        import torch

        torch.cuda.empty_cache()


def card_memory_gb() -> float:
    q = ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"]
    return float(subprocess.run(q, capture_output=True, text=True).stdout.split()[0]) / 1024


def _collect(flight, todo, tries, per_client, log, t0, say) -> int:
    """Log the finished runs of ``flight``; a failed one goes back to ``todo`` once."""
    done = 0
    for name, (j, res, start) in list(flight.items()):
        if not res.ready():
            continue
        del flight[name]
        _, mean, secs = res.get()
        ok = mean is not None
        row = dict(name=name, n=n_clients(j), start=start, end=time.time() - t0, ok=ok,
                   in_flight=len(flight) + 1, note=None if ok else secs)  # fmt: skip
        log.write(json.dumps(row) + "\n")
        log.flush()
        if ok:
            done += 1
            per_client.append(secs / n_clients(j))
            say(f"done {name}: {mean:.2f}% in {secs:.0f} s ({per_client[-1]:.2f} s/client)")
        else:
            say(f"FAILED {name}: {secs}")
            tries[name] = tries.get(name, 0) + 1
            if tries[name] < 2:
                todo.insert(0, j)
    return done


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grids", nargs="+", required=True)
    p.add_argument("--out", default="results")
    p.add_argument("--workers", type=int, default=13)
    p.add_argument("--deadline", type=float, required=True, help="seconds from now")
    p.add_argument("--memory-gb", type=float, help="GPU memory to fill (default: the card's)")
    p.add_argument("--gb-base", type=float, default=3.5, help="memory estimate: base GB")
    p.add_argument("--gb-per-client", type=float, default=0.29, help="memory estimate per client")
    p.add_argument("--s-per-client", type=float, default=2.0, help="first time estimate")
    p.add_argument("--log", default="runs.jsonl")
    p.add_argument("--device", default="cuda", help="cpu only to try this script out")
    p.add_argument("--norm-limit", type=float, help="every run's norm rule (reproduce's)")
    p.add_argument("--cuda-graphs", action="store_true", default=None, help="local steps as graphs")
    a = p.parse_args(argv)
    t0 = time.time()
    say = lambda msg: print(f"[{time.time() - t0:6.1f} s] {msg}", flush=True)  # noqa: E731
    jobs = with_settings(grid_jobs(a.grids), norm_limit=a.norm_limit,
                         cuda_graphs=a.cuda_graphs)  # fmt: skip
    todo = ordered(pending_jobs(jobs, a.out, a.device, True, lambda m: None))
    budget = (a.memory_gb or card_memory_gb()) * 0.92
    say(f"{len(todo)} runs to do, {a.workers} workers, {budget:.0f} GB to fill")
    mem = lambda j: a.gb_base + a.gb_per_client * n_clients(j)  # noqa: E731
    pool = mp.get_context("spawn").Pool(a.workers, initializer=one_torch_thread)
    flight, per_client, tries, done = {}, [], {}, 0
    with open(a.log, "a") as log:
        while todo or flight:
            rate = sorted(per_client)[len(per_client) // 2] if per_client else a.s_per_client
            left = a.deadline - (time.time() - t0)
            for j in list(todo):
                if len(flight) >= a.workers:
                    break
                if sum(mem(f) for f, _, _ in flight.values()) + mem(j) > budget:
                    continue  # a smaller run may fit the memory left
                if rate * n_clients(j) * 1.1 > left:
                    continue  # cannot finish: a smaller run may
                todo.remove(j)
                res = pool.apply_async(run_and_release, (j, a.out, a.device))
                flight[j.name] = (j, res, time.time() - t0)
                say(f"start {j.name} (N={n_clients(j)}, {len(flight)} in flight)")
            if not flight or left < -60:  # a worker that died leaves its run pending
                say(f"stop: {len(todo)} runs not started, {len(flight)} cut off")
                break
            time.sleep(0.5)
            done += _collect(flight, todo, tries, per_client, log, t0, say)
    pool.terminate()
    say(f"{done} runs written; {len(todo)} left")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())

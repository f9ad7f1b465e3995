"""Ray's price per run against the process pool, on one machine.

    python benchmarks/bench_ray.py                  # 20 quick runs, 2 processes / 2 Ray CPUs
    python benchmarks/bench_ray.py --runs 40 --epochs 5

The same grid (HCCT and Global on the rotated digits at its Table III settings, which are
also the notebooks' quick mode for that task; seeds 0, 1, ...) is run four ways into fresh
folders: ``--workers 1`` (the work itself, one run after another), ``--workers 2`` (two
spawned processes), ``--ray`` (Ray started by the command on this machine's CPUs, each run
a task, each result written by the driver) and ``--ray auto`` (the same on a Ray already
running here, started untimed with ``ray start --head``, as a cluster a user joins). Wall
times include what each way starts (the pool's processes; Ray, its workers and their
imports). "first result at" is mostly that start-up; "s per result after it" is the pace
once running, where a per-run overhead would show. Goal: Ray within 1.2x of ``--workers 2``.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time

from hcct_lite.ray.grid import RayOptions
from hcct_lite.runs.jobs import Job
from hcct_lite.runs.runner import run_jobs


def _jobs(runs: int, epochs: int) -> list:
    schemes = ("hcct", "global")
    return [
        Job(
            "bench",
            f"{schemes[i % 2]}-seed{i // 2}",
            "rotated-digits",
            schemes[i % 2],
            i // 2,
            {"epochs": epochs, "n_clients": 8},
        )
        for i in range(runs)
    ]


def _times(jobs, **how) -> tuple:
    """(wall, seconds to the first stored result, seconds per result after it)."""
    with tempfile.TemporaryDirectory(prefix="hcct-bench-ray-") as out:
        stamps, start = [], time.perf_counter()

        def log(line):
            if line.startswith("done "):
                stamps.append(time.perf_counter() - start)

        assert run_jobs(jobs, out, progress=False, log=log, **how) == len(jobs)
        wall = time.perf_counter() - start
    return wall, stamps[0], (stamps[-1] - stamps[0]) / max(1, len(stamps) - 1)


def _running_cluster(cpus: int):
    """``ray start --head`` on this machine (not timed), as a cluster a user would join."""
    ray = os.path.join(os.path.dirname(sys.executable), "ray")
    subprocess.run(
        [
            ray,
            "start",
            "--head",
            f"--num-cpus={cpus}",
            "--include-dashboard=false",
            "--disable-usage-stats",
        ],
        check=True,
        capture_output=True,
    )
    return lambda: subprocess.run([ray, "stop", "--force"], capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--epochs", type=int, help="default: the task's (Table III)")
    args = parser.parse_args()
    jobs, cpus = _jobs(args.runs, args.epochs), 2
    ways = [
        ("--workers 1", dict(workers=1)),
        ("--workers 2", dict(workers=2)),
        (f"--ray (started by the command, {cpus} CPUs)", dict(ray=RayOptions())),
    ]
    rows = [(name, *_times(jobs, **how)) for name, how in ways]
    stop = _running_cluster(cpus)
    try:
        rows.append(
            (f"--ray auto (a running cluster, {cpus} CPUs)", *_times(jobs, ray=RayOptions("auto")))
        )
    finally:
        stop()
    pool = rows[1][1]
    print(
        f"{args.runs} runs of {args.epochs or 'the task default'} epochs (rotated digits); "
        f"{platform.machine()}, {os.cpu_count()} cores\n"
    )
    print("| way | wall (s) | first result at (s) | s per result after it | against --workers 2 |")
    print("|---|---|---|---|---|")
    for name, wall, first, per in rows:
        print(f"| {name} | {wall:.1f} | {first:.1f} | {per:.2f} | {wall / pool:.2f}x |")


if __name__ == "__main__":
    main()

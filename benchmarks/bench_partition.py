"""Time HCCT's client partition against the paper's algorithm written out directly.

Prints one table row per (N, M): the straightforward algorithm (flattened vectors,
cached benefits; ``tests/naive.py``), ``client_partition`` (Gram matrix + O(N) updates
per merge), their speed-up, and the bare float64 Gram matrix ``U @ U.T`` for scale.
The straightforward algorithm is skipped (``-``) where it would take minutes.

    python benchmarks/bench_partition.py            # the issue's two targets
    python benchmarks/bench_partition.py --quick    # small sizes, seconds
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from naive import naive_partition  # noqa: E402

from hcct_lite.partition import client_partition  # noqa: E402
from hcct_lite.synthetic import clustered_updates  # noqa: E402


def best_of(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def run_case(n, m, naive, repeat, seed=0):
    k = max(2, n // 5)
    cluster_sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
    updates, sizes, _ = clustered_updates(cluster_sizes, m, noise=0.5, seed=seed)
    alpha = 100.0
    t_gram, _ = best_of(lambda: updates @ updates.T, repeat)
    t_fast, p = best_of(lambda: client_partition(updates, sizes, alpha), repeat)
    row = {"N": n, "M": m, "groups": p.n_groups, "gram": t_gram, "fast": t_fast}
    if naive:
        t_naive, (groups, _) = best_of(
            lambda: naive_partition(updates, sizes, np.full(n, alpha)), 1
        )
        row["naive"] = t_naive
        row["same"] = groups == p.groups
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    args = parser.parse_args(argv)
    if args.quick:
        cases = [(20, 10_000, True), (200, 10_000, False)]
    else:
        cases = [(50, 1_000_000, True), (200, 100_000, False), (1000, 100_000, False)]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, numpy {np.__version__}")
    header = f"{'N':>5} {'M':>9} {'groups':>6} {'naive s':>9} {'fast s':>8} {'speed-up':>9}"
    header += f" {'same':>5} {'gram s':>8} {'fast/gram':>9}"
    print(header)
    print("-" * len(header))
    for n, m, naive in cases:
        r = run_case(n, m, naive, args.repeat)
        naive_s = f"{r['naive']:9.3f}" if naive else f"{'-':>9}"
        speed = f"{r['naive'] / r['fast']:8.0f}x" if naive else f"{'-':>9}"
        same = f"{str(r['same']):>5}" if naive else f"{'-':>5}"
        print(
            f"{n:>5} {m:>9} {r['groups']:>6} {naive_s} {r['fast']:8.3f} {speed} {same}"
            f" {r['gram']:8.3f} {r['fast'] / r['gram']:9.2f}"
        )


if __name__ == "__main__":
    main()

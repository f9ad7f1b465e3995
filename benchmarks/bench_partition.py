"""Time HCCT's client partition against the paper's algorithm written out directly.

Prints one table row per (N, M): the straightforward algorithm (flattened vectors,
cached benefits; ``hcct_lite.partition.reference``), ``client_partition`` (Gram matrix +
O(N) updates per merge), their speed-up, and the bare float64 Gram matrix ``U @ U.T`` for scale.
The straightforward algorithm is skipped (``-``) where it would take minutes.

    python benchmarks/bench_partition.py            # N=50, M=1e6 and N=1000, M=1e5
    python benchmarks/bench_partition.py --quick    # small sizes, seconds
"""

from __future__ import annotations

import argparse
import os
import platform

import numpy as np

from hcct_lite.partition.reference import compare_speed


def run_case(n, m, naive, repeat):
    """Best of ``repeat`` timings of the fast path and the Gram matrix; one naive run."""
    rows = [compare_speed(n, m, run_naive=False) for _ in range(repeat - 1)]
    rows.append(compare_speed(n, m, run_naive=naive))
    best = dict(rows[-1])
    best["fast"] = min(r["fast"] for r in rows)
    best["gram"] = min(r["gram"] for r in rows)
    return best


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

"""Which block sizes make each pass of the Triton convolution fastest, against cuDNN's pass.

    python benchmarks/bench_triton_blocks.py --clients 20 --json blocks.json --precompile 14

For each of the paper's seven convolutions (``triton_conv.LAYERS``; the layers with the most
arithmetic in the GPU paper first) and each pass (the output, the input's gradient, the
weight's), k clients at batch 64: the Triton kernel under each candidate block size
(:func:`candidates`: the first guess first), timed by ``triton.testing.do_bench`` (the
card's median milliseconds, the L2 cache cleared before each call), with the weight's
re-layout the training step does in that pass. Then cuDNN's grouped convolution doing that
pass alone (``F.conv2d`` or ``aten.convolution_backward`` with one gradient asked for), the
first guess and the best right setting are timed again, three times each in turn: the
table's times, so the winner of many noisy timings is not the only one timed once. A first
layer's input gradient is skipped: the images need none, so the trainer never computes it.

A setting is right when its result differs from cuDNN's by at most ``--tolerance``, both in
norm and in its worst element, each relative to cuDNN's (bf16 results differ by about 1e-2
from TF32 ones, float32's by 1e-3); one that is wrong, or fails to compile or launch
(shared memory, say), is never chosen. Per pass one row: cuDNN's time, the first guess's,
the best right setting's and its blocks (BM, BN, BK, warps, stages), what it buys over
both, and how many settings were right. ``--json`` (rewritten whole after each pass, so a
run stopped at its limit keeps what it measured) holds every setting's time and a ``best``
list that ``triton_conv.load_tuned`` reads (``bench_batched_kernels.py --triton-blocks``).
The blocks are chosen at one client count and used at any. ``--precompile N`` first runs
every setting once in N processes, so that the sweep loads compiled kernels from Triton's
cache rather than compiling 284 one after another. Needs a CUDA card.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import multiprocessing
import os
import statistics
import time

import torch
from torch.nn import functional as F
from triton_conv import (
    LAYERS,
    PASSES,
    block_size,
    first_guess,
    flipped,
    gemm_shape,
    gemm_weight,
    implicit_gemm,
    torch_weight,
    weight_gemm,
)

NAMES = ["Digit conv1", "Digit conv2", "Digit conv3",
         "CIFAR-10 conv1", "CIFAR-10 conv2", "CIFAR-10 conv3", "CIFAR-10 conv4"]  # fmt: skip
STEPS = [1.04] * 3 + [0.43] * 4  # millions of local steps of each network in the GPU paper
BATCH = 64  # images per client, as the paper trains
DTYPES = {"bf16": torch.bfloat16, "tf32": torch.float32}  # --arithmetic -> the operands' type


def candidates(kind: str, ktot: int, co: int) -> list[tuple[int, int, int, int, int]]:
    """The block sizes tried for pass ``kind`` of a GEMM reducing ``ktot`` into ``co``."""
    first = first_guess(kind, ktot, co)
    if kind == "weight":
        # doubled, but no wider than the problem: a half-empty tile cannot be faster
        bms = sorted({first[0], min(2 * first[0], block_size(ktot))})
        bns = sorted({first[1], min(2 * first[1], block_size(co))})
        grid = [(bm, bn, bk, warps, 3) for bm in bms for bn in bns for bk in (32, 64)
                for warps in (4, 8)]  # fmt: skip
    else:
        grid = [(bm, first[1], bk, warps, stages) for bm in (64, 128, 256) for bk in (32, 64)
                for warps, stages in ((4, 3), (8, 3), (8, 4))]  # fmt: skip
    return [first] + [c for c in grid if c != first]


def layer_candidates(layer) -> list[tuple[str, list[tuple[int, int, int, int, int]]]]:
    """The passes the sweep times for ``layer`` and each one's candidate blocks; a first
    layer's input gradient is left out, as the trainer never computes it."""
    kinds = ("forward", "weight") if layer[0] == 3 else PASSES
    return [(kind, candidates(kind, *gemm_shape(kind, layer))) for kind in kinds]


def out_side(layer) -> int:
    """The side of ``layer``'s (in, out channels, kernel, padding, side) output images."""
    _, _, r, pad, side = layer
    return side + 2 * pad - r + 1


def macs(layer) -> int:
    """``layer``'s multiply-adds per image and client, in one pass."""
    ci, co, r = layer[:3]
    return ci * co * r * r * out_side(layer) ** 2


def operands(layer, g: int, b: int, dtype, device, seed: int = 0) -> dict:
    """Seeded images, weight, bias and output gradient of ``layer`` for ``g`` clients."""
    ci, co, r, pad, side = layer
    ho = out_side(layer)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(b, g * ci, side, side, generator=gen)
    w = torch.randn(g * co, ci, r, r, generator=gen) / (ci * r * r) ** 0.5
    bias = torch.randn(g * co, generator=gen)
    dy = torch.randn(b, g * co, ho, ho, generator=gen)
    x, dy = (t.to(device, dtype).contiguous(memory_format=torch.channels_last) for t in (x, dy))
    w, bias = w.to(device, dtype), bias.to(device, dtype)
    xn, dyn = x.permute(0, 2, 3, 1).contiguous(), dy.permute(0, 2, 3, 1).contiguous()
    return dict(x=x, w=w, bias=bias, dy=dy, xn=xn, dyn=dyn, wg=gemm_weight(w, g), g=g, r=r,
                pad=pad)  # fmt: skip


def reference_pass(kind: str, o: dict):
    """cuDNN's (torch's) result of pass ``kind``, in torch's layout."""
    if kind == "forward":
        return F.conv2d(o["x"], o["w"], o["bias"], 1, o["pad"], 1, o["g"])
    mask = [kind == "input", kind == "weight", False]
    grads = torch.ops.aten.convolution_backward(o["dy"], o["x"], o["w"], None, [1, 1],
                                                [o["pad"]] * 2, [1, 1], False, [0, 0], o["g"],
                                                mask)  # fmt: skip
    return grads[0] if kind == "input" else grads[1]


def triton_pass(kind: str, o: dict, blocks):
    """The Triton kernels' result of pass ``kind`` under ``blocks``, in torch's layout, with
    the weight's re-layout that the training step does in that pass (as cuDNN's has its own)."""
    r, pad = o["r"], o["pad"]
    if kind == "forward":
        w = gemm_weight(o["w"], o["g"])
        return implicit_gemm(o["xn"], w, o["bias"], r, pad, blocks).permute(0, 3, 1, 2)
    if kind == "input":
        w = flipped(o["wg"], r).contiguous()
        return implicit_gemm(o["dyn"], w, None, r, r - 1 - pad, blocks).permute(0, 3, 1, 2)
    dw = weight_gemm(o["xn"], o["dyn"], o["g"], r, pad, blocks)
    return torch_weight(dw, r).to(o["w"].dtype)


def relative_error(got, want) -> float:
    """The larger of ||got - want|| / ||want|| and max|got - want| / max|want|, in float32
    (the second catches a few wrong elements that the norm would average away); inf when the
    shapes differ, want is zero or got holds a NaN."""
    if got.shape != want.shape:
        return math.inf
    diff, want = got.float() - want.float(), want.float()
    den, top = want.norm().item(), want.abs().max().item()
    if not den > 0 or not top > 0:
        return math.inf
    err = max(diff.norm().item() / den, diff.abs().max().item() / top)
    return err if math.isfinite(err) else math.inf


def best(rows: list[dict], tolerance: float) -> dict | None:
    """The fastest row that ran (no ``error``), with finite ``ms`` > 0 and ``diff`` <= tolerance."""

    def right(row):
        ms, diff = row.get("ms"), row.get("diff")
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (ms, diff))
        return (row.get("error") is None and numbers and math.isfinite(ms) and ms > 0
                and diff <= tolerance)  # fmt: skip

    good = [row for row in rows if right(row)]
    return min(good, key=lambda row: row["ms"]) if good else None


def bench(fn) -> float:
    """The card's median milliseconds for ``fn`` (``triton.testing.do_bench``; cold L2)."""
    from triton.testing import do_bench

    return do_bench(fn, warmup=10, rep=40, return_mode="median")


def interleaved(fns: dict, rounds: int = 3) -> dict:
    """Each of ``fns`` timed ``rounds`` times in turn, the median of its medians: the winner of
    many noisy timings looks faster than it is, and timing it again beside the others does not."""
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(bench(fn))
    return {name: statistics.median(t) for name, t in times.items()}


@functools.lru_cache(maxsize=8)
def _worker_operands(layer, arith: str, clients: int, batch: int) -> dict:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return operands(layer, clients, batch, DTYPES[arith], device)


def _warm(task) -> str | None:
    """Run one setting once, so that Triton compiles it into its cache; its error, or None."""
    layer, kind, blocks, arith, clients, batch = task
    try:
        triton_pass(kind, _worker_operands(tuple(layer), arith, clients, batch), tuple(blocks))
    except Exception as e:  # noqa: BLE001 - the sweep meets it again and records it per setting
        return f"{type(e).__name__}: {str(e)[:200]}"
    return None


def sweep_tasks(arithmetics, clients: int, batch: int = BATCH) -> list[tuple]:
    """Every (layer, pass, blocks, arithmetic, clients, batch) the sweep times, in its order."""
    return [(LAYERS[i], kind, blocks, arith, clients, batch) for arith in arithmetics
            for i in order() for kind, settings in layer_candidates(LAYERS[i])
            for blocks in settings]  # fmt: skip


def precompile(tasks, workers: int, timeout: float = 150.0) -> list[str | None]:
    """Each task run once in a pool of ``workers`` fresh processes, one error (or None) each.

    Compiling is most of a setting's time in the sweep, one after another; run in parallel
    first, the kernels land in Triton's on-disk cache, from which the sweep's own process
    loads them (the same source, shapes and options give the same cache key). Past
    ``timeout`` seconds (a pool whose workers die at start waits forever) it raises
    ``multiprocessing.TimeoutError`` and the pool is ended.
    """
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        return pool.map_async(_warm, tasks, chunksize=1).get(timeout)


def sweep_pass(kind: str, settings, o: dict, tolerance: float) -> tuple[list[dict], dict]:
    """One row per block size in ``settings`` for pass ``kind``; then cuDNN, the first (the
    first guess) and the best right one timed again, interleaved (keys cudnn, first, best)."""
    want, rows = reference_pass(kind, o), []
    for blocks in settings:
        row = dict(blocks=list(blocks), ms=None, diff=None, error=None)
        try:
            row["diff"] = relative_error(triton_pass(kind, o, blocks), want)
            row["ms"] = bench(lambda b=blocks: triton_pass(kind, o, b))
        except Exception as e:  # noqa: BLE001 - a setting that cannot run is a result, not the end
            row["error"] = f"{type(e).__name__}: {str(e)[:200]}"
        rows.append(row)
    fns = {"cudnn": lambda: reference_pass(kind, o)}
    for name, row in (("first", best(rows[:1], tolerance)), ("best", best(rows, tolerance))):
        if row is not None:
            fns[name] = lambda b=tuple(row["blocks"]): triton_pass(kind, o, b)
    return rows, interleaved(fns)


def summary(name: str, kind: str, arith: str, rows: list[dict], timed: dict, flop: float,
            tolerance: float) -> tuple[str, dict | None]:  # fmt: skip
    """The table's row for one pass (the times of :func:`interleaved`), and its best row."""
    top, right = best(rows, tolerance), sum(best([row], tolerance) is not None for row in rows)
    first = f"{timed['first']:.3f}" if "first" in timed else rows[0]["error"] or "wrong"
    head = f"| {name} | {kind} | {arith} | {timed['cudnn']:.3f} | {first} | "
    if top is None:
        return head + f"none right | | | | | 0 / {len(rows)} |", None
    ms = timed["best"]
    gain = f"{timed['first'] / ms:.2f}x" if "first" in timed else "no right first guess"
    return (head + f"{ms:.3f} | {tuple(top['blocks'])} | {timed['cudnn'] / ms:.2f}x | {gain} | "
            f"{flop / ms / 1e9:.1f} | {right} / {len(rows)} |"), top  # fmt: skip


def order() -> list[int]:
    """The layers, most arithmetic in the GPU paper first."""
    return sorted(range(len(LAYERS)), key=lambda i: -macs(LAYERS[i]) * STEPS[i])


def warm(tasks, workers: int) -> None:
    """:func:`precompile`, saying what it did; if the pool itself fails, the sweep compiles
    as it goes, as without it (nothing it measures depends on the pool)."""
    start = time.perf_counter()
    try:
        errors = precompile(tasks, workers)
    except Exception as e:  # noqa: BLE001 - printed; the sweep then compiles each setting itself
        print(f"precompiling failed ({type(e).__name__}: {e}); the sweep compiles as it goes")
        return
    failed = sum(e is not None for e in errors)
    print(
        f"precompiled {len(tasks)} settings in {time.perf_counter() - start:.0f} s in {workers} "
        f"processes; {failed} failed (each one is tried and recorded again in the sweep)"
    )


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, default=20, help="k clients per convolution")
    p.add_argument("--arithmetic", nargs="+", default=["bf16"], choices=DTYPES)
    p.add_argument("--seconds", type=float, default=math.inf, help="start no pass after this")
    p.add_argument("--tolerance", type=float, help="default: 3e-2 bf16, 5e-3 tf32")
    p.add_argument("--json", help="write every setting's time and the best here")
    p.add_argument(
        "--precompile",
        type=int,
        default=0,
        metavar="PROCESSES",
        help="compile every setting first in this many processes (0: as it goes)",
    )
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("bench_triton_blocks.py needs a CUDA card: Triton compiles for one")
    if a.clients < 1 or a.precompile < 0:
        raise SystemExit(f"--clients must be >= 1 and --precompile >= 0, not {a.clients} and "
                         f"{a.precompile}")  # fmt: skip
    t0, out = time.perf_counter(), dict(clients=a.clients, batch=BATCH, rows=[], best=[])
    if a.precompile:
        warm(sweep_tasks(a.arithmetic, a.clients), a.precompile)
    print(
        "| layer | pass | arithmetic | cuDNN ms | first guess ms | best ms | best blocks "
        "| vs cuDNN | vs first guess | TFLOP/s | right / tried |\n" + "|---" * 11 + "|"
    )
    for arith in a.arithmetic:
        tol = a.tolerance or (3e-2 if arith == "bf16" else 5e-3)
        for i in order():
            layer = LAYERS[i]
            ci, co, r = layer[:3]
            o = operands(layer, a.clients, BATCH, DTYPES[arith], "cuda")
            flop = 2 * BATCH * a.clients * macs(layer)
            for kind, settings in layer_candidates(layer):
                if time.perf_counter() - t0 > a.seconds:
                    print(f"not swept: {NAMES[i]} {kind} {arith} (--seconds {a.seconds:g} spent)")
                    continue
                rows, timed = sweep_pass(kind, settings, o, tol)
                line, top = summary(NAMES[i], kind, arith, rows, timed, flop, tol)
                print(line, flush=True)
                key = dict(layer=NAMES[i], ci=ci, co=co, r=r, arithmetic=arith, **{"pass": kind})
                out["rows"].append(dict(key, timed=timed, settings=rows))
                if top is not None:
                    out["best"].append(dict(key, blocks=top["blocks"], timed=timed))
                if a.json:  # whole or not at all: the sweep may be stopped at its limit
                    with open(a.json + ".part", "w") as f:
                        json.dump(out, f, indent=1)
                    os.replace(a.json + ".part", a.json)
    print(f"done after {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

"""What one local SGD step costs the GPU itself, in float32 and in cheaper number formats.

    python benchmarks/bench_step_kernels.py

A step (forward, loss, backward, SGD update) of the paper's Digit and CIFAR-10 networks at
batch 64 is recorded as a CUDA graph and replayed 200 times, timed with CUDA events: with
the launches gone, this is the card's time per step, which bounds how many steps per second
the card gives when processes share it. Prints one row per network and format:

- ``float32``: as the library trains (cuDNN's convolutions in TF32, PyTorch's default);
- ``+ TF32 products``: the fully connected layers' matrix products in TF32 too;
- ``bf16 autocast``: forward and backward in bfloat16 where PyTorch's autocast allows it;
- ``bf16 + channels_last``: the same with the images and convolutions in NHWC layout.

Only the first row is the library's arithmetic; the others would change the numbers a run
computes (the issue's rule: a faster format must keep the results' conclusions). Random
inputs and labels; nothing is written.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

from hcct_lite.training.models import build_model

FORMATS = ("float32", "+ TF32 products", "bf16 autocast", "bf16 + channels_last")


def step_ms(name: str, shape: tuple, fmt: str, batch: int, replays: int) -> float:
    """Milliseconds of card time per replayed step of network ``name`` in format ``fmt``."""
    torch.backends.cuda.matmul.allow_tf32 = fmt != "float32"
    torch.manual_seed(0)
    layout = torch.channels_last if "channels_last" in fmt else torch.contiguous_format
    model = build_model(name).cuda().to(memory_format=layout).train()
    params = [p for p in model.parameters()]
    x = torch.randn(batch, *shape, device="cuda").to(memory_format=layout)
    y = torch.randint(0, 10, (batch,), device="cuda")
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled="bf16" in fmt)

    def step():
        for p in params:  # each step's gradients anew (in the graph's memory once recorded)
            p.grad = None
        with autocast:
            loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        with torch.no_grad():
            torch._foreach_add_(params, [p.grad for p in params], alpha=-0.01)

    return graph_ms(step, replays)


def graph_ms(step, replays: int, warmups: int = 3) -> float:
    """Card milliseconds per call of ``step``, recorded as one CUDA graph and replayed.

    ``warmups`` calls on a side stream first (cuDNN's and the allocator's choices made),
    then the recording, 10 replays untimed and ``replays`` timed by CUDA events.
    """
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmups):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    for _ in range(10):
        graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / replays


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--replays", type=int, default=200)
    a = p.parse_args(argv)
    print(f"{torch.cuda.get_device_name()}, batch {a.batch}, {a.replays} replays")
    print("| network | format | ms per step | steps per s | vs float32 |")
    print("|---|---|---|---|---|")
    for name, shape in (("digit_cnn", (3, 28, 28)), ("cifar_cnn", (3, 32, 32))):
        base = None
        for fmt in FORMATS:
            ms = step_ms(name, shape, fmt, a.batch, a.replays)
            base = base or ms
            print(f"| {name} | {fmt} | {ms:.3f} | {1000 / ms:.0f} | {base / ms:.2f}x |", flush=True)


if __name__ == "__main__":
    main()

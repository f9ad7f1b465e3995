"""What one step of every client at once costs the card, by how its layers are computed.

    python benchmarks/bench_batched_kernels.py --json kernels.json --profile profile.txt

One local SGD step of k clients together, as ``--batched-clients`` trains them (the
stacked network's forward pass, each client's mean cross-entropy, the backward pass, plain
SGD), of the paper's Digit and CIFAR-10 networks, batch 64 per client, random data. Each
variant is timed two ways: ``eager`` (wall time per step, the device synchronised: what the
library runs) and ``graph`` (the step recorded as one CUDA graph and replayed: the card's
own time, launches gone, which a graph of the batched step would buy). Variants:

- ``grouped``: the library's layers (a convolution of k clients one grouped convolution),
  float32 with cuDNN's convolutions in TF32, torch's default;
- ``grouped, TF32``: the library's ``gpu_precision`` tf32 (TF32 matrix products too);
- ``grouped, benchmark``: float32, cuDNN timing its algorithms per shape
  (``torch.backends.cudnn.benchmark``);
- ``grouped, channels_last``: float32 in NHWC layout, with the benchmark;
- ``grouped, bf16``: the library's ``gpu_precision`` bf16 (autocast, channels_last),
  without and with the benchmark;
- ``grouped, input-first products`` and ``grouped, bf16, input-first products``: as
  ``grouped`` and ``grouped, bf16``, each fully connected layer computed as X W^T
  (:class:`InputFirstLinear`, the library's stacked layer before ``BATCHED_VERSION`` 2),
  whose weight's gradient comes transposed, so that the SGD update leaves
  ``torch._foreach_add_``'s fast path and runs tensor by tensor (the library's W X^T gives
  the gradient in the weight's layout);
- ``triton`` and ``triton, bf16``: a convolution of k clients as one Triton kernel per
  pass (``triton_conv.py``: a grouped implicit GEMM with a client axis in its grid), in
  TF32 (the default's convolution arithmetic) or bf16, the images channels_last (only
  when ``--variants`` names them), with the block sizes of ``--triton-blocks`` (a
  ``bench_triton_blocks.py --json``) where it has them, else the kernels' first guess;
- ``unfold, TF32`` and ``unfold, bf16``: a convolution of k clients as im2col
  (``F.unfold``) and one batched matrix product over the clients, TF32 or bf16;
- ``grouped, compiled`` (only when ``--variants`` names it, as it compiles first):
  the forward pass through ``torch.compile``, with cuDNN's benchmark mode.

Per row: milliseconds per step both ways, steps per second (k batch-64 steps per step),
useful TFLOP/s (FlopCounterMode's count of one client's step, times k) and the fraction of
the card's dense rate (an 8192-cube product here, TF32's or bf16's), the peak memory, and
``diff``: the largest difference of the variant's logits from ``grouped``'s on the same
weights and images in eval mode, relative to the largest logit (the same forward pass in
other arithmetic; a large value is a bug; backward passes are not compared). Nothing is
written but ``--json`` and ``--profile``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time

import torch
from bench_step_kernels import graph_ms
from torch import nn
from torch.func import functional_call
from torch.nn import functional as F

from hcct_lite.training.models import (
    MODEL_INPUT,
    build_model,
    call_tensor,
    stacked_layouts,
    stacked_network,
)

VARIANTS = {  # name -> (layers, number format, channels_last, cuDNN benchmark)
    "grouped": ("grouped", "float32", False, False),
    "grouped, TF32": ("grouped", "tf32", False, False),
    "grouped, benchmark": ("grouped", "float32", False, True),
    "grouped, channels_last": ("grouped", "float32", True, True),
    "grouped, bf16": ("grouped", "bf16", True, False),
    "grouped, bf16, benchmark": ("grouped", "bf16", True, True),
    "grouped, input-first products": ("input-first", "float32", False, False),
    "grouped, bf16, input-first products": ("input-first", "bf16", True, False),
    "triton": ("triton", "float32", True, False),
    "triton, bf16": ("triton", "bf16", True, False),
    "unfold, TF32": ("unfold", "tf32", False, False),
    "unfold, bf16": ("unfold", "bf16", False, False),
    "grouped, compiled": ("grouped", "float32", False, True),
}
NETWORKS = ("digit_cnn", "cifar_cnn")


class UnfoldConv2d(nn.Conv2d):
    """k clients' convolutions as im2col and one batched product over the clients.

    Input (B, k*C, H, W) and weight (k*C_out, C, kh, kw), as the library's stacked
    convolution; output (B, k*C_out, H', W').
    """

    def forward(self, x):
        k, b = self.weight.shape[0] // self.out_channels, x.shape[0]
        cols = F.unfold(x, self.kernel_size, self.dilation, self.padding, self.stride)
        ck, length = cols.shape[1] // k, cols.shape[2]
        cols = cols.view(b, k, ck, length).permute(1, 2, 0, 3).reshape(k, ck, b * length)
        w = self.weight.view(k, self.out_channels, ck)
        out = torch.bmm(w, cols) if self.bias is None else torch.baddbmm(
            self.bias.view(k, self.out_channels, 1), w, cols)  # fmt: skip
        geometry = zip(x.shape[2:], self.padding, self.dilation, self.kernel_size, self.stride,
                       strict=True)  # fmt: skip
        side = [(n + 2 * p - d * (q - 1) - 1) // s + 1 for n, p, d, q, s in geometry]
        out = out.view(k, self.out_channels, b, *side).permute(2, 0, 1, 3, 4)
        return out.reshape(b, k * self.out_channels, *side)


class InputFirstLinear(nn.Linear):
    """k clients' fully connected layers as X W^T; weight (k, out, in), bias (k, out).

    Input (B, k*in) -> output (B, k*out), as the library's stacked layer.
    """

    def forward(self, x):
        k, b = self.weight.shape[0], x.shape[0]
        xs = x.reshape(b, k, self.in_features).transpose(0, 1)  # (k, B, in)
        wt = self.weight.transpose(1, 2)
        out = torch.bmm(xs, wt) if self.bias is None else torch.baddbmm(
            self.bias[:, None], xs, wt)  # fmt: skip
        return out.transpose(0, 1).reshape(b, k * self.out_features)


def stacked(name: str, k: int, device, layers: str):
    """The stacked network of ``name`` for ``k`` clients, its weights (leaves) and params."""
    torch.manual_seed(0)
    model = build_model(name)
    net = stacked_network(model).to(device)
    swap = {"unfold": (nn.Conv2d, UnfoldConv2d), "input-first": (nn.Linear, InputFirstLinear)}
    if layers == "triton":  # imported here: Triton is needed by this variant alone
        from triton_conv import TritonConv2d

        swap["triton"] = (nn.Conv2d, TritonConv2d)
    if layers in swap:
        kind, cls = swap[layers]
        for m in net.modules():
            if isinstance(m, kind):
                m.__class__ = cls
    rows, state = stacked_layouts(model), model.state_dict()
    gen = torch.Generator().manual_seed(1)
    tensors = {}
    for n, t in state.items():
        if t.is_floating_point():  # clients differ a little, as after a few epochs
            s = torch.stack([t + 0.01 * t.std() * torch.randn(t.shape, generator=gen)
                             if t.numel() > 1 else t for _ in range(k)])  # fmt: skip
            tensors[n] = call_tensor(s, rows[n]).clone().to(device)
    params = [tensors[n].requires_grad_() for n, _ in model.named_parameters()]
    return net, tensors, params


def batch(name: str, k: int, device, channels_last: bool, b: int = 64):
    """Random images (b, k*C, side, side) and labels (b, k), seeded."""
    side, ch = MODEL_INPUT[name]
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(b, k * ch, side, side, generator=gen).to(device)
    y = torch.randint(0, 10, (b, k), generator=gen).to(device)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    return x, y


@contextlib.contextmanager
def arithmetic(variant: str, device):
    """The number format and cuDNN mode of ``variant`` (:data:`VARIANTS`), restored after."""
    _, fmt, _, benchmark = VARIANTS[variant]
    cuda = torch.device(device).type == "cuda"
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.benchmark
    torch.backends.cuda.matmul.allow_tf32 = fmt == "tf32"
    torch.backends.cudnn.benchmark = benchmark
    cast = None  # no cache of cast weights: a graph records every cast, as each library step does
    if fmt == "bf16" and cuda:
        cast = torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False)
    try:
        with cast or contextlib.nullcontext():
            yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.benchmark = before


def step_fn(forward, tensors, params, x, y, k: int):
    """One SGD step of the k clients (their summed mean losses' gradients, lr 0.01)."""

    def step():
        logits = forward(tensors, x).float().view(x.shape[0], k, -1)
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none")
        grads = torch.autograd.grad(loss.view(x.shape[0], k).mean(0).sum(), params)
        with torch.no_grad():
            torch._foreach_add_(params, list(grads), alpha=-0.01)

    return step


def eager_ms(step, device, steps: int) -> float:
    """Wall milliseconds per step, after three warm-up steps, the device synchronised."""
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    for _ in range(3):
        step()
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return (time.perf_counter() - start) * 1000 / steps


def prepare(name: str, k: int, variant: str, device):
    """The step of ``variant`` for ``k`` clients of ``name``, and its logits before any step."""
    layers, fmt, channels_last, _ = VARIANTS[variant]
    net, tensors, params = stacked(name, k, device, layers)
    x, y = batch(name, k, device, channels_last)

    def forward(t, xb):
        return functional_call(net, t, (xb,))

    if variant.endswith("compiled"):
        forward = torch.compile(forward)
    net.eval()  # no dropout draws, no batch-norm updates: the same function for every variant
    with torch.no_grad():
        logits = forward(tensors, x).float()
    net.train()
    return step_fn(forward, tensors, params, x, y, k), logits


def measure(name: str, k: int, variant: str, device, a, ref) -> dict:
    """One row: ms per step eager and replayed, peak GiB, logits' difference from ``ref``."""
    cuda = torch.device(device).type == "cuda"
    row = dict(network=name, clients=k, variant=variant)
    try:
        with arithmetic(variant, device):
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            step, logits = prepare(name, k, variant, device)
            row["diff"] = float((logits - ref).abs().max() / ref.abs().max())
            row["eager_ms"] = eager_ms(step, device, a.steps)
            row["graph_ms"] = graph_ms(step, a.replays, warmups=1) if cuda else None
            row["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
    except Exception as e:  # noqa: BLE001 - one variant failing must not end the others' timing
        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    if cuda:
        torch.cuda.empty_cache()
    return row


def profile(name: str, k: int, variant: str, device, path: str) -> None:
    """Append the card's time by kernel over 5 eager steps of ``variant`` to ``path``."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with arithmetic(variant, device):
        step, _ = prepare(name, k, variant, device)
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                step()
            torch.cuda.synchronize()
    table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=15)
    with open(path, "a") as f:
        f.write(f"{name}, {k} clients, {variant}: 5 steps\n{table}\n")


def show(row: dict, flops: float, dense: dict) -> str:
    """The Markdown row of ``row``: the card's rates from the faster of its two timings."""
    head = f"| {row['network']} | {row['clients']} | {row['variant']} |"
    if "error" in row:
        return f"{head} failed: {row['error']} | | | | | | |"
    best = min(t for t in (row["eager_ms"], row["graph_ms"]) if t is not None)
    steps = row["clients"] * 1000 / best
    tflops = steps * flops / 1e12
    rate = dense.get("bf16" if "bf16" in row["variant"] else "tf32")
    row.update(steps_per_s=steps, tflops=tflops, of_dense=tflops / rate if rate else None)
    graph = "-" if row["graph_ms"] is None else f"{row['graph_ms']:.2f}"
    of_dense = "-" if rate is None else f"{tflops / rate:.1%}"
    peak = "-" if row["peak_gib"] is None else f"{row['peak_gib']:.1f}"
    return (f"{head} {row['eager_ms']:.2f} | {graph} | {steps:,.0f} | {tflops:.1f} | {of_dense} "
            f"| {peak} | {row['diff']:.1e} |")  # fmt: skip


def main(argv=None) -> None:
    from bench_batched_steps import dense_rate, step_flops

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--networks", nargs="+", default=list(NETWORKS), choices=NETWORKS)
    p.add_argument("--clients", nargs="+", type=int, default=[20, 80], help="k per step")
    p.add_argument("--variants", nargs="+", choices=VARIANTS,
                   default=[v for v in VARIANTS if not v.endswith("compiled")
                            and not v.startswith("triton")])  # fmt: skip
    p.add_argument("--steps", type=int, default=20, help="eager steps timed")
    p.add_argument("--replays", type=int, default=50, help="graph replays timed")
    p.add_argument("--device", default="cuda", help="cpu: eager timings only, a smoke run")
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--profile", help="append the kernels of Digit's --profile-variants here")
    p.add_argument("--profile-variants", nargs="+", choices=VARIANTS,
                   default=["grouped", "grouped, bf16"])  # fmt: skip
    p.add_argument("--triton-blocks", help="the Triton kernels' tuned block sizes (a sweep's "
                   "--json)")  # fmt: skip
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    cuda = torch.device(a.device).type == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit(f"--device {a.device} needs a CUDA card; --device cpu is a smoke run")
    if a.triton_blocks:
        from triton_conv import load_tuned

        try:
            print(f"Triton blocks: {load_tuned(a.triton_blocks)} passes tuned ({a.triton_blocks})")
        except (OSError, ValueError) as e:
            raise SystemExit(f"--triton-blocks: {e}") from e
    dense = {}
    if cuda:
        dense = {"tf32": dense_rate(torch.float32, True), "bf16": dense_rate(torch.bfloat16, False)}
        print(f"card: {torch.cuda.get_device_name()}; dense products: TF32 {dense['tf32']:.0f}, "
              f"bf16 {dense['bf16']:.0f} TFLOP/s")  # fmt: skip
    print("| network | k | variant | eager ms | graph ms | steps per s | TFLOP/s | of dense "
          "| peak GiB | diff |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for name in a.networks:
        flops = step_flops(name, a.device)
        for k in a.clients:
            _, ref = prepare(name, k, "grouped", a.device)
            for variant in a.variants:
                rows.append(measure(name, k, variant, a.device, a, ref))
                print(show(rows[-1], flops, dense), flush=True)
                if a.json:  # after each row: a run stopped at its limit keeps what it measured
                    with open(a.json, "w") as f:
                        json.dump(dict(dense=dense, steps=a.steps, replays=a.replays, rows=rows), f,
                              indent=1)  # fmt: skip
    if a.profile and cuda:
        for variant in a.profile_variants:
            try:  # a variant failing here must not hide the others' profiles
                profile("digit_cnn", a.clients[0], variant, a.device, a.profile)
            except Exception as e:  # noqa: BLE001
                print(f"profile of {variant} failed: {type(e).__name__}: {e}", flush=True)


if __name__ == "__main__":
    main()

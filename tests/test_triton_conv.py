"""The benchmark's Triton convolution of many clients computes what torch's grouped one does.

Without a card the kernels run in Triton's interpreter (``TRITON_INTERPRET=1``, which must
be set before the kernels are defined and while they run: hence a fresh process), in
float32 only (the interpreter's bf16 products are wrong); the tests marked ``gpu`` check
them compiled, in TF32 and bf16, on the paper's layers (CI has no GPU).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("triton")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from triton_conv import LAYERS, TritonConv2d, grouped_conv2d, reference  # noqa: E402

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

# clients g, in and out channels per client, kernel r, padding, side, batch, bias, NHWC input
CASES = [
    (2, 3, 5, 5, 2, 6, 2, True, False),  # the Digit network's first layer, in small
    (3, 4, 16, 3, 1, 5, 3, True, True),
    (1, 2, 3, 3, 0, 4, 1, False, False),  # one client, no padding, no bias
    (2, 2, 4, 3, 1, 24, 4, True, True),  # 2,304 pixels: the weight's gradient split in 3
]

_CHECK = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
from triton_conv import grouped_conv2d, reference
out = []
for g, ci, co, r, pad, side, b, has_bias, nhwc in json.loads(sys.argv[2]):
    gen = torch.Generator().manual_seed(len(out))
    x = torch.randn(b, g * ci, side, side, generator=gen)
    if nhwc:
        x = x.contiguous(memory_format=torch.channels_last)
    w = torch.randn(g * co, ci, r, r, generator=gen)
    bias = torch.randn(g * co, generator=gen) if has_bias else None
    leaves = [t.requires_grad_() for t in (x, w, bias) if t is not None]
    y, ref = grouped_conv2d(x, w, bias, g, pad), reference(x, w, bias, g, pad)
    dy = torch.randn(ref.shape, generator=gen)
    got = torch.autograd.grad(y, leaves, dy)
    want = torch.autograd.grad(ref, leaves, dy)
    out.append([float((a - e).abs().max() / e.abs().max())
                for a, e in zip((y, *got), (ref, *want))] + [list(y.shape) == list(ref.shape)])
print(json.dumps(out))
"""


def interpreted(script: str, payload, timeout: int = 600):
    """What ``script`` prints as JSON, run in Triton's interpreter with ``payload`` as argv[2]."""
    env = dict(os.environ, TRITON_INTERPRET="1", OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", script, str(ROOT / "benchmarks"),
                           json.dumps(payload)], env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_the_triton_convolution_and_its_gradients_are_torchs_grouped_one():
    rows = interpreted(_CHECK, CASES)
    assert len(rows) == len(CASES)
    for case, row in zip(CASES, rows, strict=True):
        *diffs, same_shape = row
        assert same_shape, case
        assert len(diffs) == (4 if case[7] else 3)  # output, then each leaf's gradient
        assert max(diffs) < 1e-5, (case, diffs)  # float32 on the CPU: rounding alone


@pytest.mark.parametrize(
    "x, w, groups, message",
    [
        (torch.zeros(1, 4, 5, 5), torch.zeros(4, 2, 3, 1), 2, "only square kernels"),
        (torch.zeros(1, 5, 5, 5), torch.zeros(4, 2, 3, 3), 2, "are not 2 groups"),
        (torch.zeros(1, 4, 5, 5), torch.zeros(5, 2, 3, 3), 2, "are not 2 groups"),
    ],
)
def test_shapes_that_are_not_clients_convolutions_are_refused_by_shape(x, w, groups, message):
    with pytest.raises(ValueError, match=message):
        grouped_conv2d(x, w, None, groups, 1)


def test_images_and_weights_of_two_types_are_refused_naming_both():
    with pytest.raises(ValueError, match="x is torch.float64 and weight torch.float32"):
        grouped_conv2d(torch.zeros(1, 4, 5, 5, dtype=torch.float64), torch.zeros(4, 2, 3, 3),
                       None, 2, 1)  # fmt: skip


@pytest.mark.parametrize(
    "kw, message",
    [({"stride": 2}, "stride 1"), ({"dilation": 2}, "no dilation"), ({"groups": 2}, "one group"),
     ({"padding": (1, 0)}, "equal padding"), ({"padding": "same"}, "equal padding")],
)  # fmt: skip
def test_a_layer_the_kernels_cannot_compute_is_refused(kw, message):
    layer = TritonConv2d(4, 4, 3, **kw)
    with pytest.raises(ValueError, match=message):
        layer(torch.zeros(1, 4, 6, 6))


@gpu
@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("dtype, tol", [(torch.float32, 5e-3), (torch.bfloat16, 3e-2)])
def test_on_a_gpu_the_compiled_kernels_are_cudnns_convolution_to_rounding(layer, dtype, tol):
    ci, co, r, pad, side = layer
    g = 20 if layer == LAYERS[1] else 4  # one layer at the paper's 20 clients, the others 4
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(64, g * ci, side, side, generator=gen).cuda()
    x = x.contiguous(memory_format=torch.channels_last).requires_grad_()
    w = (torch.randn(g * co, ci, r, r, generator=gen) / (ci * r * r) ** 0.5).cuda()
    bias = torch.randn(g * co, generator=gen).cuda()
    w, bias = w.requires_grad_(), bias.requires_grad_()
    dy = torch.randn(64, g * co, side, side, generator=gen).cuda()
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        y = grouped_conv2d(x, w, bias, g, pad)
        ref = reference(x, w, bias, g, pad)
    got = torch.autograd.grad(y.float(), (x, w, bias), dy)
    want = torch.autograd.grad(ref.float(), (x, w, bias), dy)
    for name, a, e in zip(("output", "x", "weight", "bias"), (y, *got), (ref, *want),
                          strict=True):  # fmt: skip
        assert a.dtype == e.dtype, name
        assert ((a.float() - e.float()).norm() / e.float().norm()).item() < tol, name

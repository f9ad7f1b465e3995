"""k clients' convolutions as one Triton kernel per pass: a grouped implicit GEMM.

cuDNN runs a grouped convolution of k clients as k (or 2k) kernels per pass
(``results/README.md``, "Where a batched step's time goes"). Here each pass is one launch
whose grid has a client axis: the forward pass and the input's gradient are implicit GEMMs
(rows: the batch's pixels, columns: a client's output channels, reduction: kernel offsets
times input channels, gathered from the NHWC images without an im2col copy); the weight's
gradient is the transposed GEMM, its long reduction over pixels split across programs and
summed after. Stride 1, no dilation, zero padding, one group per client: the paper's
networks. Products in TF32 for float32 tensors (as cuDNN's convolutions by default) and in
bf16 with float32 sums under autocast. With ``TRITON_INTERPRET=1`` the kernels run on the
CPU (slowly), which is how the tests check them without a card.
"""

from __future__ import annotations

import json

import torch
import triton
import triton.language as tl
from torch import nn
from torch.nn import functional as F


@triton.jit
def _conv_fwd(x_ptr, w_ptr, b_ptr, y_ptr, M, H, W, HO, WO, CIN_ALL, COUT_ALL, CI, CO, KTOT, PAD,
              R: tl.constexpr, S: tl.constexpr, HAS_BIAS: tl.constexpr, TF32: tl.constexpr,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):  # fmt: skip
    """y[m, g*CO + n] = sum_k x[pixel(m) + offset(k), g*CI + ci(k)] * w[g, k, n] (+ b)."""
    pid_m, pid_n, g = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    m = pid_m * BM + tl.arange(0, BM)
    n = pid_n * BN + tl.arange(0, BN)
    wo = m % WO
    ho = (m // WO) % HO
    bb = (m // WO // HO).to(tl.int64)
    m_ok, n_ok = m < M, n < CO
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, KTOT, BK):
        k = k0 + tl.arange(0, BK)
        ci, rs = k % CI, k // CI
        ih = ho[:, None] + (rs // S)[None, :] - PAD
        iw = wo[:, None] + (rs % S)[None, :] - PAD
        ok = m_ok[:, None] & (k < KTOT)[None, :] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        a = tl.load(x_ptr + ((bb[:, None] * H + ih) * W + iw) * CIN_ALL + g * CI + ci[None, :],
                    mask=ok, other=0.0)  # fmt: skip
        wk = (g * KTOT + k).to(tl.int64)
        b = tl.load(w_ptr + wk[:, None] * CO + n[None, :],
                    mask=(k < KTOT)[:, None] & n_ok[None, :], other=0.0)  # fmt: skip
        if TF32:
            acc += tl.dot(a, b, input_precision="tf32")
        else:
            acc += tl.dot(a, b)
    if HAS_BIAS:
        acc += tl.load(b_ptr + g * CO + n, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    out = y_ptr + m.to(tl.int64)[:, None] * COUT_ALL + g * CO + n[None, :]
    tl.store(out, acc.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


@triton.jit
def _conv_wgrad(x_ptr, dy_ptr, dw_ptr, M, H, W, HO, WO, CIN_ALL, COUT_ALL, CI, CO, KTOT, PAD,
                CHUNK, GROUPS, R: tl.constexpr, S: tl.constexpr, TF32: tl.constexpr,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):  # fmt: skip
    """dw[split, g, k, n] = sum over this split's pixels m of x[...](m, k) * dy[m, g*CO + n]."""
    pid_k, pid_n, pid_z = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    g, split = pid_z % GROUPS, pid_z // GROUPS
    k = pid_k * BM + tl.arange(0, BM)
    n = pid_n * BN + tl.arange(0, BN)
    ci, rs = k % CI, k // CI
    k_ok, n_ok = k < KTOT, n < CO
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    start = split * CHUNK
    for m0 in range(start, start + CHUNK, BK):
        m = m0 + tl.arange(0, BK)
        m_ok = (m < M) & (m < start + CHUNK)
        wo = m % WO
        ho = (m // WO) % HO
        bb = (m // WO // HO).to(tl.int64)
        ih = (rs // S)[:, None] + ho[None, :] - PAD
        iw = (rs % S)[:, None] + wo[None, :] - PAD
        ok = k_ok[:, None] & m_ok[None, :] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        a = tl.load(x_ptr + ((bb[None, :] * H + ih) * W + iw) * CIN_ALL + g * CI + ci[:, None],
                    mask=ok, other=0.0)  # fmt: skip
        b = tl.load(dy_ptr + m.to(tl.int64)[:, None] * COUT_ALL + g * CO + n[None, :],
                    mask=m_ok[:, None] & n_ok[None, :], other=0.0)  # fmt: skip
        if TF32:
            acc += tl.dot(a, b, input_precision="tf32")
        else:
            acc += tl.dot(a, b)
    out = dw_ptr + ((split * GROUPS + g) * KTOT + k).to(tl.int64)[:, None] * CO + n[None, :]
    tl.store(out, acc, mask=k_ok[:, None] & n_ok[None, :])


def block_size(n: int, low: int = 16, high: int = 128) -> int:
    """The smallest power of two from ``low`` to ``high`` that holds ``n`` rows or columns."""
    return max(low, min(high, triton.next_power_of_2(n)))


# the paper's convolutions (in and out channels, kernel, padding, side), Digit's then CIFAR-10's
LAYERS = [(3, 64, 5, 2, 28), (64, 64, 5, 2, 14), (64, 128, 5, 2, 7),
          (3, 16, 3, 1, 32), (16, 32, 3, 1, 32), (32, 64, 3, 1, 16),
          (64, 128, 3, 1, 8)]  # fmt: skip
PASSES = ("forward", "input", "weight")  # the output, the input's gradient, the weight's
# (pass, in channels, out channels, kernel side, "tf32" or "bf16") of a layer -> its blocks
# (BM, BN, BK, warps, stages), as benchmarks/bench_triton_blocks.py found fastest on a card;
# a layer not in it takes :func:`first_guess`. Empty until a sweep's --json is loaded.
TUNED: dict[tuple[str, int, int, int, str], tuple[int, int, int, int, int]] = {}


def first_guess(kind: str, ktot: int, co: int) -> tuple[int, int, int, int, int]:
    """The untuned blocks of a pass whose GEMM reduces ``ktot`` into ``co`` columns."""
    if kind == "weight":
        return block_size(ktot, high=64), block_size(co, high=64), 32, 4, 3
    return 128, block_size(co), 32, 8, 3  # 8 warps: with 4, BM = 128 spills registers


def _int_at_least(v, low: int) -> bool:
    """``v`` is an int, not a bool (JSON's true is one), and ``v >= low``."""
    return isinstance(v, int) and not isinstance(v, bool) and v >= low


def check_blocks(blocks) -> tuple[int, int, int, int, int]:
    """``blocks`` as (BM, BN, BK, warps, stages), or a ValueError saying which is off."""
    if not isinstance(blocks, (tuple, list)) or len(blocks) != 5:
        raise ValueError(f"blocks must be (BM, BN, BK, warps, stages), not {blocks!r}")
    names = ("BM", "BN", "BK", "warps", "stages")
    for name, v, low in zip(names, blocks, (16, 16, 16, 1, 1), strict=True):
        if not _int_at_least(v, low):
            raise ValueError(f"blocks {name} must be an int >= {low}, not {v!r}")
        if name != "stages" and v & (v - 1):
            raise ValueError(f"blocks {name} must be a power of two, not {v}")
    return tuple(blocks)


def load_tuned(path) -> int:
    """Put a sweep's best blocks (``bench_triton_blocks.py --json``) in :data:`TUNED`.

    All or nothing: a file with one bad row adds none and raises a ValueError naming it.
    """
    try:
        with open(path) as f:
            best = json.load(f)["best"]
        rows = {(row["pass"], row["ci"], row["co"], row["r"], row["arithmetic"]): row["blocks"]
                for row in best}  # fmt: skip
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ValueError(f"{path} is not a sweep's --json ({type(e).__name__}: {e})") from e
    for key, blocks in rows.items():
        # a layer keyed by "64" or 64.5 would be counted as tuned and never looked up
        layer_ok = all(_int_at_least(v, 1) for v in key[1:4])
        if key[0] not in PASSES or not layer_ok or key[4] not in ("tf32", "bf16"):
            raise ValueError(f"{path}: a best row for {key} names no pass, layer or arithmetic")
        try:
            rows[key] = check_blocks(blocks)
        except ValueError as e:
            raise ValueError(f"{path}: the best row for {key}: {e}") from e
    TUNED.update(rows)
    return len(rows)


def gemm_shape(kind: str, layer) -> tuple[int, int]:
    """What pass ``kind``'s GEMM of ``layer`` (in, out channels, kernel, ...) reduces over
    and into: R*R*CI into CO, but R*R*CO into CI for the input's gradient."""
    ci, co, r = layer[:3]
    return (r * r * co, ci) if kind == "input" else (r * r * ci, co)


def blocks_for(kind: str, layer: tuple[int, int, int], dtype):
    """Pass ``kind``'s blocks for ``layer`` (in, out channels, kernel): tuned, else guessed."""
    key = (kind, *layer, "tf32" if dtype == torch.float32 else "bf16")
    return TUNED.get(key) or first_guess(kind, *gemm_shape(kind, layer))


def implicit_gemm(x, w, bias, r: int, pad: int, blocks) -> torch.Tensor:
    """x (B, H, W, G*CI) NHWC, w (G, R*R*CI, CO) -> y (B, HO, WO, G*CO)."""
    b, h, wd, cin_all = x.shape
    g, ktot, co = w.shape
    ho, wo = h + 2 * pad - r + 1, wd + 2 * pad - r + 1
    y = torch.empty(b, ho, wo, g * co, device=x.device, dtype=x.dtype)
    m = b * ho * wo
    bm, bn, bk, warps, stages = blocks
    grid = (triton.cdiv(m, bm), triton.cdiv(co, bn), g)
    bias = None if bias is None else bias.contiguous()
    _conv_fwd[grid](x, w, bias if bias is not None else y, y, m, h, wd, ho, wo, cin_all, g * co,
                    cin_all // g, co, ktot, pad, R=r, S=r, HAS_BIAS=bias is not None,
                    TF32=x.dtype == torch.float32, BM=bm, BN=bn, BK=bk,
                    num_warps=warps, num_stages=stages)  # fmt: skip
    return y


def weight_gemm(x, dy, g: int, r: int, pad: int, blocks) -> torch.Tensor:
    """x (B, H, W, G*CI), dy (B, HO, WO, G*CO) NHWC -> dw (G, R*R*CI, CO) in float32."""
    b, h, wd, cin_all = x.shape
    _, ho, wo, cout_all = dy.shape
    ci, co = cin_all // g, cout_all // g
    ktot, m = r * r * ci, b * ho * wo
    bm, bn, bk, warps, stages = blocks
    tiles = triton.cdiv(ktot, bm) * triton.cdiv(co, bn) * g
    # split the pixels so that about 4 programs per SM of a 132-SM card run, chunks of >= 1024
    splits = max(1, min(triton.cdiv(528, tiles), triton.cdiv(m, 1024)))
    chunk = triton.cdiv(triton.cdiv(m, splits), bk) * bk
    splits = triton.cdiv(m, chunk)
    part = torch.empty(splits, g, ktot, co, device=x.device, dtype=torch.float32)
    grid = (triton.cdiv(ktot, bm), triton.cdiv(co, bn), g * splits)
    _conv_wgrad[grid](x, dy, part, m, h, wd, ho, wo, cin_all, cout_all, ci, co, ktot, pad, chunk,
                      g, R=r, S=r, TF32=x.dtype == torch.float32, BM=bm, BN=bn, BK=bk,
                      num_warps=warps, num_stages=stages)  # fmt: skip
    return part[0] if splits == 1 else part.sum(0)


def gemm_weight(weight, groups: int) -> torch.Tensor:
    """torch's (G*CO, CI, R, R) -> the kernels' (G, R*R*CI, CO)."""
    co_all, ci, r, _ = weight.shape
    w = weight.reshape(groups, co_all // groups, ci, r, r).permute(0, 3, 4, 2, 1)
    return w.reshape(groups, r * r * ci, co_all // groups).contiguous()


def flipped(w, r: int) -> torch.Tensor:
    """The input gradient's weight: (G, R*R*CI, CO) flipped in space -> (G, R*R*CO, CI)."""
    g, ktot, co = w.shape
    ci = ktot // (r * r)
    return w.view(g, r, r, ci, co).flip(1, 2).transpose(3, 4).reshape(g, r * r * co, ci)


def torch_weight(dw, r: int) -> torch.Tensor:
    """The kernels' (G, R*R*CI, CO) -> torch's (G*CO, CI, R, R)."""
    g, ktot, co = dw.shape
    ci = ktot // (r * r)
    return dw.view(g, r, r, ci, co).permute(0, 4, 3, 1, 2).reshape(g * co, ci, r, r)


class _GroupedConv(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, groups: int, pad: int):
        _, ci, r, _ = weight.shape
        xn = x.permute(0, 2, 3, 1).contiguous()  # no copy when x is channels_last
        w = gemm_weight(weight, groups)
        ctx.save_for_backward(xn, w)
        ctx.groups, ctx.pad, ctx.r = groups, pad, r
        ctx.wdtype = weight.dtype
        ctx.bdtype = None if bias is None else bias.dtype
        blocks = blocks_for("forward", (ci, w.shape[2], r), xn.dtype)
        return implicit_gemm(xn, w, bias, r, pad, blocks).permute(0, 3, 1, 2)  # NHWC in memory

    @staticmethod
    def backward(ctx, dy):
        xn, w = ctx.saved_tensors
        g, pad, r = ctx.groups, ctx.pad, ctx.r
        dyn = dy.permute(0, 2, 3, 1).contiguous().to(xn.dtype)
        ci, co = w.shape[1] // (r * r), w.shape[2]
        dx = dw = db = None
        if ctx.needs_input_grad[0]:  # the input's gradient: dy convolved with the flipped weight
            blocks = blocks_for("input", (ci, co, r), xn.dtype)
            dx = implicit_gemm(dyn, flipped(w, r).contiguous(), None, r, r - 1 - pad, blocks)
            dx = dx.permute(0, 3, 1, 2)
        if ctx.needs_input_grad[1]:
            blocks = blocks_for("weight", (ci, co, r), xn.dtype)
            dw = torch_weight(weight_gemm(xn, dyn, g, r, pad, blocks), r).to(ctx.wdtype)
        if ctx.bdtype is not None and ctx.needs_input_grad[2]:
            db = dyn.sum((0, 1, 2), dtype=torch.float32).to(ctx.bdtype)
        return dx, dw, db, None, None


def grouped_conv2d(x, weight, bias, groups: int, padding: int) -> torch.Tensor:
    """``F.conv2d(x, weight, bias, 1, padding, 1, groups)`` for square kernels, by Triton.

    x (B, G*CI, H, W), weight (G*CO, CI, R, R), bias (G*CO,) or None ->
    (B, G*CO, HO, WO) in channels_last memory. Under CUDA autocast the images and weights
    are cast to its type first (bf16: products in bf16, sums in float32).
    """
    if weight.shape[2] != weight.shape[3]:
        raise ValueError(f"only square kernels: weight {tuple(weight.shape)}")
    if x.shape[1] != groups * weight.shape[1] or weight.shape[0] % groups:
        raise ValueError(f"x {tuple(x.shape)} and weight {tuple(weight.shape)} are not "
                         f"{groups} groups")  # fmt: skip
    if x.is_cuda and torch.is_autocast_enabled("cuda"):
        dtype = torch.get_autocast_dtype("cuda")
        x, weight = x.to(dtype), weight.to(dtype)
        with torch.autocast("cuda", enabled=False):
            return _GroupedConv.apply(x, weight, bias, groups, padding)
    if x.dtype != weight.dtype:
        raise ValueError(f"x is {x.dtype} and weight {weight.dtype}: one type for both")
    return _GroupedConv.apply(x, weight, bias, groups, padding)


class TritonConv2d(nn.Conv2d):
    """The library's stacked convolution (weight (k*C_out, C_in, kh, kw)) by Triton."""

    def forward(self, x):
        if self.stride != (1, 1) or self.dilation != (1, 1) or self.groups != 1:
            raise ValueError("Triton convolutions take stride 1, no dilation, one group each")
        if isinstance(self.padding, str) or self.padding[0] != self.padding[1]:
            raise ValueError(f"Triton convolutions take equal padding, not {self.padding}")
        k = self.weight.shape[0] // self.out_channels
        return grouped_conv2d(x, self.weight, self.bias, k, self.padding[0])


def reference(x, weight, bias, groups: int, padding: int) -> torch.Tensor:
    """What :func:`grouped_conv2d` computes, by torch."""
    return F.conv2d(x, weight, bias, 1, padding, 1, groups)

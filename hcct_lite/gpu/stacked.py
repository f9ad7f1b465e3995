"""Stacked networks: many clients' copies of one network as one.

k clients sit side by side in the channel dimension: their batches are one (B, k*C, H, W)
tensor. Then k convolutions are one grouped convolution, k linear layers one batched
product and k batch norms one over k*C channels. ReLU, pooling, dropout and ``flatten(1)``
act per channel or element, so the model's own ``forward`` runs unchanged.
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.nn import functional as F
from typing_extensions import override

__all__ = [
    "GPU_PRECISIONS",
    "check_config",
    "check_stackable",
    "stacked_network",
    "stacked_layouts",
    "call_tensor",
    "client_inputs",
]


_LEAVES = (nn.Conv2d, nn.Linear, nn.BatchNorm1d, nn.BatchNorm2d, nn.Dropout)


def check_stackable(model: nn.Module) -> None:
    """Raise ``ValueError`` unless ``model`` can train many clients at once.

    ``model.stackable`` must be True: its ``forward`` keeps clients apart (a softmax over
    dimension 1 would mix them). Every layer with weights must be a convolution, a fully
    connected layer or a batch norm with running statistics and a momentum, and every
    convolution zero-padded.
    """
    name = type(model).__name__
    if not getattr(model, "stackable", False):
        raise ValueError(
            f"model {name} cannot train many clients at once (its forward pass mixes "
            "clients or was not checked for it): turn batched_clients off"
        )
    for path, m in model.named_modules():
        if m is model or not (list(m.parameters(recurse=False)) or list(m.buffers(recurse=False))):
            continue
        where = f"model {name}, layer {path!r}"
        if not isinstance(m, _LEAVES):
            raise ValueError(f"{where}: {type(m).__name__} layers cannot be stacked")
        if isinstance(m, nn.Conv2d) and m.padding_mode != "zeros":
            raise ValueError(f"{where}: only zero-padded convolutions can be stacked")
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and (
            not m.track_running_stats or m.momentum is None or not m.affine
        ):
            raise ValueError(f"{where}: batch norm needs running statistics and a momentum")


class _StackedConv2d(nn.Conv2d):
    """k convolutions as one grouped convolution; weight (k*C_out, C_in/groups, kh, kw)."""

    @override
    def forward(self, x):
        k = self.weight.shape[0] // self.out_channels
        w = self.weight
        if not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last):
            w = w.contiguous(memory_format=torch.channels_last)  # both in one layout
        return F.conv2d(x, w, self.bias, self.stride, self.padding, self.dilation, self.groups * k)


class _StackedLinear(nn.Linear):
    """k fully connected layers as one batched product; weight (k, out, in), bias (k, out).

    Input (B, k*in) -> output (B, k*out).
    """

    @override
    def forward(self, x):
        # W X^T, not X W^T: the weight's gradient then has the weight's layout, so the SGD
        # update stays on torch._foreach_add_'s fast path
        k, b = self.weight.shape[0], x.shape[0]
        xt = x.reshape(b, k, self.in_features).permute(1, 2, 0)  # (k, in, B)
        w = self.weight
        out = torch.bmm(w, xt) if self.bias is None else torch.baddbmm(self.bias[:, :, None], w, xt)
        return out.permute(2, 0, 1).reshape(b, k * self.out_features)


class _StackedBatchNorm(nn.modules.batchnorm._BatchNorm):
    """k batch norms as one over k*C channels (the counter is kept per client outside)."""

    @override
    def forward(self, x):
        return F.batch_norm(
            x,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            self.training,
            self.momentum,
            self.eps,
        )

    @override
    def _check_input_dim(self, input):  # any (B, k*C, ...) input
        return None


def stacked_network(model: nn.Module) -> nn.Module:
    """A copy of ``model`` whose layers take stacked weights (:func:`call_tensor`).

    Its own parameters are placeholders: call it with :func:`torch.func.functional_call`.
    """
    check_stackable(model)
    net = copy.deepcopy(model)
    for m in net.modules():
        if isinstance(m, nn.Conv2d):
            m.__class__ = _StackedConv2d
        elif isinstance(m, nn.Linear):
            m.__class__ = _StackedLinear
        elif isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.__class__ = _StackedBatchNorm
    return net


def stacked_layouts(model: nn.Module) -> dict:
    """State name -> True where k clients' tensors meet as rows (convolutions, batch norm).

    Fully connected layers keep a leading client dimension (False): (k, out, in).
    """
    out = {}
    for path, m in model.named_modules():
        for name, _ in list(m.named_parameters(recurse=False)) + list(
            m.named_buffers(recurse=False)
        ):
            out[f"{path}.{name}" if path else name] = not isinstance(m, nn.Linear)
    return out


def call_tensor(stack: torch.Tensor, rows: bool) -> torch.Tensor:
    """The tensor a stacked layer takes from k clients' ``stack`` (k, ...): a view."""
    return stack.flatten(0, 1) if rows and stack.dim() > 1 else stack


def client_inputs(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Samples ``idx`` (B, k) of ``x`` (n, C, ...) in the stacked layout (B, k*C, ...)."""
    picked = x[idx]  # (B, k, C, ...)
    return picked.reshape(idx.shape[0], idx.shape[1] * x.shape[1], *x.shape[2:])


# gpu_precision: "default" is torch's (float32; cuDNN may take TF32 for convolutions)
GPU_PRECISIONS = ("default", "tf32", "bf16")


def _need(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


def check_config(cfg) -> None:
    """Raise ``ValueError`` naming the first of ``cfg``'s GPU settings that is refused.

    ``cuda_graphs`` needs a GPU; ``batched_clients`` and ``cuda_graphs`` exclude each
    other; ``gpu_precision`` (:data:`GPU_PRECISIONS`) applies to batched clients on a GPU;
    batched clients need a model that can be stacked (:func:`check_stackable`).
    """
    graphs, batched = cfg.option("cuda_graphs"), cfg.option("batched_clients")
    precision = cfg.option("gpu_precision")
    _need(isinstance(graphs, bool), f"cuda_graphs must be a bool; got {graphs!r}")
    _need(
        not (graphs and cfg.device == "cpu"),
        "cuda_graphs needs a GPU: use device 'cuda' (or 'auto' on a machine with one), "
        "or turn cuda_graphs off",
    )
    _need(isinstance(batched, bool), f"batched_clients must be a bool; got {batched!r}")
    _need(
        precision in GPU_PRECISIONS,
        f"gpu_precision must be one of {', '.join(GPU_PRECISIONS)}; got {precision!r}",
    )
    _need(
        not (batched and graphs),
        "batched_clients and cuda_graphs are two ways of training: turn one off",
    )
    _need(
        precision == "default" or (batched and cfg.device != "cpu"),
        f"gpu_precision {precision!r} applies to batched_clients on a GPU: set "
        "batched_clients and device 'cuda', or leave gpu_precision 'default'",
    )
    if batched:
        from ..training.tasks import task_model

        with torch.device("meta"):  # the layers' kinds only: no weights drawn or stored
            model = task_model(cfg)
        check_stackable(model)

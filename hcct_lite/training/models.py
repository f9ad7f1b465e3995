"""The paper's models, a small one for scikit-learn's 8x8 digits, and their stacked form.

Stacked networks, many clients' copies of one network as one: a network here whose forward
pass uses only convolutions, fully connected layers, batch norm and per-channel or
per-element functions (ReLU, pooling, dropout, ``flatten(1)``) can run k clients' weights
at once on a layout that puts the clients side by side in the channel dimension: k
clients' batches of B images of C channels are one (B, k*C, H, W) tensor, and k clients'
features one (B, k*F) tensor.
On that layout

- k convolutions are one grouped convolution (a group per client);
- k fully connected layers are one batched matrix product;
- k batch norms are one batch norm over k*C channels: each channel's batch statistics and
  running statistics are its own client's, as in the client's own network;
- ReLU, pooling, dropout and ``flatten(1)`` act per channel or per element, so the model's
  own ``forward`` runs unchanged (``flatten(1)`` of client c's (C, H, W) block is its own
  C*H*W features, in the same order).

:func:`stacked_network` builds that network from a model, :func:`call_tensor` gives it k
clients' tensors and :func:`client_inputs` their batches. A model whose ``forward`` mixes
clients (a softmax over dimension 1, say) declares ``stackable`` False and is refused.
"""

from __future__ import annotations

import copy
import functools

import torch
from torch import nn
from torch.nn import functional as F
from typing_extensions import override

__all__ = [
    "DigitCNN",
    "SmallDigitCNN",
    "FMNISTNet",
    "CifarCNN",
    "SmallDigitsNet",
    "build_model",
    "register_model",
    "head_names",
    "check_stackable",
    "stacked_network",
    "stacked_layouts",
    "call_tensor",
    "client_inputs",
]


class DigitCNN(nn.Module):
    """FedBN's Digit CNN: input (B, 3, 28, 28) -> logits (B, 10); 14.2M parameters.

    Three 5x5 conv layers 64-64-128 with batch norm (max-pool after the first two), then
    fully connected 6272-2048-512-10 with batch norm.
    """

    # its forward pass keeps clients apart on the stacked layout (module doc)
    stackable = True

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 64, 5, padding=2), nn.BatchNorm2d(64)
        self.conv2, self.bn2 = nn.Conv2d(64, 64, 5, padding=2), nn.BatchNorm2d(64)
        self.conv3, self.bn3 = nn.Conv2d(64, 128, 5, padding=2), nn.BatchNorm2d(128)
        self.fc1, self.bn4 = nn.Linear(6272, 2048), nn.BatchNorm1d(2048)
        self.fc2, self.bn5 = nn.Linear(2048, 512), nn.BatchNorm1d(512)
        self.fc3 = nn.Linear(512, num_classes)

    @override
    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        x = nn.functional.max_pool2d(torch.relu(self.bn2(self.conv2(x))), 2)
        x = torch.relu(self.bn3(self.conv3(x))).flatten(1)
        x = torch.relu(self.bn4(self.fc1(x)))
        x = torch.relu(self.bn5(self.fc2(x)))
        return self.fc3(x)


class SmallDigitCNN(nn.Module):
    """The Digit CNN's shape at a fraction of its size, for quick runs on a CPU.

    Input (B, 3, 28, 28) -> logits (B, 10); 65k parameters. Two 5x5 conv layers 16-32
    with batch norm and max-pooling, then fully connected 1568-32-10 with batch norm: the
    same kinds of layers (and batch-norm buffers) as :class:`DigitCNN`, 220x fewer weights.
    """

    # its forward pass keeps clients apart on the stacked layout (module doc)
    stackable = True

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 16, 5, padding=2), nn.BatchNorm2d(16)
        self.conv2, self.bn2 = nn.Conv2d(16, 32, 5, padding=2), nn.BatchNorm2d(32)
        self.fc1, self.bn3 = nn.Linear(1568, 32), nn.BatchNorm1d(32)
        self.fc2 = nn.Linear(32, num_classes)

    @override
    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        x = nn.functional.max_pool2d(torch.relu(self.bn2(self.conv2(x))), 2).flatten(1)
        x = torch.relu(self.bn3(self.fc1(x)))
        return self.fc2(x)


class FMNISTNet(nn.Module):
    """Fully connected 784-64-10 for (B, 1, 28, 28) images -> (B, 10).

    The default (``fmnist_mlp``) returns logits and has no dropout. The authors' network
    (``fmnist_mlp_authors``) has dropout 0.5 after the hidden layer and returns a softmax,
    which their training then feeds to the cross-entropy (a second softmax): its outputs
    are squeezed into [e^0, e^1] before the loss, so gradients shrink as the model grows
    confident. ``fmnist_mlp_dropout`` is the authors' dropout with logits.
    """

    def __init__(self, num_classes: int = 10, dropout: float = 0.0, softmax: bool = False):
        super().__init__()
        self.fc1 = nn.Linear(784, 64)
        self.drop = nn.Dropout(dropout)
        self.fc2 = nn.Linear(64, num_classes)
        self.softmax = softmax
        # a softmax over dimension 1 would mix the stacked clients (module doc)
        self.stackable = not softmax

    @override
    def forward(self, x):
        out = self.fc2(self.drop(torch.relu(self.fc1(x.flatten(1)))))
        return torch.softmax(out, dim=1) if self.softmax else out


class CifarCNN(nn.Module):
    """Four 3x3 conv layers 16-32-64-128 (pool after the last three), then 2048-500-10.

    Input (B, 3, 32, 32); dropout 0.25 after the 500-unit layer; 1.13M parameters.
    """

    # its forward pass keeps clients apart on the stacked layout (module doc)
    stackable = True

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.conv3 = nn.Conv2d(32, 64, 3, padding=1)
        self.conv4 = nn.Conv2d(64, 128, 3, padding=1)
        self.fc1 = nn.Linear(2048, 500)
        self.drop = nn.Dropout(0.25)
        self.fc2 = nn.Linear(500, num_classes)

    @override
    def forward(self, x):
        pool = nn.functional.max_pool2d
        x = torch.relu(self.conv1(x))
        x = pool(torch.relu(self.conv2(x)), 2)
        x = pool(torch.relu(self.conv3(x)), 2)
        x = pool(torch.relu(self.conv4(x)), 2).flatten(1)
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


class SmallDigitsNet(nn.Module):
    """Fully connected 64-64-10 for scikit-learn's (B, 1, 8, 8) digits."""

    # its forward pass keeps clients apart on the stacked layout (module doc)
    stackable = True

    def __init__(self, num_classes: int = 10, hidden: int = 64):
        super().__init__()
        self.fc1 = nn.Linear(64, hidden)
        self.fc2 = nn.Linear(hidden, num_classes)

    @override
    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


MODELS = {
    "digit_cnn": DigitCNN,
    "digit_cnn_small": SmallDigitCNN,
    "fmnist_mlp": FMNISTNet,
    "fmnist_mlp_dropout": functools.partial(FMNISTNet, dropout=0.5),
    "fmnist_mlp_authors": functools.partial(FMNISTNet, dropout=0.5, softmax=True),
    "cifar_cnn": CifarCNN,
    "small_digits": SmallDigitsNet,
}


# (side, channels) of each model's input images: data are resized to fit.
MODEL_INPUT = {
    "digit_cnn": (28, 3),
    "digit_cnn_small": (28, 3),
    "fmnist_mlp": (28, 1),
    "fmnist_mlp_dropout": (28, 1),
    "fmnist_mlp_authors": (28, 1),
    "cifar_cnn": (32, 3),
    "small_digits": (8, 1),
}


def register_model(name: str, build, side: int, channels: int, replace: bool = False) -> None:
    """Register the network ``name`` for a task's ``model`` setting.

    Parameters
    ----------
    name : str
        A new name (or one to replace); not empty.
    build : callable ``num_classes -> torch.nn.Module``
        The network, mapping images of shape (B, channels, side, side) to logits of shape
        (B, num_classes). Its last ``nn.Linear`` is the classifier HCCT-P keeps local.
    side, channels : int >= 1
        Its input images' side and channels: a task's data are resized to fit.
    replace : bool, default=False
        Replace a network registered under the same name (else that is an error).

    Raises
    ------
    ValueError
        If ``name`` is empty or taken (without ``replace``), ``build`` is not callable, or
        ``side`` or ``channels`` is not an int >= 1.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a network needs a name; got {name!r}")
    if name in MODELS and not replace:
        raise ValueError(f"a network named {name!r} is registered already")
    if not callable(build):
        raise ValueError(f"network {name!r}: build must be callable; got {build!r}")
    for what, v in (("side", side), ("channels", channels)):
        if type(v) is not int or v < 1:
            raise ValueError(f"network {name!r}: {what} must be an int >= 1; got {v!r}")
    MODELS[name], MODEL_INPUT[name] = build, (side, channels)


def build_model(name: str, num_classes: int = 10) -> nn.Module:
    """Build a fresh network by name, its weights drawn from torch's global stream.

    Parameters
    ----------
    name : str
        A registered network (see :data:`MODELS`), e.g. ``"digit_cnn"`` (the Digit task's),
        ``"fmnist_mlp"``, ``"cifar_cnn"`` or ``"small_digits"``.
    num_classes : int, default=10
        The number of logits it outputs.

    Returns
    -------
    torch.nn.Module
        Mapping a batch of shape (B, C, H, W), with ``(H = W, C)`` the network's entry
        ``(side, channels)`` of :data:`MODEL_INPUT`, to logits of shape (B, num_classes).

    Raises
    ------
    ValueError
        If ``name`` is not a registered network (the message lists those that are).

    Examples
    --------
    >>> import torch
    >>> from hcct_lite import build_model
    >>> model = build_model("small_digits")
    >>> model(torch.zeros(2, 1, 8, 8)).shape
    torch.Size([2, 10])
    >>> sum(p.numel() for p in model.parameters())
    4810
    """
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose from {sorted(MODELS)}")
    return MODELS[name](num_classes)


def head_names(model: nn.Module) -> list:
    """Parameter names of the model's last ``nn.Linear`` (the classifier HCCT-P keeps local)."""
    last = None
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            last = name
    if last is None:
        raise ValueError(f"{type(model).__name__} has no nn.Linear layer to keep local")
    return [f"{last}.{p}" for p, _ in model.get_submodule(last).named_parameters()]


_LEAVES = (nn.Conv2d, nn.Linear, nn.BatchNorm1d, nn.BatchNorm2d, nn.Dropout)


def check_stackable(model: nn.Module) -> None:
    """Raise ``ValueError`` unless ``model`` can train many clients at once (module doc).

    ``model.stackable`` must be True (its ``forward`` keeps clients apart), every layer
    with weights a convolution, a fully connected layer or a batch norm with running
    statistics and a momentum, and every convolution zero-padded.
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
        # update stays on torch._foreach_add_'s fast path (1.04-1.10x a Digit step, H200)
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

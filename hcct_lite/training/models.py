"""The paper's models, and a small one for scikit-learn's 8x8 digits.

:func:`build_model` builds a network by name, :func:`register_model` adds one. A model
whose forward pass keeps clients apart says so with ``stackable = True``: the GPU part can
then train many clients' copies at once (:mod:`hcct_lite.gpu.stacked`).
"""

from __future__ import annotations

import functools

import torch
from torch import nn
from typing_extensions import override

from ..parts import load_parts, track

__all__ = [
    "DigitCNN",
    "SmallDigitCNN",
    "FMNISTNet",
    "CifarCNN",
    "SmallDigitsNet",
    "build_model",
    "register_model",
    "input_shape",
    "head_names",
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
# name -> the shape of one input sample, (C, H, W) for an image network
MODEL_SHAPES = {name: (c, s, s) for name, (s, c) in MODEL_INPUT.items()}
track(MODELS, MODEL_INPUT, MODEL_SHAPES)  # an installed extension may add networks


def register_model(
    name: str,
    build,
    side: int | None = None,
    channels: int | None = None,
    replace: bool = False,
    input_shape: tuple | None = None,
) -> None:
    """Register the network ``name`` for a task's ``model`` setting.

    Parameters
    ----------
    name : str
        A new name (or one to replace); not empty.
    build : callable ``num_classes -> torch.nn.Module``
        The network, mapping a batch of inputs to logits of shape (B, num_classes). Its
        last ``nn.Linear`` is the classifier HCCT-P keeps local.
    side, channels : int >= 1, default=None
        An image network's input side and channels (B, channels, side, side): the paper's
        image tasks resize their data to fit.
    replace : bool, default=False
        Replace a network registered under the same name (else that is an error).
    input_shape : tuple of int >= 1, default=None
        Any other network's shape of one sample, e.g. ``(30,)`` for 30 features: given
        instead of ``side`` and ``channels``.

    Raises
    ------
    ValueError
        If ``name`` is empty or taken (without ``replace``), ``build`` is not callable, or
        the input is not ``side`` and ``channels`` or ``input_shape``, of ints >= 1.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a network needs a name; got {name!r}")
    if name in MODELS and not replace:
        raise ValueError(f"a network named {name!r} is registered already")
    if not callable(build):
        raise ValueError(f"network {name!r}: build must be callable; got {build!r}")
    image = input_shape is None
    if image == (side is None or channels is None) or (side is None) != (channels is None):
        raise ValueError(f"network {name!r}: give side and channels, or input_shape")
    if image:
        for what, v in (("side", side), ("channels", channels)):
            if type(v) is not int or v < 1:
                raise ValueError(f"network {name!r}: {what} must be an int >= 1; got {v!r}")
        shape = (channels, side, side)
    else:
        shape = input_shape
        if (
            not isinstance(shape, tuple)
            or not shape
            or any(type(v) is not int or v < 1 for v in shape)
        ):
            raise ValueError(
                f"network {name!r}: input_shape must be a tuple of ints >= 1; got {shape!r}"
            )
    MODELS[name], MODEL_SHAPES[name] = build, shape
    MODEL_INPUT.pop(name, None)
    if image:
        MODEL_INPUT[name] = (side, channels)


def input_shape(name: str) -> tuple:
    """The shape of one input sample of the network ``name``: (C, H, W) for images."""
    load_parts()
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose from {sorted(MODELS)}")
    return MODEL_SHAPES[name]


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
    load_parts()
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


def check_outputs(model: nn.Module, x, classes: int, name: str, task: str) -> None:
    """Raise ``ValueError`` naming the network and the task unless ``model(x)`` is (1, classes).

    ``x`` is one sample, of shape (1, *S): the network must give one output per class.
    """
    training = model.training
    model.eval()  # batch norm takes one sample only in eval mode
    try:
        with torch.no_grad():
            out = model(x.to(next(model.parameters()).device))
    finally:
        model.train(training)
    if tuple(out.shape) != (1, classes):
        raise ValueError(
            f"model {name!r} gives outputs of shape {tuple(out.shape[1:])} for one sample "
            f"of task {task!r}, which has {classes} classes: build it with num_classes "
            "outputs"
        )

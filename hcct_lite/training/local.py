"""Client-side work: local SGD on a client's own data, its update, and evaluation.

The server never sees data: a client returns its trained model, its update
``g_i = (w_start - w_end) / lr`` and scalar statistics. :class:`LocalTrainer` is the one
interface the engine calls; :func:`make_trainer` picks :class:`SGDTrainer` or a trainer an
optional part registered, without touching the schemes. A scheme that changes the
clients' step (FedProx's proximal term, say) gives a :class:`LocalObjective`.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import nn
from typing_extensions import override

from ..parts import find, part_missing
from .splits import ClientData

__all__ = [
    "FlatUpdate",
    "LocalResult",
    "LocalTrainer",
    "LocalObjective",
    "local_objective",
    "SGDTrainer",
    "make_trainer",
    "evaluate",
    "update_of",
    "load_state",
    "set_mode",
]


@dataclass
class LocalResult:
    """What a client returns after local training.

    Attributes
    ----------
    state : dict name -> tensor, the trained model's full ``state_dict``
    update : dict name -> tensor, ``(w_start - w_end) / lr`` over trainable parameters
        (or over every state entry with ``include_buffers``)
    n_samples : int, D_i
    train_loss, train_acc : float, mean loss and accuracy over the last local epoch's batches
    """

    state: dict
    update: dict
    n_samples: int
    train_loss: float
    train_acc: float


class LocalTrainer(Protocol):
    """Runs one epoch of local training for several clients."""

    def train(self, starts: dict, clients: dict, lr: float, epoch: int) -> dict:
        """Train every client in ``starts`` (index -> state) on ``clients`` (index -> data).

        Returns index -> LocalResult.
        """
        ...


class FlatUpdate(dict):
    """An update: name -> tensor, every tensor a view into one flat float32 vector.

    ``flat`` (M,) holds the entries in key order, so the reply screen, the Gram matrix and
    anything else that wants the whole update reads one tensor instead of one per layer.
    """

    __slots__ = ("flat",)


def update_of(start: dict, end: dict, lr: float, names) -> FlatUpdate:
    """Compute ``(start - end) / lr`` for the entries ``names`` as a :class:`FlatUpdate`.

    In float32 (integer counters too), on the device of ``end``; the same float32
    subtraction and division per entry as on separate tensors, so the same bits.
    """
    names = list(names)
    device = end[names[0]].device
    flat = torch.empty(sum(end[k].numel() for k in names), dtype=torch.float32, device=device)
    out, offset = FlatUpdate(), 0
    for k in names:
        m = end[k].numel()
        view = flat[offset : offset + m].view(end[k].shape)
        torch.sub(start[k].to(device).float(), end[k].float(), out=view)
        out[k], offset = view, offset + m
    flat.div_(lr)
    out.flat = flat
    return out


class LocalObjective:
    """What a method adds to each client's local SGD step: the public hook of local training.

    A scheme returns one from :meth:`~hcct_lite.schemes.base.Scheme.local_objective`, and
    every client of its runs trains with it: in this process, in a grid's workers, on Ray
    and at a Flower silo. The recorded training loss stays the task's own loss.
    Subclass it and override either method; the base adds nothing (plain SGD).
    """

    def begin(self, model: nn.Module, start: dict, client: int, epoch: int) -> None:
        """Called when ``client`` starts an epoch's training from ``start`` (loaded in ``model``).

        Keep here what the step needs: the start's weights for a proximal term, a
        client's control variate.
        """

    def extra_loss(self, model: nn.Module, outputs, labels):
        """What to add to a batch's mean loss before its gradients: a tensor, or None.

        ``outputs`` (B, n_classes) are the batch's logits and ``labels`` (B,) its labels.
        """
        return None


def local_objective(cfg):
    """The :class:`LocalObjective` of ``cfg``'s scheme, or None (plain SGD)."""
    from ..schemes.registry import make_scheme

    return make_scheme(cfg.scheme, cfg).local_objective()


def clone_state(state: dict) -> dict:
    return {k: v.detach().clone() for k, v in state.items()}


class SGDTrainer:
    """Plain mini-batch SGD (no momentum, no weight decay), one client after another.

    Parameters
    ----------
    model : nn.Module used as the workspace (its weights are overwritten per client)
    local_epochs, batch_size : int
    include_buffers : bool, compute the update over every state entry, batch-norm running
        statistics and counters included (the authors' code) instead of trainable parameters
    seed : int, base of the per-(epoch, client) shuffling streams
    device : torch.device
    objective : LocalObjective or None, what a scheme adds to each step (None: plain SGD)
    """

    def __init__(
        self,
        model: nn.Module,
        local_epochs: int,
        batch_size: int,
        include_buffers: bool = False,
        seed: int = 0,
        device="cpu",
        objective: LocalObjective | None = None,
    ):
        self.model = model.to(device)
        self.local_epochs = local_epochs
        self.batch_size = batch_size
        self.include_buffers = include_buffers
        self.seed = seed
        self.device = torch.device(device)
        params = [k for k, _ in model.named_parameters()]
        self.update_names = list(model.state_dict()) if include_buffers else params
        self.loss_fn = nn.CrossEntropyLoss()
        self.has_batchnorm = has_batchnorm(model)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.objective = objective

    @override
    def train(self, starts: dict, clients: dict, lr: float, epoch: int) -> dict:
        return {i: self.train_one(starts[i], clients[i], lr, epoch, i) for i in sorted(starts)}

    def evaluate_clients(self, states: dict, clients: dict) -> dict:
        """Test error in % of ``states[i]`` on ``clients[i]``'s test split, index -> float."""
        out, loaded = {}, None
        # clients holding the same model object (a group's) load it once
        for i, st in sorted(states.items(), key=lambda kv: id(kv[1])):
            c = clients[i]
            out[i] = evaluate(self.model, None if st is loaded else st, c.x_test, c.y_test)[1]
            loaded = st
        return {i: out[i] for i in states}

    def train_one(self, start: dict, data: ClientData, lr: float, epoch: int, client: int):
        """Local SGD of one client from ``start``; returns its LocalResult."""
        model = self.model
        self._prepare(data)
        load_state(model, start)
        set_mode(model, training=True)
        if self.objective is not None:
            self.objective.begin(model, start, client, epoch)
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch * 10_007 + client)
        # Dropout draws from torch's global stream: seed it per client and epoch as well.
        seed_global_stream(int(torch.randint(0, 2**62, (1,), generator=gen)), self.device)
        x, y = data.x_train.to(self.device), data.y_train.to(self.device)
        n = y.shape[0]
        steps = math.ceil(n / self.batch_size)
        skip_single = self.has_batchnorm
        for _ in range(self.local_epochs):
            perm = torch.randperm(n, generator=gen).to(self.device)
            stats = self._new_stats()
            for s in range(steps):
                idx = perm[s * self.batch_size : (s + 1) * self.batch_size]
                if idx.numel() == 1 and skip_single:
                    continue  # batch norm cannot train on one sample
                self._step(x, y, idx, lr, stats)
        loss_sum, correct = stats
        end = clone_state(model.state_dict())
        upd = update_of(start, end, lr, self.update_names)
        return LocalResult(end, upd, n, float(loss_sum) / n, float(correct) / n)

    def _prepare(self, data: ClientData) -> None:
        """Run before a client with ``data`` loads its state (nothing here).

        A subclass may build per-batch-size work there: the workspace is about to be reset.
        """

    def _new_stats(self) -> tuple:
        """Fresh (loss sum, correct count) accumulators.

        On the device: one host sync per client, not two per step.
        """
        return (
            torch.zeros((), dtype=torch.float64, device=self.device),
            torch.zeros((), dtype=torch.int64, device=self.device),
        )

    def _step(self, x, y, idx, lr: float, stats: tuple) -> None:
        """One SGD step on the samples ``idx`` (B,) of ``x`` (n, ...) and ``y`` (n,).

        The batch's summed loss and correct count are added to ``stats``.
        """
        for p in self.params:
            p.grad = None
        self._forward_backward(x[idx], y[idx], stats)
        with torch.no_grad():  # plain SGD, as torch.optim.SGD without momentum
            torch._foreach_add_(self.params, [p.grad for p in self.params], alpha=-lr)

    def _forward_backward(self, xb, yb, stats: tuple) -> None:
        """Loss and gradients of the batch ``xb`` (B, ...), ``yb`` (B,).

        The batch's summed loss and correct count are added to ``stats``.
        """
        out = self.model(xb)
        loss = self.loss_fn(out, yb)
        extra = None if self.objective is None else self.objective.extra_loss(self.model, out, yb)
        (loss if extra is None else loss + extra).backward()
        stats[0].add_(loss.detach().double() * yb.shape[0])
        stats[1].add_((out.argmax(1) == yb).sum())


def make_trainer(cfg, model: nn.Module, device):
    """The trainer of ``cfg``'s clients: :class:`SGDTrainer`, or a part's.

    ``batched_clients`` and ``cuda_graphs`` name the GPU part's trainers (``"batched"``,
    ``"graphs"``), built as ``build(cfg, model, device)``.

    Raises
    ------
    ValueError
        If the setting asks for a trainer no installed part registered, or a GPU trainer
        for a scheme with a :class:`LocalObjective`.
    """
    trainers = {"batched_clients": "batched", "cuda_graphs": "graphs"}  # the GPU part's
    setting = next((k for k in trainers if cfg.option(k, False)), None)
    name = trainers.get(setting)
    args = (model, cfg.local_epochs, cfg.batch_size, cfg.update_includes_buffers, cfg.seed)
    objective = local_objective(cfg)
    if name is None:
        return SGDTrainer(*args, device, objective)
    if objective is not None:
        raise ValueError(
            f"{setting}: the scheme {cfg.scheme!r} adds to the clients' step, which the GPU "
            f"part's {name} trainer does not run; leave {setting} off"
        )
    build = find("trainer", name)
    if build is None:
        raise part_missing(setting, "gpu")
    return build(cfg, model, device)


def seed_global_stream(seed: int, device) -> None:
    """Seed torch's global stream on the CPU (and on ``device`` when it is a GPU).

    ``torch.manual_seed`` also queues a seed for every CUDA device, which on a CUDA build
    without a GPU records a stack trace each call (slow, and a queue that only grows).
    """
    torch.random.default_generator.manual_seed(seed)
    if torch.device(device).type == "cuda":
        torch.cuda.manual_seed(seed)


def set_mode(model: nn.Module, training: bool) -> None:
    """``model.train(training)``, skipped when the model is in that mode already."""
    if model.training != training:
        model.train(training)


_TARGETS = weakref.WeakKeyDictionary()


def load_state(model: nn.Module, state: dict) -> None:
    """Copy ``state`` into ``model``'s parameters and buffers: ``load_state_dict``'s result.

    The same strict key check and the same copies, without walking the module tree on
    every call (the engine loads a state for every client, every epoch).
    """
    keys, targets, first = _TARGETS.get(model, (None, None, None))
    if targets is None or first.data_ptr() != targets[0].data_ptr():  # built, or moved
        sd = model.state_dict()
        keys, targets = list(sd), list(sd.values())
        live = dict(model.named_parameters()) | dict(model.named_buffers())
        first = live[keys[0]]
        _TARGETS[model] = (keys, targets, first)
    if len(state) != len(keys) or any(k not in state for k in keys):
        model.load_state_dict(state)  # raises naming the missing and unexpected keys
        return
    with torch.no_grad():
        torch._foreach_copy_(targets, [state[k] for k in keys])


def has_batchnorm(model: nn.Module) -> bool:
    """Whether ``model`` has a batch-norm layer (its batches must hold two samples or more)."""
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())


# Logits this large are an overflowing model's, not a trained one's (float32 ends at 3e38)
LOGIT_LIMIT = 1e30


@torch.no_grad()
def evaluate(
    model: nn.Module,
    state: dict | None,
    x: torch.Tensor,
    y: torch.Tensor,
    batch_size: int = 1024,
) -> tuple:
    """Return ``(mean loss, error in %)`` of ``state`` on ``(x, y)`` in eval mode.

    ``state`` None evaluates the weights ``model`` already holds (no reload). A model whose
    outputs overflow (non-finite, or beyond :data:`LOGIT_LIMIT`, where float32's softmax
    reads a wrong answer as certain and its loss can come out 0) has loss ``inf``: it is
    the worst model, never the best one a client may pick.
    """
    if state is not None:
        load_state(model, state)
    set_mode(model, training=False)
    device = next(model.parameters()).device
    loss = wrong = 0.0
    overflow = False
    for s in range(0, y.shape[0], batch_size):
        xb, yb = x[s : s + batch_size].to(device), y[s : s + batch_size].to(device)
        out = model(xb)
        # one reduction for both checks: NaN and inf propagate through the max of |out|
        top = float(out.abs().max())
        overflow = overflow or not math.isfinite(top) or top > LOGIT_LIMIT
        loss += float(nn.functional.cross_entropy(out, yb, reduction="sum"))
        wrong += float((out.argmax(1) != yb).sum())
    n = max(int(y.shape[0]), 1)
    return (math.inf if overflow else loss / n), 100.0 * wrong / n

"""Local SGD of every client of an epoch at once (``batched_clients``): far larger kernels.

A step of these small networks is dozens of small kernels, which leave a GPU mostly idle
when clients train one after another. :class:`BatchedSGDTrainer` runs the clients' steps
together on their stacked networks (:func:`~hcct_lite.gpu.stacked.stacked_network`): each
layer of k clients is one kernel over k batches.
"""

from __future__ import annotations

import contextlib
import math

import torch
from torch.func import functional_call
from torch.nn import functional as F

from ..training.local import LocalResult, has_batchnorm, seed_global_stream, update_of
from .stacked import GPU_PRECISIONS, call_tensor, client_inputs, stacked_layouts, stacked_network

__all__ = ["BatchedSGDTrainer", "step_plan", "trainer"]


def step_plan(sizes, batch_size: int, local_epochs: int, gens, skip_single: bool) -> dict:
    """Every client's batches, step by step, as padded tensors.

    Parameters
    ----------
    sizes : list of k int, the clients' training samples, in training order (most steps
        first)
    gens : list of k torch.Generator, each client's shuffling stream (the draws of
        SGDTrainer: one permutation per local epoch)
    skip_single : bool, leave out one-sample batches (batch norm cannot train on one)

    Returns
    -------
    dict with ``idx`` (T, k, B) int64 sample indices into the clients' concatenated data,
    ``weight`` (T, k, B) float32 (0 for padding), ``last`` (T, k) bool (the batch belongs to
    the client's last local epoch), ``active`` (T,) int (clients training at step t, always
    the first ones), ``width`` (T,) int (the longest batch at step t) and ``steps`` (k,) int.
    """
    per_client, offset = [], 0
    for n, gen in zip(sizes, gens, strict=True):
        batches = []
        for e in range(local_epochs):
            perm = torch.randperm(n, generator=gen) + offset
            for s in range(math.ceil(n / batch_size)):
                b = perm[s * batch_size : (s + 1) * batch_size]
                if not (skip_single and b.numel() == 1):
                    batches.append((b, e == local_epochs - 1))
        per_client.append(batches)
        offset += n
    steps = [len(b) for b in per_client]
    if steps != sorted(steps, reverse=True):
        raise ValueError("clients must come in order of their number of steps, most first")
    t_max, k = max(steps, default=0), len(sizes)
    idx = torch.zeros((t_max, k, batch_size), dtype=torch.int64)
    weight = torch.zeros((t_max, k, batch_size), dtype=torch.float32)
    last = torch.zeros((t_max, k), dtype=torch.bool)
    width = torch.zeros(t_max, dtype=torch.int64)
    for c, batches in enumerate(per_client):
        for t, (b, in_last) in enumerate(batches):
            idx[t, c, :] = b[0]  # padding repeats a real sample, at weight 0
            idx[t, c, : b.numel()] = b
            weight[t, c, : b.numel()] = 1.0
            last[t, c] = in_last
            width[t] = max(int(width[t]), b.numel())
    active = torch.tensor([sum(s > t for s in steps) for t in range(t_max)], dtype=torch.int64)
    return dict(
        idx=idx, weight=weight, last=last, active=active, width=width, steps=torch.tensor(steps)
    )


class BatchedSGDTrainer:
    """Plain mini-batch SGD of many clients at once on their stacked networks.

    Same parameters and results as :class:`~hcct_lite.training.local.SGDTrainer`, plus
    ``gpu_precision`` (one of :data:`GPU_PRECISIONS`; on a GPU only).

    Each client keeps SGDTrainer's batches, learning rate, SGD step on its own mean loss
    and skipped one-sample batch. The float arithmetic (summation order, TF32 or bf16) and
    dropout's draws differ, so a run is another computation, stored as such.

    Raises
    ------
    ValueError
        If the model cannot be stacked, or ``gpu_precision`` is unknown or asks a GPU's
        arithmetic of the CPU.
    """

    def __init__(
        self,
        model,
        local_epochs,
        batch_size,
        include_buffers=False,
        seed=0,
        device="cpu",
        gpu_precision="default",
    ):
        self.device = torch.device(device)
        if gpu_precision not in GPU_PRECISIONS:
            raise ValueError(
                f"gpu_precision must be one of {GPU_PRECISIONS}; got {gpu_precision!r}"
            )
        if gpu_precision != "default" and self.device.type != "cuda":
            raise ValueError(f"gpu_precision {gpu_precision!r} needs a CUDA device; got {device!r}")
        self.net = stacked_network(model).to(self.device)
        self.local_epochs, self.batch_size, self.seed = local_epochs, batch_size, seed
        self.precision = gpu_precision
        state = model.state_dict()
        self.keys = list(state)
        self.params = [k for k, _ in model.named_parameters()]
        self.floats = [k for k in self.keys if state[k].is_floating_point()]
        self.counters = [k for k in self.keys if not state[k].is_floating_point()]
        self.rows = stacked_layouts(model)
        self.update_names = self.keys if include_buffers else self.params
        self.has_batchnorm = has_batchnorm(model)

    def train(self, starts: dict, clients: dict, lr: float, epoch: int) -> dict:
        """Train every client in ``starts`` (index -> state) on ``clients``; index -> result."""
        out = {}
        for cohort in self._cohorts(starts, clients):
            out.update(self._train_cohort(cohort, starts, clients, lr, epoch))
        return {i: out[i] for i in sorted(starts)}

    def _cohorts(self, starts, clients) -> list:
        """Clients that step together, each list in order of steps (most first).

        Under batch norm a step's batches must be of one size, so clients of one data size
        step together. Without it every client does: a shorter batch is padded at weight 0.
        """
        size = {i: int(clients[i].y_train.shape[0]) for i in starts}
        order = sorted(starts, key=lambda i: (-size[i], i))
        if not self.has_batchnorm:  # padding is harmless: one cohort
            return [order] if order else []
        groups = {}
        for i in order:
            groups.setdefault(size[i], []).append(i)
        return list(groups.values())

    def _train_cohort(self, ids, starts, clients, lr, epoch) -> dict:
        gens = []
        for i in ids:  # the shuffling streams of SGDTrainer, client by client
            gens.append(torch.Generator().manual_seed(self.seed * 1_000_003 + epoch * 10_007 + i))
            first = int(torch.randint(0, 2**62, (1,), generator=gens[-1]))
            if len(gens) == 1:  # dropout's one stream, seeded as the first client's
                seed_global_stream(first, self.device)
        sizes = [int(clients[i].y_train.shape[0]) for i in ids]
        plan = step_plan(sizes, self.batch_size, self.local_epochs, gens, self.has_batchnorm)
        plan = {k: v.to(self.device) for k, v in plan.items()}
        x = torch.cat([clients[i].x_train for i in ids]).to(self.device)
        y = torch.cat([clients[i].y_train for i in ids]).to(self.device)
        stack = {k: torch.stack([starts[i][k].to(self.device) for i in ids]) for k in self.floats}
        k_all = len(ids)
        stats = torch.zeros((2, k_all), dtype=torch.float64, device=self.device)
        self.net.train(True)
        with self._arithmetic():
            for t, (k, b) in enumerate(
                zip(plan["active"].tolist(), plan["width"].tolist(), strict=True)
            ):
                self._step(stack, x, y, plan, t, k, b, lr, stats)
        out = {}
        for c, i in enumerate(ids):
            end = {k: stack[k][c] for k in self.floats}
            for k in self.counters:  # every batch-norm forward pass in training counts one
                end[k] = starts[i][k].to(self.device) + plan["steps"][c]
            end = {k: end[k] for k in self.keys}
            upd = update_of(starts[i], end, lr, self.update_names)
            n = sizes[c]
            out[i] = LocalResult(end, upd, n, float(stats[0, c]) / n, float(stats[1, c]) / n)
        return out

    def _step(self, stack, x, y, plan, t, k, b, lr, stats) -> None:
        """One SGD step of the first ``k`` clients on their batches at step ``t`` (``b`` wide)."""
        tensors = {n: call_tensor(stack[n][:k].detach(), self.rows[n]) for n in self.floats}
        params = [tensors[n].requires_grad_() for n in self.params]
        idx = plan["idx"][t, :k, :b].T  # (b, k)
        w = plan["weight"][t, :k, :b].T
        xb = client_inputs(x, idx)
        if self.precision == "bf16" and xb.dim() == 4:  # cuDNN's faster layout for bf16
            xb = xb.contiguous(memory_format=torch.channels_last)
        with self._autocast():
            logits = functional_call(self.net, tensors, (xb,))
        if logits.dtype in (torch.bfloat16, torch.float16):  # the loss in float32, as autocast's
            logits = logits.float()
        logits = logits.view(b, k, -1)
        yb = y[idx]
        loss = F.cross_entropy(logits.flatten(0, 1), yb.flatten(), reduction="none").view(b, k)
        per_client = (loss * w).sum(0) / w.sum(0)  # each client's mean loss over its batch
        grads = torch.autograd.grad(per_client.sum(), params)
        with torch.no_grad():  # plain SGD, the eager trainer's call
            torch._foreach_add_(params, list(grads), alpha=-lr)
            last = plan["last"][t, :k]
            stats[0, :k] += ((loss * w).sum(0).double()) * last
            stats[1, :k] += ((logits.argmax(-1) == yb) * w).sum(0).double() * last

    def evaluate_clients(self, states: dict, clients) -> dict:
        """Test error in % of ``states[i]`` on ``clients[i]``'s test split, every client at once."""
        return self.evaluate(states, {i: (clients[i].x_test, clients[i].y_test) for i in states})

    @torch.no_grad()
    def evaluate(self, states: dict, tests: dict, chunk: int = 512) -> dict:
        """Test error in % of ``states[i]`` on ``tests[i] = (x, y)``, index -> float.

        Every client at once, in eval mode (batch norm's running statistics, no dropout):
        nothing couples the samples, so a shorter test set is padded and its padding not
        counted. ``chunk`` rows of every client's test set go through at a time.
        """
        ids = sorted(states)
        if not ids:
            return {}
        tensors = {
            n: call_tensor(torch.stack([states[i][n].to(self.device) for i in ids]), self.rows[n])
            for n in self.floats
        }
        counts = [int(tests[i][1].shape[0]) for i in ids]
        rows = max(counts)
        x = torch.cat([tests[i][0] for i in ids]).to(self.device)
        y = torch.cat([tests[i][1] for i in ids]).to(self.device)
        starts = torch.tensor([0, *counts[:-1]]).cumsum(0)
        wrong = torch.zeros(len(ids), dtype=torch.int64, device=self.device)
        self.net.train(False)
        for r in range(0, rows, chunk):
            pos = torch.arange(r, min(r + chunk, rows))[:, None]  # (b, 1)
            valid = (pos < torch.tensor(counts)[None, :]).to(self.device)  # (b, k)
            first = starts[None, :].to(self.device)
            idx = torch.where(valid, first + pos.to(self.device), 0)  # padding: any real row
            logits = functional_call(self.net, tensors, (client_inputs(x, idx),))
            logits = logits.view(idx.shape[0], len(ids), -1)
            wrong += ((logits.argmax(-1) != y[idx]) & valid).sum(0)
        return {i: 100.0 * int(wrong[c]) / max(counts[c], 1) for c, i in enumerate(ids)}

    def _arithmetic(self):
        """TF32 matrix products for ``gpu_precision`` tf32, restored afterwards."""
        if self.precision != "tf32":
            return contextlib.nullcontext()
        return _tf32_products()

    def _autocast(self):
        if self.precision != "bf16":
            return contextlib.nullcontext()
        return torch.autocast("cuda", dtype=torch.bfloat16)


@contextlib.contextmanager
def _tf32_products():
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def trainer(cfg, model, device) -> BatchedSGDTrainer:
    """The batched trainer of ``cfg``'s clients (``batched_clients``, ``gpu_precision``)."""
    args = (model, cfg.local_epochs, cfg.batch_size, cfg.update_includes_buffers, cfg.seed)
    return BatchedSGDTrainer(*args, device, cfg.option("gpu_precision"))

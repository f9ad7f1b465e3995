"""Local SGD with each step's forward and backward pass replayed as one CUDA graph.

A step of these small networks is dozens of small kernels, and launching them dominates
on a GPU. :class:`GraphedSGDTrainer` records a step once per batch size and replays it.
The SGD update stays eager and the graph runs the same kernels, so a run computes what the
eager one does (neither is bit-reproducible on a GPU: cuDNN's backward sums in no fixed order).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from typing_extensions import override

from ..training.local import SGDTrainer

__all__ = ["GraphedSGDTrainer", "trainer"]

# eager steps before recording: cuDNN and cuBLAS pick their algorithms and workspaces
_WARMUP_STEPS = 3


@dataclass
class _StepGraph:
    graph: torch.cuda.CUDAGraph
    x: torch.Tensor  # (B, ...) the batch's inputs, copied in before each replay
    y: torch.Tensor  # (B,) its labels
    grads: list  # the parameters' gradients as this graph writes them


class GraphedSGDTrainer(SGDTrainer):
    """:class:`SGDTrainer` whose steps replay CUDA graphs, one per batch size and input shape.

    Same parameters as :class:`SGDTrainer`; ``device`` must be a CUDA device. A replay
    needs the workspace model's parameters and buffers to keep their addresses, which
    ``load_state`` does by copying into them.

    Raises
    ------
    ValueError
        If ``device`` is not a CUDA device (CUDA graphs exist only there).
    """

    def __init__(
        self, model, local_epochs, batch_size, include_buffers=False, seed=0, device="cuda"
    ):
        if torch.device(device).type != "cuda":
            raise ValueError(
                f"cuda_graphs needs a CUDA device; got device {str(device)!r} "
                "(turn cuda_graphs off to train on the CPU)"
            )
        super().__init__(model, local_epochs, batch_size, include_buffers, seed, device)
        self._graphs: dict[tuple, _StepGraph] = {}  # (batch size, input shape, dtype) ->
        self._stats = super()._new_stats()  # static: every graph adds into these
        self._pool = None  # the graphs' shared memory pool, made by the first recording

    @override
    def _prepare(self, data) -> None:
        n, shape, dtype = data.y_train.shape[0], tuple(data.x_train.shape[1:]), data.x_train.dtype
        full, last = divmod(n, self.batch_size)
        for b in ({self.batch_size} if full else set()) | ({last} if last else set()):
            if (b, shape, dtype) not in self._graphs and not (b == 1 and self.has_batchnorm):
                self._graphs[b, shape, dtype] = self._record(b, shape, dtype)

    @override
    def _new_stats(self) -> tuple:
        for s in self._stats:
            s.zero_()
        return self._stats

    @override
    def _step(self, x, y, idx, lr: float, stats: tuple) -> None:
        g = self._graphs[idx.numel(), tuple(x.shape[1:]), x.dtype]
        torch.index_select(x, 0, idx, out=g.x)
        torch.index_select(y, 0, idx, out=g.y)
        g.graph.replay()
        with torch.no_grad():  # the eager update of SGDTrainer._step, on this graph's grads
            torch._foreach_add_(self.params, g.grads, alpha=-lr)

    def _record(self, b: int, shape: tuple, dtype) -> _StepGraph:
        """Warm up, then record a forward and backward pass.

        The batch: ``b`` inputs of ``shape`` and ``dtype``, and their labels.

        Recording runs the step for real: it changes the workspace's batch-norm statistics,
        never a client's state, which the caller loads afterwards. Every graph draws on one
        memory pool: they never run at once, and a graph's gradients are read before the
        next replay.
        """
        xb = torch.zeros((b, *shape), dtype=dtype, device=self.device)
        yb = torch.zeros(b, dtype=torch.int64, device=self.device)
        self.model.train(True)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(_WARMUP_STEPS):
                for p in self.params:
                    p.grad = None
                self._forward_backward(xb, yb, self._stats)
        torch.cuda.current_stream(self.device).wait_stream(side)
        for p in self.params:
            p.grad = None  # the graph's backward then writes fresh gradients, not sums
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            self._forward_backward(xb, yb, self._stats)
        self._pool = graph.pool() if self._pool is None else self._pool
        grads = [p.grad for p in self.params]
        for p in self.params:
            p.grad = None
        return _StepGraph(graph, xb, yb, grads)


def trainer(cfg, model, device) -> GraphedSGDTrainer:
    """The trainer of ``cfg``'s clients whose steps replay CUDA graphs (``cuda_graphs``)."""
    args = (model, cfg.local_epochs, cfg.batch_size, cfg.update_includes_buffers, cfg.seed)
    return GraphedSGDTrainer(*args, device)

"""GPU speed, an optional part: many clients at once, CUDA graphs, one queue per GPU.

- :mod:`.batched`: every client of an epoch trained at once on stacked networks
  (:mod:`.stacked`), setting ``batched_clients``; ``gpu_precision`` picks its arithmetic.
- :mod:`.graphs`: each local step replayed as a CUDA graph, setting ``cuda_graphs``.
- :mod:`.queue`: ``reproduce --device cuda``, every grid's runs in one queue on one GPU.
- :mod:`.conclusions`: whether a faster path's set of results keeps the shipped conclusions.
- :mod:`.options`: ``reproduce``'s GPU switches (``--cuda-graphs``, ``--batched-clients``, ...).

Install it with the extra ``gpu`` (a CUDA build of torch); the core finds it through its
entry point (:mod:`hcct_lite.parts`).
"""

from __future__ import annotations

__all__ = ["SETTINGS", "register"]

# The GPU part's settings of a run and their defaults (off: plain training, one client
# at a time)
SETTINGS = {
    "cuda_graphs": False,  # each local step replayed as one CUDA graph (the same kernels)
    "batched_clients": False,  # every client of an epoch at once (another summation order)
    "gpu_precision": "default",  # the arithmetic of batched clients on a GPU
}


def register() -> None:
    """Tell the core what this part adds (its entry point calls this)."""
    from ..parts import register as add

    add("settings", "gpu", "hcct_lite.gpu:SETTINGS", "gpu")
    add("trainer", "batched", "hcct_lite.gpu.batched:trainer", "gpu")
    add("trainer", "graphs", "hcct_lite.gpu.graphs:trainer", "gpu")
    add("check", "gpu", "hcct_lite.gpu.stacked:check_config", "gpu")
    add("runner", "gpu-queue", "hcct_lite.gpu.queue:QueueOptions", "gpu")
    add("grid-options", "gpu", "hcct_lite.gpu.options:GridOptions", "gpu")

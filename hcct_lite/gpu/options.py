"""The options the GPU part adds to ``reproduce``: graphs, batched clients, the queue."""

from __future__ import annotations

import sys

__all__ = ["GridOptions"]


class GridOptions:
    """How ``reproduce`` computes on a GPU (the core's command line asks)."""

    @staticmethod
    def add(p, command: str) -> None:
        """Add the GPU switches and the queue's limits to ``reproduce``'s parser ``p``."""
        if command != "reproduce":
            return
        g = p.add_argument_group("on a GPU (default: each grid's own; results/README.md)")
        g.add_argument(
            "--cuda-graphs",
            action="store_true",
            default=None,  # unset: each grid's own setting
            help="replay each local step as a CUDA graph (the same kernels)",
        )
        g.add_argument(
            "--batched-clients",
            action="store_true",
            default=None,  # unset: each grid's own setting
            help="every client of an epoch at once (another computation)",
        )
        g.add_argument(
            "--gpu-precision",
            choices=["default", "tf32", "bf16"],
            metavar="KIND",
            help="with --batched-clients: default, tf32 or bf16",
        )
        g.add_argument("--deadline", type=float, metavar="S", help="start no run after S seconds")
        g.add_argument("--run-log", metavar="FILE", help="one JSON line per run")
        g.add_argument("--memory-gb", type=float, metavar="X", help="GPU memory to fill (92%%)")

    @staticmethod
    def read(args) -> dict:
        """The GPU settings of every job, and the queue's options where one is asked for."""
        if not hasattr(args, "cuda_graphs"):  # a command this part added nothing to
            return {}
        out = {
            "settings": {
                "cuda_graphs": args.cuda_graphs,
                "batched_clients": args.batched_clients,
                "gpu_precision": args.gpu_precision,
            }
        }
        if args.batched_clients and str(args.device) == "cpu":
            print(
                "note: --batched-clients on the CPU trains every client at once, another "
                "summation order: its results are stored and reused apart from the plain runs",
                file=sys.stderr,
            )
        asked = [
            (f, v)
            for f, v in (
                ("--deadline", args.deadline),
                ("--run-log", args.run_log),
                ("--memory-gb", args.memory_gb),
            )
            if v is not None
        ]
        if not asked:
            return out
        if not str(args.device).startswith("cuda") or getattr(args, "ray", None) is not None:
            raise ValueError(f"{asked[0][0]} needs --device cuda without --ray (the GPU queue)")
        from ..runs.store import check_output_path
        from .queue import QueueOptions

        if args.run_log is not None:
            check_output_path(args.run_log, what="--run-log")
        out["queue"] = QueueOptions(
            workers=args.workers, memory_gb=args.memory_gb, deadline=args.deadline, log=args.run_log
        )
        return out

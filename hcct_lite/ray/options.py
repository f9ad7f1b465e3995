"""``--ray``: the options the Ray part adds to ``compare`` and ``reproduce``."""

from __future__ import annotations

__all__ = ["GridOptions"]


class GridOptions:
    """How ``compare`` and ``reproduce`` run their grids on Ray (the core's command line asks)."""

    @staticmethod
    def add(p, command: str) -> None:
        """Add ``--ray``, ``--gpus-per-run`` and ``--ray-startup-wait`` to ``p``."""
        g = p.add_argument_group("on Ray (docs/many-machines.md)")
        g.add_argument(
            "--ray",
            nargs="?",
            const="local",
            metavar="ADDRESS",
            help="each run a Ray task: none starts Ray here, auto joins the cluster running "
            "here, host:port joins that head",
        )
        g.add_argument(
            "--gpus-per-run", type=float, metavar="X", help="a CUDA run's share of one GPU"
        )
        g.add_argument(
            "--ray-startup-wait", type=float, metavar="S", help="seconds a node may take (60)"
        )

    @staticmethod
    def read(args) -> dict:
        """``{"ray": RayOptions}`` where ``--ray`` is given; raise on its options without it."""
        if args.ray is None:
            for flag, value in (
                ("--gpus-per-run", args.gpus_per_run),
                ("--ray-startup-wait", args.ray_startup_wait),
            ):
                if value is not None:
                    raise ValueError(f"{flag} needs --ray")
            return {}
        from .grid import RayOptions

        address = None if args.ray == "local" else args.ray
        return {"ray": RayOptions(address, args.gpus_per_run, args.ray_startup_wait)}

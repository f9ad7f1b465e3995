"""The deployment's subcommands: ``flower-sim``, ``flower-run`` and ``silo-exec``.

The core's command line (:mod:`hcct_lite.cli`) adds them through :func:`add_commands`,
which this part registers (:mod:`hcct_lite.parts`).
"""

from __future__ import annotations

import importlib.util
import sys

from ..cli.commands import report_run, run_settings
from ..cli.parser import OneScreenHelp, add_run_options
from .flower.simulation import ENGINES

__all__ = ["add_commands", "GridOptions"]


def add_commands(sub) -> None:
    """Add ``flower-sim``, ``flower-run`` and ``silo-exec`` to the subcommands ``sub``."""
    sim = sub.add_parser(
        "flower-sim",
        help="run one experiment as Flower apps, one per silo",
        usage="hcct-lite flower-sim --task NAME --scheme NAME [options]",
        formatter_class=OneScreenHelp,
    )
    group = add_run_options(sim, scheme=True)
    group.add_argument(
        "--engine",
        choices=ENGINES,
        default="inline",
        help="inline: every silo in this process (default); ray: Flower's simulation engine",
    )
    group.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="with --engine ray: the running Ray cluster to use (auto, or its head's host:port)",
    )
    sim.set_defaults(part_command=_flower_sim)
    run = sub.add_parser(
        "flower-run", help="submit a run to a SuperLink (flwr run) and wait for its outcome"
    )
    run.add_argument("app", help="the Flower app folder, e.g. hcct_lite/deploy/flower/app")
    run.add_argument("federation", help="the SuperLink's entry in Flower's config.toml")
    run.add_argument("--run-config", default="", help="flwr run's --run-config string")
    run.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait")
    run.set_defaults(part_command=_flower_run)
    _add_silo_exec(sub)


def _add_silo_exec(sub) -> None:
    ex = sub.add_parser(
        "silo-exec", help="a warm SuperExec for a SuperNode started with --isolation process"
    )
    ex.add_argument(
        "--runtime-api-address",
        default="127.0.0.1:9094",
        help="the SuperNode's Runtime API, host:port (its --port; default 127.0.0.1:9094)",
    )
    ex.add_argument("--insecure", action="store_true", help="the Runtime API has no TLS")
    ex.add_argument("--root-certificates", help="CA of the Runtime API's TLS certificate")
    ex.add_argument(
        "--max-task-seconds",
        type=float,
        default=1800.0,
        help="end a ClientApp task still running after this many seconds (default 1800; 0: "
        "no limit)",
    )
    ex.add_argument(
        "--state-dir",
        help="private folder of the silo's task records, used to answer for a task that died "
        "(default: one per --runtime-api-address in ~/.cache/hcct_lite)",
    )
    ex.set_defaults(part_command=_silo_exec)


def _need_flower(command: str) -> None:
    """Raise the one-line error for ``command`` where Flower is not installed."""
    if importlib.util.find_spec("flwr") is None:
        raise ValueError(f"{command} needs the flower extra: pip install 'hcct-lite[flower]'")


def _flower_run(args) -> int:
    _need_flower("flower-run")
    from .submit import submit_and_wait

    code, message = submit_and_wait(
        args.app, args.federation, args.run_config, timeout=args.timeout
    )
    out = sys.stdout if code == 0 else sys.stderr
    print(message if code == 0 else f"hcct-lite: error: {message}", file=out)
    return code


def _silo_exec(args) -> int:
    _need_flower("silo-exec")
    from .silo_exec import run_silo_exec

    run_silo_exec(
        args.runtime_api_address,
        args.insecure,
        args.root_certificates,
        args.max_task_seconds,
        args.state_dir,
    )
    return 0


def _flower_sim(args) -> int:
    from ..training.config import make_config

    _need_flower("flower-sim")
    from .flower.simulation import run_flower_simulation

    overrides = run_settings(args)
    cfg = make_config(args.task, args.scheme, args.seed, **overrides)
    r = run_flower_simulation(cfg, args.json, engine=args.engine, ray_address=args.ray_address)
    return report_run(
        f"{args.task} / {args.scheme} / seed {args.seed} on Flower ({args.engine})", r, args.json
    )


class GridOptions:
    """``reproduce --norm-limit``: every run of the grids under the norm rule."""

    @staticmethod
    def add(p, command: str) -> None:
        """Add ``--norm-limit`` to ``reproduce``'s parser ``p``."""
        if command == "reproduce":
            p.add_argument(
                "--norm-limit",
                type=float,
                metavar="X",
                help="every run's norm rule (default: each grid's own, off)",
            )

    @staticmethod
    def read(args) -> dict:
        """The norm rule of every job (None: each grid's own)."""
        return {"settings": {"norm_limit": getattr(args, "norm_limit", None)}}

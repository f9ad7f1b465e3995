"""``hcct-lite``'s arguments: one subcommand per job, the options they share.

hcct-lite run --task rotated-digits --scheme hcct --seed 0 --json out.json
hcct-lite compare --task rotated-digits --schemes all --seeds 0 1 2 --out runs/
"""

from __future__ import annotations

import argparse

from ..parts import each
from ..schemes.registry import scheme_names
from ..training.tasks import TASKS

__all__ = ["build_parser", "OVERRIDES", "add_run_options", "OneScreenHelp"]

DESCRIPTION = "Run one HCCT experiment, a resumable grid, or the paper's grids, and check results."


def add_run_options(p: argparse.ArgumentParser, scheme: bool = False):
    """Add a run's settings to ``p`` (``scheme``: --scheme, --seed and --json too).

    The optional parts add theirs (the deployment's defences) as option groups. Returns
    the group "the run", for a command's own options.
    """
    run = p.add_argument_group("the run")
    run.add_argument("--task", required=True, metavar="NAME", help=f"one of {', '.join(TASKS)}")
    if scheme:
        names = ", ".join(scheme_names())
        run.add_argument("--scheme", required=True, metavar="NAME", help=names)
        run.add_argument("--seed", type=int, default=0, metavar="N", help="default 0")
        run.add_argument("--json", metavar="FILE", help="write the result JSON here")
    run.add_argument("--epochs", type=int, metavar="N", help="default: the task's (Table III)")
    run.add_argument("--device", default="cpu", help="auto, cpu (default) or cuda")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    fed = p.add_argument_group("the federation and local training (default: the task's)")
    fed.add_argument("--clients", dest="n_clients", type=int, metavar="N", help="clients N")
    fed.add_argument("--samples", type=int, metavar="N", help="mean samples per client")
    fed.add_argument("--train-ratio", type=float, metavar="X", help="share for training")
    fed.add_argument("--local-epochs", type=int, metavar="N", help="local epochs per epoch")
    fed.add_argument("--batch-size", type=int, metavar="N", help="local SGD batch size")
    fed.add_argument("--lr", type=float, metavar="X", help="learning rate of epoch 0")
    fed.add_argument("--lr-decay", type=float, metavar="X", help="its factor per epoch")
    fed.add_argument("--domains", nargs="+", metavar="NAME", help="digit task: its domains")
    fed.add_argument("--dataset", metavar="NAME", help="image source, e.g. mnist for fmnist")
    fed.add_argument("--initial-clients", type=int, metavar="N", help="clients at epoch 0")
    fed.add_argument("--new-clients", type=int, metavar="N", help="new clients every 10 epochs")
    fed.add_argument("--data-root", metavar="DIR", help="torchvision's data folder")
    fed.add_argument(
        "--no-download", dest="download", action="store_false", default=None, help="offline only"
    )
    sch = p.add_argument_group("the schemes (default: the task's)")
    sch.add_argument("--alpha", type=float, metavar="X", help="HCCT's alpha")
    sch.add_argument("--fixed-groups", type=int, metavar="K", help="HCCT: exactly K groups")
    sch.add_argument("--cluster-models", type=int, metavar="N", help="IFCA, FLSC: models")
    sch.add_argument("--soft-groups", type=int, metavar="N", help="FLSC: models per client")
    sch.add_argument("--maxfl-reference-epochs", type=int, metavar="N", help="MAXFL's reference")
    sch.add_argument(
        "--maxfl-threshold",
        choices=["distance", "reference-loss"],
        metavar="RULE",
        help="MAXFL: distance (the paper's) or reference-loss",
    )
    sch.add_argument("--partition", metavar="GROUPS", help="fixed: the groups, e.g. '0,1|2'")
    authors = "the authors' code"
    sch.add_argument(
        "--update-includes-buffers",
        action="store_true",
        default=None,
        help=f"updates over batch-norm buffers too ({authors})",
    )
    sch.add_argument(
        "--authors-round0",
        action="store_true",
        default=None,
        help=f"epoch 0 is one FedAvg round ({authors})",
    )
    for add in each("options").values():  # the optional parts' settings of a run
        add(p)
    return run


def _overrides() -> tuple:
    """List the RunConfig settings the common options set, each option written once.

    Every option's ``dest`` but the task, the hand-made partition (parsed first) and the
    progress switch: the names of the namespace that parsing just the task gives (every
    option's default is set there, in the order the options were added).
    """
    p = argparse.ArgumentParser(add_help=False)
    add_run_options(p)
    dests = vars(p.parse_args(["--task", "any"]))
    return tuple(d for d in dests if d not in ("task", "partition", "quiet"))


OVERRIDES = _overrides()


class OneScreenHelp(argparse.HelpFormatter):
    """Help on one screen: each option and its help on one line."""

    def __init__(self, prog):
        super().__init__(prog, max_help_position=32, width=100)


class _OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line naming the argument (exit status 2)."""

    def error(self, message):
        self.exit(2, f"hcct-lite: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``hcct-lite`` argument parser, one subcommand per job.

    Training (run, compare) and the paper (reproduce, verify); the optional parts
    add theirs (the deployment: flower-sim, flower-run, silo-exec).
    """
    parser = _OneLineParser(
        prog="hcct-lite", description=DESCRIPTION, formatter_class=OneScreenHelp
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    _add_training_commands(sub)
    _add_paper_commands(sub)
    for add in each("command").values():  # the optional parts' subcommands
        add(sub)
    return parser


def _add_training_commands(sub) -> None:
    """``run`` (one experiment) and ``compare`` (a grid of them)."""
    usage = "hcct-lite run --task NAME --scheme NAME [options]"
    run = sub.add_parser(
        "run", help="run one experiment", usage=usage, formatter_class=OneScreenHelp
    )
    group = add_run_options(run, scheme=True)
    group.add_argument(
        "--cpu-capability",
        choices=["default", "avx2", "avx512", "machine"],
        metavar="KIND",
        help="torch's CPU kernels in a fresh process: default, avx2, avx512, machine",
    )
    cmp_ = sub.add_parser("compare", help="run a grid of schemes x seeds; resumable")
    add_run_options(cmp_)
    cmp_.add_argument("--schemes", nargs="+", default=["all"])
    cmp_.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    cmp_.add_argument("--out", required=True, help="folder for the JSON files and tables")
    cmp_.add_argument(
        "--workers", type=int, default=1, help="processes, one torch thread each (default 1)"
    )
    _store_options(cmp_, capability=None)
    _part_grid_options(cmp_, "compare")


def _add_paper_commands(sub) -> None:
    """``reproduce`` (the paper's grids and report) and ``verify`` (rerun stored results)."""
    rep = sub.add_parser("reproduce", help="the paper's grids at Table III settings; resumable")
    rep.add_argument("--grids", nargs="+", default=["all"], help="grid names, or all")
    rep.add_argument("--seeds", nargs="+", type=int, help="seeds (default: each grid's own)")
    rep.add_argument("--out", default="results", help="results folder (default results/)")
    rep.add_argument("--workers", type=int, default=1, help="processes, one torch thread each")
    rep.add_argument("--device", default="cpu", help="auto, cpu or cuda (default cpu)")
    rep.add_argument("--list", action="store_true", help="list the grids and their run counts")
    rep.add_argument("--no-report", action="store_true", help="do not rewrite the report")
    rep.add_argument("--quiet", action="store_true", help="no progress bar")
    rep.add_argument("--report", default="docs/reproduction.md", help="report to regenerate")
    _store_options(rep, capability="default")
    _part_grid_options(rep, "reproduce")
    ver = sub.add_parser(
        "verify",
        help="rerun stored CPU results (or the canaries) in a fresh process; exit 0: all "
        "reproduce bit for bit, 1: one differs or is refused, 3: one is not rerun (a GPU result)",
    )
    ver.add_argument("results", nargs="*", help="result JSON files (e.g. results/*/hcct-*.json)")
    ver.add_argument(
        "--capability",
        choices=["default", "avx2", "avx512"],
        help="rerun with these CPU kernels (default: each result's recorded ones)",
    )
    ver.add_argument("--json", help="write the comparisons here")
    ver.add_argument(
        "--canaries",
        action="store_true",
        help="rerun the canary runs: the computation is what the compute version says",
    )
    ver.add_argument(
        "--write",
        action="store_true",
        help="with --canaries: store their numbers (after bumping the version you changed)",
    )


def _store_options(p, capability) -> None:
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="say for each run whether it would be reused or run, and why; run and write nothing",
    )
    p.add_argument(
        "--reuse-older",
        action="store_true",
        help="reuse complete results of the same settings of another compute version (each named)",
    )
    p.add_argument(
        "--cpu-capability",
        default=capability,
        choices=["default", "avx2", "avx512", "machine"],
        help="torch's CPU kernels for every run: default, avx2, avx512 or machine "
        f"(default {capability or 'machine'}; on a GPU the CPU's own)",
    )


def _part_grid_options(p, command: str) -> None:
    """The optional parts' options of ``compare`` or ``reproduce`` (Ray, the GPU, the norm rule)."""
    for options in each("grid-options").values():
        options.add(p, command)

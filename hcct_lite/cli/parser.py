"""``hcct-lite``'s arguments: one subcommand per job, the options they share.

hcct-lite run --task rotated-digits --scheme hcct --seed 0 --json out.json
hcct-lite compare --task rotated-digits --schemes all --seeds 0 1 2 --out runs/
"""

from __future__ import annotations

import argparse

from ..flower.simulation import ENGINES
from ..schemes.registry import scheme_names
from ..schemes.robust import AGGREGATORS
from ..training.tasks import TASKS

__all__ = ["build_parser", "OVERRIDES"]

DESCRIPTION = "``hcct-lite``: run one experiment or a resumable grid from the command line."


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", required=True, help=f"one of {', '.join(TASKS)}")
    p.add_argument("--epochs", type=int, help="training epochs (default: the task's)")
    p.add_argument("--alpha", type=float, help="HCCT's alpha (default: the task's, Table III)")
    p.add_argument("--device", default="cpu", help="auto, cpu or cuda (default cpu)")
    p.add_argument("--clients", dest="n_clients", type=int, help="number of clients N")
    p.add_argument("--samples", type=int, help="average samples assigned per client")
    p.add_argument("--train-ratio", type=float, help="share of each client's samples for training")
    p.add_argument("--local-epochs", type=int)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--lr", type=float, help="initial learning rate (decays by --lr-decay)")
    p.add_argument("--lr-decay", type=float)
    p.add_argument("--cluster-models", type=int, help="IFCA/FLSC number of cluster models")
    p.add_argument("--soft-groups", type=int, help="FLSC: cluster models per client")
    p.add_argument(
        "--maxfl-reference-epochs", type=int, help="MAXFL: local epochs of the reference model"
    )
    p.add_argument(
        "--maxfl-threshold",
        choices=["distance", "reference-loss"],
        help="MAXFL: ||w_ref - w_glob||^2 (the paper, default) or the reference's training loss",
    )
    p.add_argument("--fixed-groups", type=int, help="HCCT family: force exactly K groups")
    p.add_argument("--domains", nargs="+", help="digit task: domains (default the paper's five)")
    p.add_argument("--dataset", help="image source, e.g. mnist for the fmnist task offline")
    p.add_argument(
        "--update-includes-buffers",
        action="store_true",
        default=None,
        help="updates over every state entry, batch-norm buffers included (the authors' code)",
    )
    p.add_argument(
        "--authors-round0",
        action="store_true",
        default=None,
        help="epoch 0 is one FedAvg round for every client (the authors' code)",
    )
    _defence_options(p)
    p.add_argument("--initial-clients", type=int, help="incoming clients: clients at epoch 0")
    p.add_argument("--new-clients", type=int, help="incoming clients: new ones every 10 epochs")
    p.add_argument("--data-root", help="torchvision data root (default ~/.cache/hcct_lite)")
    p.add_argument("--no-download", dest="download", action="store_false", default=None)
    p.add_argument("--partition", help="the 'fixed' scheme's groups, e.g. '0,1|2'")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _defence_options(p) -> None:
    """The options of the defence against crafted replies (docs/deploy.md)."""
    p.add_argument(
        "--norm-limit",
        type=float,
        help="reject a reply whose update is this many times the round's median, as it stands "
        "and per local step (default 0: off, the paper's; a deployment's app sets 20)",
    )
    p.add_argument(
        "--aggregator",
        choices=AGGREGATORS,
        help="how a group's models become one: mean (FedAvg, the paper's; default) or a "
        "robust rule (docs/deploy.md)",
    )
    p.add_argument(
        "--clip-factor", type=float, help="robust rules: clip to this x the median (default 4)"
    )
    p.add_argument(
        "--trim-fraction", type=float, help="trimmed-mean: share dropped each side (0.25)"
    )
    p.add_argument(
        "--count-bound",
        type=float,
        help="a declared sample count counts at most this many times the median count "
        "(steps, clip, norm allowance, weight; default 0: as declared)",
    )


def _overrides() -> tuple:
    """List the RunConfig settings the common options set, each option written once.

    Every option's ``dest`` but the task, the hand-made partition (parsed first) and the
    progress switch: the names of the namespace that parsing just the task gives (every
    option's default is set there, in the order the options were added).
    """
    p = argparse.ArgumentParser(add_help=False)
    _common(p)
    dests = vars(p.parse_args(["--task", "any"]))
    return tuple(d for d in dests if d not in ("task", "partition", "quiet"))


OVERRIDES = _overrides()


class _OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line naming the argument (exit status 2)."""

    def error(self, message):
        self.exit(2, f"hcct-lite: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``hcct-lite`` argument parser, one subcommand per job.

    Training (run, flower-sim, compare), deployment (flower-run, silo-exec) and the paper
    (reproduce, verify).
    """
    parser = _OneLineParser(prog="hcct-lite", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    _add_training_commands(sub)
    _add_deployment_commands(sub)
    _add_paper_commands(sub)
    return parser


def _add_training_commands(sub) -> None:
    """``run``, ``flower-sim`` (one experiment) and ``compare`` (a grid of them)."""
    run = sub.add_parser("run", help="run one experiment")
    sim = sub.add_parser("flower-sim", help="run one experiment as Flower apps, one per silo")
    for p in (run, sim):
        _common(p)
        p.add_argument("--scheme", required=True, help=f"one of {', '.join(scheme_names())}")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--json", help="write the result JSON here")
    run.add_argument(
        "--cpu-capability",
        choices=["default", "avx2", "avx512", "machine"],
        help="torch's CPU kernels, in a fresh process of one thread (default: this process, "
        "the machine's own)",
    )
    sim.add_argument(
        "--engine",
        choices=ENGINES,
        default="inline",
        help="inline: every silo in this process (default); ray: Flower's simulation engine",
    )
    sim.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="with --engine ray: the running Ray cluster to use (auto, or its head's host:port)",
    )
    cmp_ = sub.add_parser("compare", help="run a grid of schemes x seeds; resumable")
    _common(cmp_)
    cmp_.add_argument("--schemes", nargs="+", default=["all"])
    cmp_.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    cmp_.add_argument("--out", required=True, help="folder for the JSON files and tables")
    cmp_.add_argument(
        "--workers", type=int, default=1, help="processes, one torch thread each (default 1)"
    )
    _store_options(cmp_, capability=None)
    _cluster_options(cmp_)


def _add_deployment_commands(sub) -> None:
    """``flower-run`` (submit to a SuperLink) and ``silo-exec`` (a silo's warm executor)."""
    sub_ = sub.add_parser(
        "flower-run", help="submit a run to a SuperLink (flwr run) and wait for its outcome"
    )
    sub_.add_argument("app", help="the Flower app folder, e.g. hcct_lite/flower/app")
    sub_.add_argument("federation", help="the SuperLink's entry in Flower's config.toml")
    sub_.add_argument("--run-config", default="", help="flwr run's --run-config string")
    sub_.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait")
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
    rep.add_argument(
        "--norm-limit",
        type=float,
        help="every run's norm rule (default each grid's own: off, the paper's algorithm; e.g. "
        "20 reruns the grids under the rule)",
    )
    _gpu_options(rep)
    _store_options(rep, capability="default")
    _cluster_options(rep)
    ver = sub.add_parser(
        "verify", help="rerun stored CPU results in a fresh process; exit 0 if they reproduce"
    )
    ver.add_argument("results", nargs="+", help="result JSON files (e.g. results/*/hcct-*.json)")
    ver.add_argument(
        "--capability",
        choices=["default", "avx2", "avx512"],
        help="rerun with these CPU kernels (default: each result's recorded ones)",
    )
    ver.add_argument("--json", help="write the comparisons here")
    can = sub.add_parser(
        "canaries",
        help="rerun the canary runs and compare them bit for bit with the stored ones; exit 0 "
        "if the computation is what the compute version says",
    )
    can.add_argument(
        "--write",
        action="store_true",
        help="store the canaries' numbers (after bumping the version of the part you changed)",
    )


def _gpu_options(rep) -> None:
    """``reproduce``'s ways of computing on a GPU: graphs, batched clients, precision."""
    rep.add_argument(
        "--cuda-graphs",
        action="store_true",
        default=None,  # unset: each grid's own setting
        help="with --device cuda: replay each local step as a CUDA graph (the same kernels, "
        "fewer launches)",
    )
    rep.add_argument(
        "--batched-clients",
        action="store_true",
        default=None,  # unset: each grid's own setting
        help="train every client of an epoch at once on stacked networks (another summation "
        "order: another computation, stored as such)",
    )
    rep.add_argument(
        "--gpu-precision",
        choices=["default", "tf32", "bf16"],
        help="with --batched-clients on a GPU: tf32 matrix products, or bf16 activations with "
        "channels_last (default: torch's own arithmetic)",
    )
    rep.add_argument(
        "--deadline",
        type=float,
        help="with --device cuda: start no run after this many seconds, nor one expected to end "
        "after them (a lease of a few minutes ends with whole results; rerun to resume)",
    )
    rep.add_argument(
        "--run-log",
        help="with --device cuda: append one JSON line per finished or failed run (start, end, "
        "runs in flight, expected and peak memory)",
    )
    rep.add_argument(
        "--memory-gb", type=float, help="with --device cuda: GPU memory to fill (default 92%%)"
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


def _cluster_options(p) -> None:
    p.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="run each run as a Ray task: no ADDRESS starts Ray on this machine, auto joins "
        "the cluster running here, host:port joins that head (docs/many-machines.md)",
    )
    p.add_argument(
        "--gpus-per-run",
        type=float,
        help="with --ray and a CUDA device: a run's share of one GPU (default by task)",
    )
    p.add_argument(
        "--ray-startup-wait",
        type=float,
        help="with --ray: seconds Ray waits for a node to start (default 60)",
    )

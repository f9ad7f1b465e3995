"""What each ``hcct-lite`` subcommand does with its parsed arguments (:data:`COMMANDS`).

Each returns the exit status; bad input raises ``ValueError`` (or ``RuntimeError``,
``DataNotFoundError``), which :func:`hcct_lite.cli.main` turns into one line and status 2.
"""

from __future__ import annotations

import sys

from ..parts import each
from ..training.config import SCHEMES
from .parser import OVERRIDES

__all__ = ["COMMANDS", "report_run", "run_settings"]


def grid_options(args) -> dict:
    """What the optional parts read from ``compare``'s or ``reproduce``'s options.

    ``settings``: the settings they add to every job (None: each grid's own); the rest are
    :func:`~hcct_lite.runs.runner.run_jobs`' keywords (``ray``, ``queue``).
    """
    out = {"settings": {}}
    for options in each("grid-options").values():
        got = dict(options.read(args))
        out["settings"].update(got.pop("settings", {}))
        out.update(got)
    return out


def _capability(args):
    """The CPU kernels to pin: None for the machine's own or for a GPU run."""
    if args.cpu_capability in (None, "machine") or getattr(args, "device", "cpu") != "cpu":
        return None
    return args.cpu_capability


def _verify(args) -> int:
    from ..runs.results import write_json
    from ..runs.store import check_output_path
    from ..runs.verify import load_for_verify, verify

    if args.canaries:
        if args.results or args.capability or args.json:
            raise ValueError("--canaries reruns the canaries alone: name no results with it")
        return _canaries(args)
    if args.write:
        raise ValueError("--write stores the canaries' numbers: use it with --canaries")
    if not args.results:
        raise ValueError("name the result files to rerun (or --canaries)")
    if args.json is not None:
        check_output_path(args.json, what="--json")
    stored = [load_for_verify(p) for p in args.results]  # all checked before the first rerun
    pairs = zip(args.results, stored, strict=True)
    reports = [verify(p, args.capability, stored=r) for p, r in pairs]
    if args.json is not None:
        write_json(args.json, reports)
    # 1: one differs or is refused; 3: none does, but one was not rerun (a GPU result where
    # no GPU is, checked without a rerun); 0: every one reran and reproduces
    if any(r["reproduces"] is False for r in reports):
        return 1
    return 3 if any(r["reproduces"] is None for r in reports) else 0


def _canaries(args) -> int:
    from ..reproduction.paper_grids import grids_using
    from ..runs import canary

    stored = canary.load_canaries() if canary.CANARY_FILE.exists() or not args.write else {}
    fresh = canary.run_canaries()
    for name, entry in fresh.items():
        if "unavailable" in entry:
            print(f"not run: {name} ({entry['unavailable']})")
    if args.write:
        canary.write_canaries(fresh, stored=stored)
        print(f"wrote {len(fresh)} canaries to {canary.CANARY_FILE}")
        return 0
    problems, changed = canary.canary_problems(stored, fresh)
    for line in problems:
        print(line)
    if changed:
        print(canary.change_report(stored, fresh, changed, grids_using))
    if problems or changed:
        return 1
    ran = sum("unavailable" not in e for e in fresh.values())
    print(f"{ran} canaries give the stored numbers bit for bit")
    return 0


def _check_settings(jobs, settings: dict) -> None:
    """Raise ``ValueError`` where the settings the options add to every job are out of range.

    Checked on their own, with the first job's task and scheme, so that the message starts
    with the setting (which :func:`hcct_lite.cli.main` leads with the option typed); each
    whole job is checked when the grid runs.
    """
    from ..training.config import make_config

    given = {k: v for k, v in settings.items() if v is not None}
    if jobs and given:
        make_config(jobs[0].task, jobs[0].scheme, jobs[0].seed, **given)


def _reproduce(args) -> int:
    from ..reproduction.paper_grids import GRIDS, PAPER_PART, grid_jobs
    from ..runs.jobs import with_settings
    from ..runs.runner import run_jobs
    from ..runs.store import check_output_path

    if args.workers < 1:
        raise ValueError(f"--workers must be >= 1; got {args.workers}")
    names = list(GRIDS) if args.grids == ["all"] else args.grids
    parts = grid_options(args)  # refused before --out is made
    jobs = grid_jobs(names, args.seeds)
    settings = parts.pop("settings")
    _check_settings(jobs, settings)  # --list too: it would list runs that cannot be made
    jobs = with_settings(jobs, **settings)
    if args.list:
        for name in names:
            runs = sum(j.grid == name for j in jobs)
            print(f"{name:24s} {runs:4d} runs  {PAPER_PART[name]}")
        return 0
    if not args.dry_run:
        check_output_path(args.out, folder=True, what="--out")
    run_jobs(
        jobs,
        args.out,
        args.workers,
        args.device,
        progress=not args.quiet,
        reuse_older=args.reuse_older,
        cpu_capability=_capability(args),
        dry_run=args.dry_run,
        **parts,
    )
    if not args.no_report and not args.dry_run:
        from ..reproduction.report import write_report

        write_report(args.out, args.report)
        print(f"wrote {args.report}")
    return 0


def report_run(label: str, r: dict, json_path: str | None = None) -> int:
    """Print one run's outcome; 0 if it completed, 1 (with the reason) if it stopped.

    ``json_path``: where the result was written (None: nowhere, and the message says how
    to keep a partial result next time).
    """
    for rej in r.get("rejected", []):
        print(f"rejected: epoch {rej['epoch']}, client {rej['client']}: {rej['reason']}")
    status = r.get("status", {"state": "complete"})
    if status["state"] != "complete":
        kept = (
            f"the partial result is in {json_path}"
            if json_path
            else "add --json PATH to keep the partial result"
        )
        print(
            f"hcct-lite: error: {label} stopped in epoch {status['epoch']}: {status['reason']} "
            f"({kept})",
            file=sys.stderr,
        )
        return 1
    f = r["final"]
    print(
        f"{label}: mean test error {f['mean']:.2f}% (std {f['std']:.2f}, min {f['min']:.2f}, "
        f"max {f['max']:.2f}); final groups {r['history'][-1]['groups']}"
    )
    return 0


def run_settings(args) -> dict:
    """The RunConfig settings the options set, the hand-made partition parsed.

    The output paths are checked here, before any training (not for a dry run, which
    writes nothing).
    """
    from ..runs.store import check_output_path

    overrides = {k: getattr(args, k) for k in OVERRIDES}
    if args.partition is not None:
        from ..training.config import parse_partition

        overrides["partition"] = parse_partition(args.partition)
    if getattr(args, "dry_run", False):
        return overrides
    if getattr(args, "json", None) is not None:
        check_output_path(args.json, what="--json")
    if args.command == "compare":
        check_output_path(args.out, folder=True, what="--out")
    return overrides


def _run(args) -> int:
    from ..runs.runner import run_one

    r = run_one(
        args.task,
        args.scheme,
        args.seed,
        args.json,
        progress=not args.quiet,
        cpu_capability=_capability(args),
        **run_settings(args),
    )
    return report_run(f"{args.task} / {args.scheme} / seed {args.seed}", r, args.json)


def _compare(args) -> int:
    from ..runs.results import save_tables
    from ..runs.runner import run_grid

    overrides = run_settings(args)
    schemes = list(SCHEMES) if args.schemes == ["all"] else args.schemes
    results = run_grid(
        args.task,
        schemes,
        args.seeds,
        args.out,
        progress=not args.quiet,
        workers=args.workers,
        reuse_older=args.reuse_older,
        cpu_capability=_capability(args),
        **{k: v for k, v in grid_options(args).items() if k != "settings"},
        dry_run=args.dry_run,
        **overrides,
    )
    if not args.dry_run:
        print(save_tables(results, schemes, [args.task], args.out))
    return 0


COMMANDS = {
    "run": _run,
    "compare": _compare,
    "reproduce": _reproduce,
    "verify": _verify,
}

"""The numbers of ``docs/reproduction.md``: tables of the shipped results in ``results/``.

Every number in the report is computed here from the result files; the prose around it
states what the numbers show, so regenerating the report after more runs keeps it true.
Two protocols are shown everywhere: the **final** epoch (ours, honest: no test data is
used to pick anything) and the **best epoch** of each client selected on its test split
(what the authors' code reports, so the column to compare with the paper).
"""

from __future__ import annotations

import glob
import os

import numpy as np

from ..training.config import SCHEMES
from .paper import TABLE_II, TABLE_IV, TABLE_V
from .paper_grids import GRIDS, PATTERNS, TABLE1_NAMES, grid_jobs
from .runner import job_path
from .store import load_result

__all__ = [
    "setup_table",
    "load_grid",
    "grid_status",
    "by_scheme",
    "protocol_table",
    "table1_rows",
    "per_client_rows",
    "pm",
]


def load_grid(out_dir: str, grid: str) -> list:
    """Every result JSON of ``grid`` under ``out_dir``, sorted by file name.

    Raises ``ValueError`` naming a file that is not a complete, well-formed result.
    """
    out = []
    for path in sorted(glob.glob(os.path.join(out_dir, grid, "*.json"))):
        try:  # a table never mixes in a broken run
            out.append(load_result(path))
        except ValueError as err:
            raise ValueError(f"{err}; rerun its grid") from None
    return out


def variant(run: dict) -> str:
    """A run's name without its seed: ``"ratio0.1-alpha100-seed2"`` -> ``"ratio0.1-alpha100"``."""
    return run["name"].rsplit("-seed", 1)[0]


def complete_seeds(runs) -> list:
    """The runs of the seeds that every variant present has run, so means compare alike.

    A partly shipped grid (say K = 1..20 at seed 0 but only K = 1..3 at seed 1) would
    otherwise average some variants over more seeds than others. Federations of different
    sizes (``config["n_clients"]``, Fig. 6's N) are separate comparisons: each keeps the
    seeds that all of its own variants have.
    """
    by_size = {}
    for r in runs:
        by_size.setdefault(r.get("config", {}).get("n_clients"), []).append(r)
    keep = set()
    for group in by_size.values():
        seeds = {}
        for r in group:
            seeds.setdefault(variant(r), set()).add(r["seed"])
        common = set.intersection(*seeds.values())
        keep |= {id(r) for r in group if r["seed"] in common}
    return [r for r in runs if id(r) in keep]


def grid_status(out_dir: str) -> list:
    """One row per grid: name, runs done, runs planned, devices, summed run seconds."""
    rows = []
    for name in GRIDS:
        jobs = grid_jobs([name])
        done = [j for j in jobs if os.path.exists(job_path(out_dir, j))]
        runs = load_grid(out_dir, name)
        devices = sorted({r.get("provenance", {}).get("device", "?") for r in runs})
        # files written before the "timing" block kept their wall time in "seconds"
        secs = sum(r.get("timing", {}).get("seconds", r.get("seconds", 0.0)) for r in runs)
        rows.append([name, f"{len(done)} / {len(jobs)}", ", ".join(devices) or "-", f"{secs:.0f}"])
    return rows


def _stats(values) -> tuple:
    v = np.asarray(values, dtype=np.float64)
    return float(v.mean()), float(v.std()), len(v)


def pm(mean, std, n=None) -> str:
    """``"mean ± std"``, with ``" (n)"`` seeds when ``n`` is given."""
    return f"{mean:.2f} ± {std:.2f}" + ("" if n is None else f" ({n})")


def by_scheme(runs) -> dict:
    """``scheme -> (final (mean, std, n), best (mean, std, n))`` over seeds."""
    out = {}
    for s in SCHEMES:
        rs = [r for r in runs if r["scheme"] == s]
        if rs:
            out[s] = (
                _stats([r["final"]["mean"] for r in rs]),
                _stats([r["final"]["best_over_epochs"]["mean"] for r in rs]),
            )
    return out


def protocol_table(runs, task: str) -> list:
    """Table IV rows for one task: scheme, paper, final epoch, best epoch (seeds in brackets)."""
    stats = by_scheme(runs)
    rows = []
    for s in SCHEMES:
        paper = TABLE_IV.get(s, {}).get(task)
        row = [s, pm(*paper) if paper else "-"]
        row += [pm(*stats[s][0]), pm(*stats[s][1])] if s in stats else ["pending", "pending"]
        rows.append(row)
    return rows


def per_client_rows(runs) -> list:
    """Table V (Digit): mean, std, min, max over clients (seed-averaged), both protocols."""
    rows = []
    for s in SCHEMES:
        rs = [r for r in runs if r["scheme"] == s]
        if not rs:
            continue
        fin = np.mean([[r["final"][k] for k in ("mean", "std", "min", "max")] for r in rs], 0)
        best = np.mean(
            [
                [r["final"]["best_over_epochs"][k] for k in ("mean", "std", "min", "max")]
                for r in rs
            ],
            0,
        )
        paper = TABLE_V.get(s)
        rows.append(
            [s, " / ".join(f"{x:.2f}" for x in fin), " / ".join(f"{x:.2f}" for x in best)]
            + [" / ".join(f"{x:.2f}" for x in paper) if paper else "-"]
        )
    return rows


def table1_rows(runs) -> list:
    """Table II's rows, one per collaboration pattern.

    Each client's final error (mean ± std over seeds), the mean and std over clients, the
    best-epoch mean, and the paper's mean and std.
    """
    rows = []
    for name in PATTERNS:
        rs = [r for r in runs if variant(r) == name]
        if not rs:
            rows.append([name] + ["pending"] * 6)
            continue
        errs = np.array([r["final"]["client_test_error"] for r in rs])
        clients = [pm(errs[:, c].mean(), errs[:, c].std()) for c in range(errs.shape[1])]
        best = np.mean([r["final"]["best_over_epochs"]["mean"] for r in rs])
        paper = TABLE_II.get(TABLE1_NAMES.get(name, name))
        ref = f"{paper['mean']:.2f} / {paper['std']:.2f}" if paper else "-"
        mean_std = f"{errs.mean(1).mean():.2f} / {errs.std(1).mean():.2f}"
        rows.append([f"{name} ({len(rs)})", *clients, mean_std, f"{best:.2f}", ref])
    return rows


# Table III's rows: (label, how to read the value from one run's config and sizes)
SETUP_ROWS = [
    ("clients N", lambda c, s: str(c["n_clients"])),
    ("training samples per client (mean)", lambda c, s: f"{np.mean(s):.0f}"),
    ("batch size", lambda c, s: str(c["batch_size"])),
    ("learning rate", lambda c, s: f"{c['lr']:g} x {c['lr_decay']:g}^(t-1)"),
    ("local epochs", lambda c, s: str(c["local_epochs"])),
    ("training epochs", lambda c, s: str(c["epochs"])),
    ("groups (IFCA, FLSC)", lambda c, s: str(c["cluster_models"])),
    ("soft groups (FLSC)", lambda c, s: str(c["soft_groups"])),
]


def setup_table(runs_by_task: dict):
    """Table III's settings as the runs used them: ``(header, rows)``, one column per task.

    Parameters
    ----------
    runs_by_task : task -> list of result dicts (every scheme); the values are read from
        the runs' own configs, so they describe what was run, in any mode
    """
    tasks = list(runs_by_task)
    first = {t: runs_by_task[t][0] for t in tasks}
    rows = [[label] + [get(first[t]["config"], first[t]["sizes"]) for t in tasks]
            for label, get in SETUP_ROWS]  # fmt: skip
    for scheme in ("hcct", "hcct-e", "hcct-p"):
        alphas = []
        for t in tasks:
            found = {r["config"]["alpha"] for r in runs_by_task[t] if r["scheme"] == scheme}
            alphas.append("/".join(f"{a:g}" for a in sorted(found)) or "-")
        rows.append([f"alpha ({scheme.upper()})"] + alphas)
    return ["setting"] + tasks, rows

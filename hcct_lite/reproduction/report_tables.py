"""The numbers of ``docs/reproduction.md``: table rows and words computed from result files.

Both protocols: the final epoch, and each client's best epoch (the authors' protocol).
"""

from __future__ import annotations

import os

import numpy as np

from ..runs.jobs import job_path
from ..runs.reading import by_scheme, load_grid, variant
from ..runs.results import format_pm, pm, table3, table4
from ..training.config import SCHEMES
from .paper import TABLE_II, TABLE_III, TABLE_III_ALPHA, TABLE_IV, TABLE_V
from .paper_grids import GRIDS, PATTERNS, TABLE1_NAMES, grid_jobs

__all__ = [
    "defences_ran",
    "epoch0_best",
    "setup_table",
    "setup_beside_paper",
    "grid_status",
    "protocol_table",
    "against_paper",
    "table2_against_paper",
    "table1_rows",
    "per_client_rows",
    "pm",
    "beside_paper",
    "domain_cosines",
    "ablation_summary",
]


def defences_ran(runs) -> str:
    """Which defences ``runs`` ran under, as words.

    ``none`` (the paper's algorithm), the norm rule's limit, a robust aggregator; with each
    one's run count where the runs differ.
    """

    def name(cfg) -> str:
        parts = [f"norm rule {cfg['norm_limit']:g}"] if cfg["norm_limit"] else []
        parts += [] if cfg["aggregator"] == "mean" else [cfg["aggregator"]]
        return ", ".join(parts) or "none"

    counts = {}
    for r in runs:
        counts[name(r["config"])] = counts.get(name(r["config"]), 0) + 1
    if len(counts) == 1:
        return next(iter(counts))
    return "; ".join(f"{k} ({n})" for k, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def grid_status(out_dir: str) -> list:
    """One row per grid: name, runs done / planned, devices, summed run seconds, defences.

    The defences its runs ran under (:func:`defences_ran`), and how many replies they
    refused.
    """
    rows = []
    for name in GRIDS:
        jobs = grid_jobs([name])
        done = [j for j in jobs if os.path.exists(job_path(out_dir, j))]
        runs = load_grid(out_dir, name)
        devices = sorted({r.get("provenance", {}).get("device", "?") for r in runs})
        # files written before the "timing" block kept their wall time in "seconds"
        secs = sum(r.get("timing", {}).get("seconds", r.get("seconds", 0.0)) for r in runs)
        refused = sum(len(r.get("rejected") or []) for r in runs)
        rows.append(
            [
                name,
                f"{len(done)} / {len(jobs)}",
                ", ".join(devices) or "-",
                f"{secs:.0f}",
                defences_ran(runs) if runs else "-",
                str(refused),
            ]
        )
    return rows


def _client_errors(history, i: int) -> list:
    """``[(epoch, error)]`` of client ``i`` over the epochs it answered in."""
    errors = [(t, h["client_test_error"]) for t, h in enumerate(history)]
    return [(t, e[i]) for t, e in errors if i < len(e) and e[i] is not None]


def epoch0_best(runs) -> dict:
    """``scheme -> (clients, of, best, best without epoch 0)`` where some best epoch is 0.

    ``clients`` of the ``of`` client-runs (clients x seeds) have their lowest test error in
    epoch 0, before any aggregation, and in no later epoch; ``best`` is the scheme's
    best-epoch mean error (seed mean) and the last its value with epoch 0 left out of the
    selection.
    """
    out = {}
    for s in SCHEMES:
        rs = [r for r in runs if r["scheme"] == s]
        at0, total, without = 0, 0, []
        for r in rs:
            best = []
            for i in range(len(r["history"][-1]["client_test_error"])):
                errors = _client_errors(r["history"], i)
                later = [e for t, e in errors if t > 0]
                total += 1
                at0 += bool(later) and errors[0][0] == 0 and errors[0][1] < min(later)
                if later:
                    best.append(min(later))
            without.append(np.mean(best))
        if at0:
            kept = float(np.mean([r["final"]["best_over_epochs"]["mean"] for r in rs]))
            out[s] = (at0, total, kept, float(np.mean(without)))
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


def against_paper(runs, task: str) -> str:
    """Whether our best-epoch mean errors lie below or above the paper's Table IV, in words.

    Over the schemes both have: ``"lower than the paper's for every scheme (7)"``, ``"higher
    ... for every scheme"``, or how many are lower. A description of two sets of numbers, not
    a verdict (the paper's runs are not ours to pair seed by seed).
    """
    stats = by_scheme(runs)
    ours = {s: stats[s][1][0] for s in stats if task in TABLE_IV.get(s, {})}
    return _sides([(m, TABLE_IV[s][task][0]) for s, m in ours.items()], "scheme")


def _sides(pairs, unit: str) -> str:
    """Words for ``(ours, paper)`` pairs: lower or higher than the paper's, everywhere or not."""
    if not pairs:
        return f"no {unit} has both our runs and the paper's number"
    lower = sum(o < p for o, p in pairs)
    if lower in (0, len(pairs)):
        side = "lower" if lower else "higher"
        return f"{side} than the paper's for every {unit} ({len(pairs)})"
    return f"lower than the paper's for {lower} of {len(pairs)} {unit}s, higher for the others"


def table2_against_paper(runs) -> str:
    """Whether our per-client final errors of Table II lie below or above the paper's, in words.

    One cell per client of each pattern both have: our seed mean against the paper's mean.
    """
    pairs = []
    for name in PATTERNS:
        rs = [r for r in runs if variant(r) == name]
        paper = TABLE_II.get(TABLE1_NAMES.get(name, name))
        if rs and paper:
            errs = np.array([r["final"]["client_test_error"] for r in rs]).mean(0)
            pairs += [(o, p) for o, (p, _) in zip(errs, paper["clients"], strict=True)]
    return _sides(pairs, "cell")


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
    rows = [
        [label] + [get(first[t]["config"], first[t]["sizes"]) for t in tasks]
        for label, get in SETUP_ROWS
    ]
    for scheme in ("hcct", "hcct-e", "hcct-p"):
        alphas = []
        for t in tasks:
            found = {r["config"]["alpha"] for r in runs_by_task[t] if r["scheme"] == scheme}
            alphas.append("/".join(f"{a:g}" for a in sorted(found)) or "-")
        rows.append([f"alpha ({scheme.upper()})"] + alphas)
    return ["setting"] + tasks, rows


def setup_beside_paper(runs_by_task: dict) -> tuple:
    """Table III as our runs used it, beside the paper's: ``(header, rows, differences)``.

    A cell reads ours, with the paper's value in brackets where the two differ. Samples per
    client are averaged over every run of the task; ``differences`` lists ``(task, setting,
    ours, paper)`` for each such cell.
    """
    header, rows = setup_table(runs_by_task)
    tasks = header[1:]
    samples = {t: f"{np.mean([np.mean(r['sizes']) for r in runs_by_task[t]]):.0f}" for t in tasks}
    domains = {}
    for t in tasks:
        seen = [d for r in runs_by_task[t] for d in r.get("domains") or []]
        domains[t] = ", ".join(dict.fromkeys(seen)) or "-"
    rows.insert(1, ["domains"] + [domains[t] for t in tasks])
    differences, out = [], []
    for label, *cells in rows:
        if label == "training samples per client (mean)":
            cells = [samples[t] for t in tasks]
        row = [label]
        for t, ours in zip(tasks, cells, strict=True):
            paper = TABLE_III.get(t, {}).get(label)
            if label.startswith("alpha ("):
                a = TABLE_III_ALPHA.get(label[7:-1].lower(), {}).get(t)
                paper = None if a is None else f"{a:g}"
            if paper is None or paper == ours:
                row.append(ours)
            else:
                row.append(f"{ours} (paper: {paper})")
                differences.append((t, label, ours, paper))
        out.append(row)
    return header, out, differences


def domain_cosines(cosines, domains) -> tuple:
    """Mean update cosine between clients of the same domain, and of different domains.

    Parameters
    ----------
    cosines : array (N, N), the clients' pairwise update cosines
    domains : sequence (N,), each client's domain

    Returns
    -------
    (same, other) : floats; ``same`` is NaN when no two clients share a domain
    """
    cos = np.asarray(cosines, dtype=np.float64)
    dom = np.asarray(domains)
    if cos.shape != (len(dom), len(dom)):
        raise ValueError(f"cosines has shape {cos.shape}; expected ({len(dom)}, {len(dom)})")
    same = dom[:, None] == dom[None, :]
    off = ~np.eye(len(dom), dtype=bool)
    pick = cos[same & off]
    return (float(pick.mean()) if pick.size else float("nan")), float(cos[~same].mean())


def ablation_summary(runs, seed: int | None = None) -> dict:
    """The buffer ablation's runs summarised: ``label -> dict``, labels as in the run names.

    Each dict holds ``cosines`` (N, N) of the first epoch that recorded them, ``clients``
    (their order), ``domains`` (N,), ``same``/``other`` (mean cosine within / across
    domains, :func:`domain_cosines`), ``groups`` (number at the end) and ``final`` (mean
    final error). With ``seed``, only that seed's runs; otherwise one entry per run name.
    """
    out = {}
    for r in runs:
        if seed is not None and r["seed"] != seed:
            continue
        h = next(h for h in r["history"] if "update_cosines" in h)
        cos, who = np.array(h["update_cosines"]), h["update_clients"]
        domains = np.array(r["domains"])[who]
        same, other = domain_cosines(cos, domains)
        label = r["name"] if seed is None else variant(r)
        out[label] = dict(
            cosines=cos,
            clients=who,
            domains=domains.tolist(),
            same=same,
            other=other,
            groups=len(r["history"][-1]["groups"]),
            final=r["final"]["mean"],
        )
    return out


def beside_paper(results, schemes, tasks):
    """Table IV and Table V with the paper's numbers beside ours.

    Both protocols beside the paper's: the final epoch (ours: nothing selected on test
    data) and each client's best epoch selected on its test split (the authors' code's,
    so the column to compare with the paper). Returns ``(t3, t4)``, each as ``(header,
    rows)``; Table V (final epoch, plus the best-epoch mean) is for the Digit task when
    present.
    """
    final, best = table3(results), table3(results, "best")
    header3 = ["scheme"] + [
        c for t in tasks for c in (f"{t} final", f"{t} best epoch", f"{t} (paper)")
    ]
    rows3 = [
        [s]
        + [
            c
            for t in tasks
            for c in (
                format_pm(final.get((t, s))),
                format_pm(best.get((t, s))),
                format_pm(TABLE_IV.get(s, {}).get(t)),
            )
        ]
        for s in schemes
    ]
    t4 = table4(results)
    header4 = [
        "scheme",
        "mean",
        "std",
        "min",
        "max",
        "best-epoch mean",
        "paper mean",
        "paper std",
        "paper min",
        "paper max",
    ]
    rows4 = []
    for s in schemes:
        if ("digit", s) not in t4:
            continue
        ref = TABLE_V.get(s)
        rows4.append(
            [
                s,
                *(f"{x:.2f}" for x in t4[("digit", s)]),
                f"{best[('digit', s)][0]:.2f}",
                *((f"{x:.2f}" for x in ref) if ref else ["-"] * 4),
            ]
        )
    return (header3, rows3), (header4, rows4)

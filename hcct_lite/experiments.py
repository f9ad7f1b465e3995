"""Running experiments: one run to a JSON file, and resumable grids of runs."""

from __future__ import annotations

import os

from .engine import run_experiment
from .results import read_results, result_path, tables, to_csv, to_markdown, write_json
from .tasks import SCHEMES, make_config

__all__ = ["run_one", "run_grid", "save_tables", "first_updates"]


def run_one(task, scheme, seed, json_path=None, progress=True, **overrides) -> dict:
    """Run one experiment; write its JSON (atomically) when ``json_path`` is given."""
    cfg = make_config(task, scheme, seed, **overrides)
    result = run_experiment(cfg, progress=progress)
    if json_path:
        write_json(json_path, result)
    return result


def run_grid(
    task, schemes, seeds, out_dir, progress=True, log=print, workers=1, **overrides
) -> list:
    """Run every (scheme, seed) of ``task``; skip runs whose JSON already exists.

    Each run's JSON is written atomically as soon as it finishes, so a killed grid
    resumes where it stopped, losing at most the runs in progress. ``workers`` > 1 runs
    them in that many processes of one torch thread each; the results are the same.
    Returns the results in (scheme, seed) order.
    """
    from .reproduce import Job, run_jobs

    schemes = list(SCHEMES) if schemes in (None, "all", ["all"]) else list(schemes)
    jobs = [
        Job("", f"{task}__{s}__seed{seed}", task, s, seed, dict(overrides))
        for s in schemes
        for seed in seeds
    ]
    run_jobs(jobs, out_dir, workers, log=log, progress=progress)
    return read_results([result_path(out_dir, j.task, j.scheme, j.seed) for j in jobs])


def save_tables(results, schemes, tasks, out_dir, stem="tables") -> str:
    """Print-ready text of Table 3 and Table 4; also saved as ``<stem>.md`` and CSVs."""
    from .results import to_text

    (h3, r3), t4 = tables(results, schemes, tasks)
    md = [
        "## Table 3: mean test error (%) over clients, mean ± std over seeds",
        "",
        to_markdown(h3, r3),
    ]
    text = [
        "Table 3 layout: mean test error (%) over clients, mean ± std over seeds",
        to_text(h3, r3),
    ]
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"{stem}_table3.csv"), "w") as f:
        f.write(to_csv(h3, r3))
    for t, (h4, r4) in t4.items():
        md += [
            "",
            f"## Table 4 ({t}): test error (%) over clients, averaged over seeds",
            "",
            to_markdown(h4, r4),
        ]
        text += [
            "",
            f"Table 4 layout ({t}): test error (%) over clients, averaged over seeds",
            to_text(h4, r4),
        ]
        with open(os.path.join(out_dir, f"{stem}_table4_{t}.csv"), "w") as f:
            f.write(to_csv(h4, r4))
    with open(os.path.join(out_dir, f"{stem}.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    return "\n".join(text)


def first_updates(cfg):
    """The updates HCCT partitions at epoch 1: every client trains one epoch alone from
    the common initialisation (Algorithm 1's epoch 0).

    Returns
    -------
    updates : list of N mappings name -> tensor
    sizes : numpy.ndarray (N,) D_i
    clients : list of ClientData
    """
    from .client import clone_state
    from .engine import LocalBackend, _model_init, resolve_device
    from .tasks import build_clients

    device = resolve_device(cfg.device)
    model = _model_init(cfg, 0, device)
    init = clone_state(model.state_dict())
    backend = LocalBackend(cfg, build_clients(cfg), model, device)
    res = backend.train({i: init for i in range(cfg.n_clients)}, cfg.lr, 0)
    return [res[i].update for i in range(cfg.n_clients)], backend.sizes, backend.clients


def settings_dir(base: str, **settings) -> str:
    """``base`` plus a short hash of ``settings``: cached runs are reused only for the
    same settings."""
    import hashlib
    import json

    key = json.dumps(settings, sort_keys=True, default=str)
    return f"{base}-{hashlib.sha1(key.encode()).hexdigest()[:8]}"

"""Running experiments: one run to a JSON file, and resumable grids of runs."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field

from ..training.config import SCHEMES, make_config
from ..training.engine import run_experiment
from .results import read_results, result_path, tables, to_csv, to_markdown, write_json

__all__ = [
    "Job",
    "run_one",
    "run_jobs",
    "run_grid",
    "job_path",
    "provenance",
    "save_tables",
    "first_updates",
    "code_fingerprint",
    "stale_reason",
]


@dataclass(frozen=True)
class Job:
    """One run of a grid: ``name`` is unique within the grid (the file name's stem)."""

    grid: str
    name: str
    task: str
    scheme: str
    seed: int
    overrides: dict = field(default_factory=dict, hash=False)


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
    """Compute the updates HCCT partitions at epoch 1.

    Every client trains one epoch alone from the common initialisation (Algorithm 1's
    epoch 0).

    Returns
    -------
    updates : list of N mappings name -> tensor
    sizes : numpy.ndarray (N,) D_i
    clients : list of ClientData
    """
    from ..training.engine import LocalBackend, init_model, resolve_device
    from ..training.local import clone_state
    from ..training.tasks import build_clients

    device = resolve_device(cfg.device)
    model = init_model(cfg, 0, device)
    init = clone_state(model.state_dict())
    backend = LocalBackend(cfg, build_clients(cfg), model, device)
    res = backend.train({i: init for i in range(cfg.n_clients)}, cfg.lr, 0)
    return [res[i].update for i in range(cfg.n_clients)], backend.sizes, backend.clients


def code_fingerprint() -> str:
    """Short hash of the package's source files: changes whenever the code does."""
    import hashlib
    from pathlib import Path

    h = hashlib.sha1()
    root = Path(__file__).resolve().parents[1]
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:8]


def settings_dir(base: str, **settings) -> str:
    """Return ``base`` plus a short hash of ``settings`` and of the code.

    Cached runs are then reused only for the same settings and the same code: a cache
    made by an older version of the package is never read back silently.
    """
    import hashlib
    import json

    key = json.dumps(settings, sort_keys=True, default=str) + code_fingerprint()
    return f"{base}-{hashlib.sha1(key.encode()).hexdigest()[:8]}"


def job_path(out_dir: str, job: Job) -> str:
    """Where ``job`` writes its result: ``out_dir/<grid>/<name>.json``."""
    return os.path.join(out_dir, job.grid, f"{job.name}.json")


def provenance(device: str) -> dict:
    """Where a result came from: code commit, package versions, the device and its threads.

    The torch thread count is recorded because it changes float summation order in
    training: the same seed gives bit-identical results at the same thread count only.
    """
    import numpy
    import torch

    dev = device
    if device.startswith("cuda") and torch.cuda.is_available():
        dev = f"cuda ({torch.cuda.get_device_name(0)})"
    return {
        "code_commit": os.environ.get("HCCT_CODE_COMMIT") or _git_commit(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "device": dev,
        "torch_threads": torch.get_num_threads(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
    }


def _git_commit():
    import subprocess

    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=os.path.dirname(os.path.abspath(__file__)),
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def _slim(result: dict, keep_cosines_epoch: int = 1) -> dict:
    """Drop per-epoch cosines except those of one epoch (they dominate a file's size)."""
    for h in result["history"]:
        if h["epoch"] != keep_cosines_epoch:
            h.pop("update_cosines", None)
            h.pop("update_clients", None)
    return result


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


def _serial(args) -> object:
    """Run jobs here, one after another, with one torch thread like a worker process.

    Float reductions depend on the thread count, and results must not depend on
    ``workers``. The caller's thread count is restored afterwards.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for a in args:
            yield _run_job(a)
    finally:
        torch.set_num_threads(before)


# settings that do not change what a run computes (where it ran, where data came from)
_NOT_COMPARED = ("device", "data_root", "download")


def stale_reason(path: str, cfg) -> str | None:
    """Why the result at ``path`` cannot stand for ``cfg``: None if it can be reused.

    ``"missing"``; an unreadable file (named); or the first setting whose stored value
    differs from ``cfg``'s (the device and data location are not compared).
    """
    import json

    if not os.path.exists(path):
        return "missing"
    try:
        with open(path) as f:
            stored = json.load(f)["config"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        return f"unreadable ({type(err).__name__}: {err})"
    if not isinstance(stored, dict):
        return f"unreadable (its config is a {type(stored).__name__})"
    want = cfg.to_dict()
    for key in sorted(set(want) | set(stored)):
        if key not in _NOT_COMPARED and stored.get(key) != want.get(key):
            return f"its {key} is {stored.get(key)!r}, the grid asks for {want.get(key)!r}"
    return None


def _run_job(args) -> tuple:
    """One run, one atomically written JSON; ``device`` None keeps the job's own."""
    job, out_dir, device = args
    kw = dict(job.overrides) if device is None else dict(job.overrides, device=device)
    cfg = make_config(job.task, job.scheme, job.seed, **kw)
    try:
        result = _slim(run_experiment(cfg, progress=False))
    except Exception as err:  # one failed run must not end a grid of hundreds
        return job, None, f"{type(err).__name__}: {err}"
    status = result.get("status", {"state": "complete"})
    if status["state"] != "complete":  # not written: a grid reruns it
        return job, None, f"stopped in epoch {status['epoch']}: {status['reason']}"
    result.update(grid=job.grid, name=job.name, provenance=provenance(cfg.device))
    write_json(job_path(out_dir, job), result)
    return job, result["final"]["mean"], result["timing"]["seconds"]


def run_jobs(jobs, out_dir: str, workers: int = 1, device=None, log=print, progress=True) -> int:
    """Run every job whose file is missing, in ``workers`` processes; return how many ran.

    Each worker process uses one torch thread (two threads per process on two busy cores
    made one run six times slower); with ``workers=1`` the runs happen in this process,
    also with one thread.
    Results do not depend on ``workers``. ``device`` (e.g. ``"cuda"``) overrides every
    job's device when given. A job whose file exists is skipped only if
    :func:`stale_reason` finds nothing against it; otherwise it is rerun, saying why.
    """
    log = log or (lambda _msg: None)
    if workers < 1:
        raise ValueError(f"workers must be >= 1; got {workers}")
    todo = []
    for j in jobs:  # every config built (and so checked) before any run: fail fast
        kw = dict(j.overrides) if device is None else dict(j.overrides, device=device)
        why = stale_reason(job_path(out_dir, j), make_config(j.task, j.scheme, j.seed, **kw))
        name = os.path.join(j.grid, j.name).lstrip("/")
        if why is None:
            log(f"skip {name}.json (done, same settings)")
        else:
            if why != "missing":
                log(f"rerun {name}.json: {why}")
            todo.append(j)
    args = [(j, out_dir, device) for j in todo]
    pool = None
    if workers > 1 and len(todo) > 1:
        import multiprocessing as mp

        pool = mp.get_context("spawn").Pool(min(workers, len(todo)), initializer=_one_thread)
        done = pool.imap_unordered(_run_job, args)
    else:
        done = _serial(args)
    failed = []
    try:
        for job, err, secs in _progress(done, len(todo), progress):
            name = os.path.join(job.grid, job.name).lstrip("/")
            if err is None:
                failed.append(f"{name}: {secs}")
                log(f"FAILED {name}: {secs}")
            else:
                log(f"done {name}.json: mean test error {err:.2f}% in {secs:.1f} s")
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()
    if failed:
        raise RuntimeError(f"{len(failed)} run(s) failed: " + "; ".join(failed))
    return len(todo)


def _progress(it, total, show=True):
    if not show:
        return it
    from tqdm.auto import tqdm

    return tqdm(it, total=total, desc="runs", disable=None)

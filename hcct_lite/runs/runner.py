"""Running experiments: one run to a JSON file, and resumable grids of runs."""

from __future__ import annotations

import os

from ..training.config import SCHEMES, make_config
from ..training.engine import run_experiment
from ..training.provenance import kernel_env, provenance, source_fingerprint
from .files import write_text
from .jobs import Job, compute_job, job_path, one_torch_thread, run_job, store_job
from .results import read_results, result_path, tables, to_csv, to_markdown, write_json
from .store import OTHER_CODE, clean_temp_files, reuse_decision

__all__ = [
    "Job",
    "run_one",
    "run_jobs",
    "run_job",
    "compute_job",
    "store_job",
    "pending_jobs",
    "one_torch_thread",
    "run_grid",
    "job_path",
    "provenance",
    "save_tables",
    "first_updates",
    "code_fingerprint",
]


def run_one(task, scheme, seed, json_path=None, progress=True, cpu_capability=None,
            **overrides) -> dict:  # fmt: skip
    """Run one experiment; write its JSON (atomically) when ``json_path`` is given.

    ``cpu_capability`` (a name of :data:`~hcct_lite.training.provenance.CPU_KERNELS`) runs
    it in a fresh process with those kernels and one torch thread, as a grid's runs are,
    so that it reproduces on any CPU that has them.
    """
    cfg = make_config(task, scheme, seed, **overrides)
    if cpu_capability is not None:
        pool = _pool(1, cpu_capability)
        try:
            return pool.apply(run_one, (task, scheme, seed, json_path, progress), overrides)
        finally:
            pool.terminate()
            pool.join()
    result = run_experiment(cfg, progress=progress)
    if json_path:
        write_json(json_path, result)
    return result


def run_grid(
    task,
    schemes,
    seeds,
    out_dir,
    progress=True,
    log=print,
    workers=1,
    reuse_older=False,
    cpu_capability=None,
    ray=None,
    dry_run=False,
    **overrides,
) -> list:
    """Run every (scheme, seed) of ``task``; skip runs whose JSON already exists.

    Each run's JSON is written atomically as soon as it finishes, so a killed grid
    resumes where it stopped, losing at most the runs in progress. ``workers`` > 1 runs
    them in that many processes of one torch thread each; the results are the same.
    ``reuse_older``, ``cpu_capability``, ``ray`` and ``dry_run``: see :func:`run_jobs`.
    Returns the results in (scheme, seed) order (none for a dry run).
    """
    schemes = list(SCHEMES) if schemes in (None, "all", ["all"]) else list(schemes)
    jobs = [
        Job("", f"{task}__{s}__seed{seed}", task, s, seed, dict(overrides))
        for s in schemes
        for seed in seeds
    ]
    run_jobs(
        jobs,
        out_dir,
        workers,
        log=log,
        progress=progress,
        reuse_older=reuse_older,
        cpu_capability=cpu_capability,
        ray=ray,
        dry_run=dry_run,
    )
    if dry_run:
        return []
    return read_results([result_path(out_dir, j.task, j.scheme, j.seed) for j in jobs])


def save_tables(results, schemes, tasks, out_dir, stem="tables") -> str:
    """Print-ready text of Table IV and Table V; also saved as ``<stem>.md`` and CSVs."""
    from .results import to_text

    (h3, r3), t4 = tables(results, schemes, tasks)
    md = [
        "## Table IV: mean test error (%) over clients, mean ± std over seeds",
        "",
        to_markdown(h3, r3),
    ]
    text = [
        "Table IV layout: mean test error (%) over clients, mean ± std over seeds",
        to_text(h3, r3),
    ]
    os.makedirs(out_dir, exist_ok=True)
    write_text(os.path.join(out_dir, f"{stem}_schemes.csv"), to_csv(h3, r3))
    for t, (h4, r4) in t4.items():
        md += [
            "",
            f"## Table V ({t}): test error (%) over clients, averaged over seeds",
            "",
            to_markdown(h4, r4),
        ]
        text += [
            "",
            f"Table V layout ({t}): test error (%) over clients, averaged over seeds",
            to_text(h4, r4),
        ]
        write_text(os.path.join(out_dir, f"{stem}_per_client_{t}.csv"), to_csv(h4, r4))
    write_text(os.path.join(out_dir, f"{stem}.md"), "\n".join(md) + "\n")
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
    """Short hash of the package's code (comments and docstrings aside)."""
    return source_fingerprint()[:8]


def settings_dir(base: str, **settings) -> str:
    """Return ``base`` plus a short hash of ``settings`` and of the code.

    Cached runs are then reused only for the same settings and the same code: a cache
    made by an older version of the package is never read back silently.
    """
    import hashlib
    import json

    key = json.dumps(settings, sort_keys=True, default=str) + code_fingerprint()
    return f"{base}-{hashlib.sha1(key.encode()).hexdigest()[:8]}"


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
            yield run_job(*a)
    finally:
        torch.set_num_threads(before)


def run_jobs(
    jobs,
    out_dir: str,
    workers: int = 1,
    device=None,
    log=print,
    progress=True,
    reuse_older: bool = False,
    cpu_capability: str | None = None,
    ray=None,
    dry_run: bool = False,
) -> int:
    """Run every job whose file cannot be reused, in ``workers`` processes; return how many.

    Each worker process uses one torch thread (two threads per process on two busy cores
    made one run several times slower); with ``workers=1`` the runs happen in this process,
    also with one thread. Results do not depend on ``workers``. ``device`` (e.g.
    ``"cuda"``) overrides every job's device when given.

    A job whose file exists is skipped only if
    :func:`~hcct_lite.runs.store.reuse_problem` finds nothing against it (complete,
    well formed, same settings, same compute version; results of another compute version
    too with ``reuse_older``, each named); otherwise it is run, saying why. ``dry_run``
    says so for every job and returns how many would run, running and writing nothing.
    ``cpu_capability`` (e.g. ``"default"``) runs every job in a fresh process whose torch
    uses those SIMD kernels, so that the results reproduce on any CPU that has them.
    ``ray`` (a :class:`~hcct_lite.runs.ray_cluster.RayOptions`) runs each job as a Ray task
    instead, on this machine or a cluster, each result written here as it arrives;
    ``workers`` is then the cluster's business. On a GPU (``device`` cuda) with ``workers``
    > 1 the runs of every grid share the card in one queue, longest first, admitted by
    memory (:func:`~hcct_lite.runs.gpu_queue.run_queue`).
    """
    log = log or (lambda _msg: None)
    if workers < 1:
        raise ValueError(f"workers must be >= 1; got {workers}")
    todo = pending_jobs(jobs, out_dir, device, reuse_older, log, dry_run)
    if dry_run:
        log(f"{len(todo)} of {len(jobs)} runs to run, {len(jobs) - len(todo)} reused (dry run: "
            "nothing run or written)")  # fmt: skip
        return len(todo)
    if todo and ray is None and str(device).startswith("cuda") and workers > 1:
        from .gpu_queue import QueueOptions, run_queue

        failed = run_queue(todo, out_dir, device, QueueOptions(workers=workers), say=log)
        if failed:
            raise RuntimeError(f"{len(failed)} run(s) failed: " + "; ".join(failed))
        return len(todo)
    args = [(j, out_dir, device) for j in todo]
    pool = None
    if todo and ray is not None:
        if cpu_capability is not None:
            check_cpu_capability(cpu_capability)
        from .ray_cluster import ray_runs

        done = ray_runs(todo, out_dir, device, ray, cpu_capability)
    elif todo and (cpu_capability or (workers > 1 and len(todo) > 1)):
        pool = _pool(min(workers, len(todo)), cpu_capability)
        done = pool.imap_unordered(_run_job_args, args)
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
        elif hasattr(done, "close"):  # a generator: restores threads, or leaves Ray
            done.close()
    if failed:
        raise RuntimeError(f"{len(failed)} run(s) failed: " + "; ".join(failed))
    return len(todo)


def _run_job_args(args) -> tuple:
    return run_job(*args)


def pending_jobs(
    jobs, out_dir: str, device=None, reuse_older: bool = False, log=print, dry_run: bool = False
) -> list:
    """The jobs whose file under ``out_dir`` cannot be reused; each job logged with why.

    One line per job, ``reuse <name>.json: <reason>`` or ``run <name>.json: <reason>``
    (:func:`~hcct_lite.runs.store.reuse_decision`). Every config is built (so checked)
    first; ``reuse_older`` reuses results of another compute version; temporary files
    left by killed writes are removed, unless ``dry_run`` (nothing is written or removed).
    """
    todo, folders = [], set()
    for j in jobs:
        kw = dict(j.overrides) if device is None else dict(j.overrides, device=device)
        path = job_path(out_dir, j)
        name = os.path.join(j.grid, j.name).lstrip("/")
        try:
            cfg = make_config(j.task, j.scheme, j.seed, **kw)
        except ValueError as err:  # say which run of which grid cannot be made
            raise ValueError(f"{name}: {err}") from None
        ok, why = reuse_decision(path, cfg)
        folders.add(os.path.dirname(path))
        if ok:
            log(f"reuse {name}.json: {why}")
        elif reuse_older and why.startswith(OTHER_CODE):
            log(f"reuse {name}.json (--reuse-older): {why}")
        else:
            log(f"run {name}.json: {why}")
            todo.append(j)
    for folder in sorted(folders) if not dry_run else ():
        for tmp in clean_temp_files(folder):
            log(f"removed {os.path.join(folder, tmp)} (left by a killed write)")
    return todo


def _pool(n: int, cpu_capability: str | None):
    """``n`` spawned worker processes of one torch thread, with ``cpu_capability``'s kernels."""
    import multiprocessing as mp

    if cpu_capability is None:
        return mp.get_context("spawn").Pool(n, initializer=one_torch_thread)
    check_cpu_capability(cpu_capability)
    before = dict(os.environ)
    os.environ.clear()  # spawned workers inherit this process's environment
    os.environ.update(kernel_env(cpu_capability, before))
    try:
        return mp.get_context("spawn").Pool(n, initializer=one_torch_thread)
    finally:
        os.environ.clear()
        os.environ.update(before)


def check_cpu_capability(capability: str) -> None:
    """Raise ``ValueError`` unless a fresh torch here can use ``capability``'s kernels.

    ``capability`` is a name of :data:`~hcct_lite.training.provenance.CPU_KERNELS`.

    torch silently falls back to the best kernels the CPU has, so ask a fresh process.
    """
    import subprocess
    import sys

    code = "import torch; print(torch.backends.cpu.get_cpu_capability().lower())"
    env = kernel_env(capability)
    got = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True
    ).stdout.strip()
    if got != capability.lower():
        raise ValueError(
            f"--cpu-capability {capability}: this CPU cannot use those kernels "
            f"(torch uses {got or 'none'}); try default"
        )


def _progress(it, total, show=True):
    if not show:
        return it
    from tqdm.auto import tqdm

    return tqdm(it, total=total, desc="runs", disable=None)

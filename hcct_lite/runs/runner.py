"""Running experiments: one run to a JSON file, and resumable grids of runs."""

from __future__ import annotations

import os
from functools import partial

from ..parts import find, part_missing
from ..training.config import SCHEMES, make_config
from ..training.engine import run_experiment
from ..training.provenance import KERNEL_VARIABLES, kernel_env
from .jobs import compare_job, job_path, one_torch_thread, run_job
from .reading import read_results
from .results import write_json
from .store import OTHER_CODE, clean_temp_files, reuse_decision

__all__ = ["run_one", "run_jobs", "run_grid", "pending_jobs", "check_cpu_capability"]


def run_one(
    task, scheme, seed, json_path=None, progress=True, cpu_capability=None, **overrides
) -> dict:
    """Run one experiment; write its JSON (atomically) when ``json_path`` is given.

    ``cpu_capability`` (a name of :data:`~hcct_lite.training.provenance.CPU_KERNELS`) runs
    it in a fresh process with those kernels and one torch thread, as a grid's runs are,
    so that it reproduces on any CPU that has them.
    """
    cfg = make_config(task, scheme, seed, **overrides)
    if cpu_capability is not None:
        call = partial(run_one, task, scheme, seed, json_path, progress, **overrides)
        pool = _pool(1, cpu_capability, [call])
        try:
            return next(_as_done(pool))
        finally:
            _stop(pool[0])
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

    Parameters
    ----------
    task : str
        A registered task, e.g. ``"rotated-digits"``.
    schemes : list of str, "all" or None
        The schemes to run; ``"all"``, ``["all"]`` or ``None``: the paper's nine
        (:data:`~hcct_lite.training.config.SCHEMES`).
    seeds : iterable of int
        The seeds of every scheme.
    out_dir : str
        Where each run's JSON goes: ``out_dir/<task>__<scheme>__seed<seed>.json``.
    progress : bool, default=True
        Show a progress bar over the runs (only where the output is a terminal).
    log : callable ``str -> None`` or None, default=print
        Told, run by run, whether it is reused or run and why, then its outcome;
        ``None`` is silent.
    workers : int >= 1, default=1
        Processes to run the runs in, one torch thread each.
    reuse_older : bool, default=False
        Reuse a stored result of an older compute version too (each one named).
    cpu_capability : str or None, default=None
        Run each job in a fresh process with these torch CPU kernels (e.g. ``"default"``),
        so that its result reproduces on any CPU that has them.
    ray : RayOptions or None, default=None
        Run each job as a Ray task instead (:func:`run_jobs`).
    dry_run : bool, default=False
        Say what would be run or reused, and run and write nothing.
    **overrides
        :class:`~hcct_lite.training.config.RunConfig` settings of every run.

    Returns
    -------
    list of dict
        The len(schemes) * len(seeds) results (as :func:`run_experiment` returns them, read
        back from their files) in (scheme, seed) order; empty for a dry run.

    Raises
    ------
    ValueError
        Naming the run whose settings are refused, if ``workers`` < 1, or naming a stored
        file that is not a complete, well-formed result.
    RuntimeError
        Listing the runs that failed, once the others have finished.

    Examples
    --------
    A dry run plans the grid and writes nothing:

    >>> import tempfile
    >>> from hcct_lite import run_grid
    >>> with tempfile.TemporaryDirectory() as out:
    ...     run_grid("rotated-digits", ["hcct", "global"], [0], out, dry_run=True, epochs=2)
    run rotated-digits__hcct__seed0.json: missing
    run rotated-digits__global__seed0.json: missing
    2 of 2 runs to run, 0 reused (dry run: nothing run or written)
    []
    """
    schemes = list(SCHEMES) if schemes in (None, "all", ["all"]) else list(schemes)
    jobs = [compare_job(task, s, seed, overrides) for s in schemes for seed in seeds]
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
    return read_results([job_path(out_dir, j) for j in jobs])


def _serial(calls) -> object:
    """Run jobs here, one after another, with one torch thread like a worker process.

    Float reductions depend on the thread count, and results must not depend on
    ``workers``. The caller's thread count is restored afterwards.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for call in calls:
            yield call()
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
    queue=None,
) -> int:
    """Run every job whose file cannot be reused, in ``workers`` processes; return how many.

    Each worker process uses one torch thread (more threads per process slow runs on busy
    cores); with ``workers=1`` the runs happen in this process, also with one thread.
    Results do not depend on ``workers``. ``device`` (e.g. ``"cuda"``) overrides every
    job's device when given.

    A job whose file exists is skipped only if
    :func:`~hcct_lite.runs.store.reuse_problem` finds nothing against it (complete,
    well formed, same settings, same compute version; results of another compute version
    too with ``reuse_older``, each named); otherwise it is run, saying why. ``dry_run``
    says so for every job and returns how many would run, running and writing nothing.
    ``cpu_capability`` (e.g. ``"default"``) runs every job in a fresh process whose torch
    uses those SIMD kernels, so that the results reproduce on any CPU that has them.
    ``ray`` (the Ray part's :class:`~hcct_lite.ray.grid.RayOptions`) runs each job as a Ray task
    instead, on this machine or a cluster, each result written here as it arrives;
    ``workers`` is then the cluster's business. On a GPU (``device`` cuda) with ``workers``
    > 1, or with ``queue`` (the GPU part's :class:`~hcct_lite.gpu.queue.QueueOptions`: a
    deadline, a log, the memory to fill), the runs of every grid share the GPU in one
    queue, longest first, admitted by memory (:func:`~hcct_lite.gpu.queue.run_queue`).
    """
    log = log or (lambda _msg: None)
    if workers < 1:
        raise ValueError(f"workers must be >= 1; got {workers}")
    todo = pending_jobs(jobs, out_dir, device, reuse_older, log, dry_run)
    if dry_run:
        log(
            f"{len(todo)} of {len(jobs)} runs to run, {len(jobs) - len(todo)} reused (dry run: "
            "nothing run or written)"
        )
        return len(todo)
    on_gpu = ray is None and str(device).startswith("cuda")
    if todo and on_gpu and queue is None and workers > 1:
        queue = _part_runner("gpu-queue", "a GPU grid in several processes")(workers=workers)
    if todo and on_gpu and queue is not None:
        failed = queue.run(todo, out_dir, device, log)
        if failed:
            raise RuntimeError(f"{len(failed)} run(s) failed: " + "; ".join(failed))
        return len(todo)
    calls = [partial(run_job, j, out_dir, device) for j in todo]
    pool = None
    if todo and ray is not None:
        if cpu_capability is not None:
            check_cpu_capability(cpu_capability)
        done = ray.run(todo, out_dir, device, cpu_capability)
    elif todo and (cpu_capability or (workers > 1 and len(todo) > 1)):
        pool = _pool(min(workers, len(todo)), cpu_capability, calls)
        done = _as_done(pool)
    else:
        done = _serial(calls)
    failed = []
    try:
        for o in _progress(done, len(todo), progress):
            name = os.path.join(o.job.grid, o.job.name).lstrip("/")
            if not o.ok:
                failed.append(f"{name}: {o.reason}")
                log(f"FAILED {name}: {o.reason}")
            else:
                log(f"done {name}.json: mean test error {o.error:.2f}% in {o.seconds:.1f} s")
    finally:
        if pool is not None:
            _stop(pool[0])
        elif hasattr(done, "close"):  # a generator: restores threads, or leaves Ray
            done.close()
    if failed:
        raise RuntimeError(f"{len(failed)} run(s) failed: " + "; ".join(failed))
    return len(todo)


def _part_runner(name: str, what: str):
    """The options class of the part runner ``name`` (the GPU part's queue)."""
    runner = find("runner", name)
    if runner is None:
        raise part_missing(what, "gpu")
    return runner


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


def _pool(n: int, cpu_capability: str | None, calls: list) -> tuple:
    """``(executor, futures)``: ``calls`` run on ``n`` spawned processes of one torch thread.

    The processes use ``cpu_capability``'s kernels (None: the machine's).
    """
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    if cpu_capability is not None:
        check_cpu_capability(cpu_capability)
    # spawned workers inherit this process's environment, and torch reads the kernel
    # variables when it is imported: set them for the spawn only, the rest untouched
    pinned = {} if cpu_capability is None else kernel_env(cpu_capability, {})
    before = {k: os.environ.get(k) for k in {*KERNEL_VARIABLES, *pinned}} if pinned else {}
    if pinned:
        for k in KERNEL_VARIABLES:
            os.environ.pop(k, None)
        os.environ.update(pinned)
    try:
        ctx = mp.get_context("spawn")
        pool = ProcessPoolExecutor(n, mp_context=ctx, initializer=one_torch_thread)
        return pool, [pool.submit(call) for call in calls]  # each process starts here
    finally:
        for k, v in before.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


NO_MAIN_GUARD = (
    "a worker process ended before its job: a script that runs a grid with workers > 1 "
    'needs its code under if __name__ == "__main__": (each worker imports the script again)'
)


def _as_done(pool: tuple):
    """The jobs' outcomes as they finish; a worker that dies is one clear error."""
    from concurrent.futures import as_completed
    from concurrent.futures.process import BrokenProcessPool

    try:
        for future in as_completed(pool[1]):
            yield future.result()
    except BrokenProcessPool:
        raise RuntimeError(NO_MAIN_GUARD) from None


def _stop(executor) -> None:
    """End ``executor``'s processes now, the jobs still running with them."""
    for process in list((getattr(executor, "_processes", None) or {}).values()):
        process.terminate()  # shutdown alone waits for the running jobs
    executor.shutdown(wait=True, cancel_futures=True)


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

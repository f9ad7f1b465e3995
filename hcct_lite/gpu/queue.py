"""Many runs sharing one GPU: one queue over every grid, longest first, admitted by memory.

``reproduce --device cuda --workers W`` runs its jobs through :func:`run_queue`, with the
same job function and result files as every other runner. Only the order and the admission
differ, so that the GPU neither runs out of memory nor sits half idle. On Ray, the same
memory model sizes a run's share of a GPU (:func:`gpu_share`).
"""

from __future__ import annotations

import functools
import json
import math
import multiprocessing as mp
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field

from ..runs.jobs import Outcome, one_torch_thread, run_job
from ..training.config import make_config

__all__ = [
    "QueueOptions",
    "job_work",
    "memory_estimate",
    "gpu_share",
    "run_queue",
    "card_memory_gb",
    "release_gpu_cache",
    "CARD_GB",
]

# What a worker holds besides its runs' tensors: the CUDA context, cuDNN's and cuBLAS's
# workspaces (GB).
BASE_GB = 1.5
# Copies of a client's model a run keeps on the card: its state, start, update, gradient,
# the stacked step's tensors and the aggregation's (GB per client per GB of weights).
COPIES = 8
# Known peaks (results/README.md): model -> (GB of the run itself, GB per client).
# Models not here start from a prior (:func:`memory_estimate`).
MEASURED_GB = {"digit_cnn": (3.5, 0.29)}
# The GPU memory (GB) a share of one GPU is sized for when none is here to ask.
CARD_GB = 80.0


@dataclass
class QueueOptions:
    """How :func:`run_queue` fills the card.

    Attributes
    ----------
    workers : int, processes (runs in flight at most)
    memory_gb : float or None, memory to fill (None: 92 % of the card's)
    deadline : float or None, seconds from the start after which no run starts
    log : str or None, a JSON-lines file of every run's outcome
    """

    workers: int = 8
    memory_gb: float | None = None
    deadline: float | None = None
    log: str | None = None
    learned: dict = field(default_factory=dict)  # model -> measured peak GB per client

    def __post_init__(self):
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"workers must be a whole number >= 1; got {self.workers!r}")
        for name in ("memory_gb", "deadline"):
            value = getattr(self, name)
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if value is not None and not (ok and 0 < value < math.inf):
                raise ValueError(f"{name} must be a number of {_UNITS[name]} > 0; got {value!r}")

    def run(self, jobs, out_dir: str, device: str, say=print) -> list:
        """:func:`run_queue` with these options (how the grid runner calls the part)."""
        return run_queue(jobs, out_dir, device, self, say)


_UNITS = {"memory_gb": "GB", "deadline": "seconds"}


@functools.cache  # asked of every waiting job at every admission
def _cfg(job):
    # device "cuda" is only checked for its name here: the settings, not the card, matter
    return make_config(job.task, job.scheme, job.seed, **dict(job.overrides, device="cuda"))


# samples 0 means a task's whole split (the motivating example's): about this many a client
WHOLE_SPLIT = 4000


def job_work(job) -> float:
    """A run's local SGD samples times its weights, as a proxy of its time (> 0).

    MAXFL's reference rounds are counted.
    """
    c = _cfg(job)
    epochs = c.epochs * c.local_epochs + (c.maxfl_reference_epochs if c.scheme == "maxfl" else 0)
    per_client = c.samples if c.samples > 0 else WHOLE_SPLIT
    return c.n_clients * per_client * c.train_ratio * epochs * _weights(c.model)


@functools.cache
def _weights(model: str) -> float:
    """Millions of weights of ``model`` (counted on the meta device: nothing allocated)."""
    import torch

    from ..training.models import build_model

    with torch.device("meta"):
        return sum(p.numel() for p in build_model(model).parameters()) / 1e6


def _base_and_per_client(model: str) -> tuple:
    """GB a run of ``model`` holds itself and per client: measured, else a prior."""
    prior = COPIES * 4 * _weights(model) / 1000 + 0.03  # 4 bytes per weight; activations
    return MEASURED_GB.get(model, (BASE_GB, prior))


def memory_estimate(job, learned: dict) -> float:
    """GB a run of ``job`` is expected to hold at its peak.

    ``learned``: model -> the largest peak per client measured so far (GB, the run's own
    memory aside), else :data:`MEASURED_GB` or a prior from the model's weights.
    """
    c = _cfg(job)
    base, per_client = _base_and_per_client(c.model)
    return base + c.n_clients * learned.get(c.model, per_client)


def gpu_share(job, card_gb: float = CARD_GB) -> float:
    """The share of one card of ``card_gb`` GB that a run of ``job`` is expected to fill.

    In (0, 1]: :func:`memory_estimate` over the card's memory, a run larger than the card
    asking for all of it.
    """
    return min(1.0, max(round(memory_estimate(job, {}) / card_gb, 3), 0.001))


def release_gpu_cache(device) -> None:
    """Hand the memory torch's allocator keeps back to the card; nothing to do off CUDA.

    A worker lives on after a run: memory its allocator kept would be counted twice.
    """
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()


def card_memory_gb(device: str = "cuda") -> float:
    """The memory of the GPU ``device`` in GB (10^9 bytes, as the measured peaks).

    Raises
    ------
    ValueError
        If there is no CUDA GPU here.
    """
    import torch

    if not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but no CUDA GPU is available")
    return torch.cuda.get_device_properties(torch.device(device)).total_memory / 1e9


def run_and_measure(job, out, device) -> tuple:
    """``(run_job's Outcome, peak GPU memory in GB)``, the worker's cached memory handed back.

    A pool worker lives on after its run: memory its allocator kept would be counted twice.
    """
    import torch

    dev = torch.device(device)
    on_gpu = dev.type == "cuda"
    if on_gpu:
        torch.cuda.reset_peak_memory_stats(dev)
    try:
        done = run_job(job, out, device)
        return done, torch.cuda.max_memory_reserved(dev) / 1e9 if on_gpu else 0.0
    finally:
        release_gpu_cache(dev)


def run_queue(
    jobs, out_dir: str, device: str, opts: QueueOptions, say=print, work=run_and_measure
) -> list:
    """Run ``jobs`` on the GPU ``device``; return the names of those that failed or never ran.

    Runs go longest first (:func:`job_work`), whatever their grid. A run starts only while
    its :func:`memory_estimate` and those of the runs in flight fit, or alone. A run that
    fails (out of memory, a worker killed) goes back to the queue once. With a deadline, no
    run starts whose expected time (from the runs so far) ends after it.

    Every job is run, whatever its file holds: the caller decides what is pending. ``work``
    is what a worker calls with ``(job, out_dir, device)`` (:func:`run_and_measure`); a
    worker that dies fails the runs it held, and fresh workers take the rest. With a
    deadline, runs still in flight a minute after it are stopped (named "cut off").
    """
    t0 = time.time()
    todo = sorted(jobs, key=lambda j: -job_work(j))
    budget = opts.memory_gb or 0.92 * card_memory_gb(device)
    q = dict(pool=_pool(opts.workers), work=work, flight={}, rates=[], tries={}, failed=[])
    say(f"{len(todo)} runs, {opts.workers} workers, {budget:.0f} GB to fill")
    log = open(opts.log, "a") if opts.log else None  # noqa: SIM115 - closed below
    try:
        while todo or q["flight"]:
            _admit(todo, q, out_dir, device, opts, (budget, t0), say)
            if not q["flight"]:
                break  # nothing fits the memory or the time left
            if opts.deadline is not None and time.time() - t0 > opts.deadline + 60:
                q["failed"] += [f"{name} (cut off)" for name in q["flight"]]
                break
            time.sleep(0.2)
            if any(_broken(f[1]) for f in q["flight"].values()):  # a worker died
                _stop(q["pool"])
                q["pool"] = _pool(opts.workers)
            for job, why, row in _finished(q["flight"], opts, t0):
                _outcome(job, why, row, q, todo, log, say)
    finally:
        _stop(q["pool"])
        if log:
            log.close()
    return q["failed"] + [f"{j.grid}/{j.name} (not started)" for j in todo]


def _outcome(job, why, row, q, todo, log, say) -> None:
    """Log a finished run; a failed one goes back to ``todo`` once."""
    if log:
        log.write(json.dumps(row) + "\n")
        log.flush()
    name = row["name"]
    if why is None:
        q["rates"].append(row["seconds"] / job_work(job))
        say(f"done {name}: {row['mean']:.2f}% in {row['seconds']:.1f} s")
        return
    q["tries"][name] = q["tries"].get(name, 0) + 1
    say(f"FAILED {name}: {why}")
    (todo.insert(0, job) if q["tries"][name] < 2 else q["failed"].append(name))


def _pool(workers: int) -> ProcessPoolExecutor:
    """Spawned workers of one torch thread; a worker that dies fails its run, not the queue."""
    ctx = mp.get_context("spawn")
    return ProcessPoolExecutor(workers, mp_context=ctx, initializer=one_torch_thread)


def _broken(fut) -> bool:
    return fut.done() and isinstance(fut.exception(), BrokenProcessPool)


def _stop(pool) -> None:
    """End the pool's workers now, a run in progress too (a stopped queue leaves none)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()


def _admit(todo, q, out_dir, device, opts, state, say) -> None:
    """Start the longest runs that fit the memory left and end before the deadline.

    A run starts alone whatever its estimate (else it would never run), and none starts
    once the deadline has passed; before any run has ended, none is judged by its time.
    """
    budget, t0 = state
    flight, rates = q["flight"], q["rates"]
    rate = sorted(rates)[len(rates) // 2] if rates else None
    used = sum(f[2] for f in flight.values())
    for job in list(todo):
        now = time.time() - t0
        if len(flight) >= opts.workers or (opts.deadline is not None and now >= opts.deadline):
            return
        need = memory_estimate(job, opts.learned)
        if flight and used + need > budget:
            continue  # a smaller run may fit
        if opts.deadline is not None and rate is not None:
            if now + 1.1 * rate * job_work(job) > opts.deadline:
                continue
        todo.remove(job)
        res = q["pool"].submit(q["work"], job, out_dir, device)
        flight[f"{job.grid}/{job.name}"] = (job, res, need, now, len(flight) + 1)
        used += need
        alone = " alone, over the memory left" if need > budget else ""
        say(f"start {job.grid}/{job.name} (expects {need:.1f} GB{alone}; {len(flight)} in flight)")


def _finished(flight, opts, t0):
    """Yield ``(job, reason or None, log row)`` for each run of ``flight`` that ended."""
    for name, (job, res, need, start, beside) in list(flight.items()):
        if not res.done():
            continue
        del flight[name]
        try:
            done, peak = res.result()
        except Exception as err:  # the worker itself died: the run failed
            done, peak = Outcome(job, reason=f"{type(err).__name__}: {err}"), math.nan
        ok, mean, secs = done.ok, done.error, done.seconds
        if ok:  # the run's own memory (the CUDA context is not in the peak) set aside
            model, n = _cfg(job).model, _cfg(job).n_clients
            per_client = max((peak - _base_and_per_client(model)[0]) / n, 0.01)
            opts.learned[model] = max(opts.learned.get(model, 0.0), per_client)
        row = dict(
            name=name,
            n=_cfg(job).n_clients,
            start=start,
            end=time.time() - t0,
            in_flight=beside,
            expected_gb=need,
            peak_gb=peak,
            ok=ok,
            mean=mean,
            seconds=secs,
        )
        yield job, done.reason, row

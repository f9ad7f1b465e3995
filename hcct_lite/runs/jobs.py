"""One run of a grid, from its settings to its stored file.

A :class:`Job` names a run; :func:`compute_job` runs it wherever it is called (this process,
a pool worker, a Ray task) and :func:`store_job` writes its result where the grid keeps it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from ..training.config import make_config
from ..training.engine import run_experiment
from .results import write_json

__all__ = [
    "Job",
    "Outcome",
    "compare_job",
    "job_path",
    "with_settings",
    "compute_job",
    "store_job",
    "run_job",
    "one_torch_thread",
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


class Outcome(NamedTuple):
    """How one run of a grid ended: written with its mean final error, or not, and why.

    Attributes
    ----------
    job : Job
    error : float or None, the mean final test error (%) of a written run; None if it failed
    seconds : float or None, the run's training time; None if it failed
    reason : str or None, why a run failed or stopped (nothing written); None if written
    """

    job: Job
    error: float | None = None
    seconds: float | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the run finished and its file was written."""
        return self.reason is None


def compare_job(task: str, scheme: str, seed: int, overrides: dict | None = None) -> Job:
    """A run of a ``compare`` grid: no grid folder, named ``<task>__<scheme>__seed<seed>``."""
    return Job("", f"{task}__{scheme}__seed{seed}", task, scheme, seed, dict(overrides or {}))


def job_path(out_dir: str, job: Job) -> str:
    """Where ``job`` writes its result: ``out_dir/<grid>/<name>.json`` (the one path rule)."""
    return os.path.join(out_dir, job.grid, f"{job.name}.json")


def with_settings(jobs, **settings) -> list:
    """``jobs`` with ``settings`` added to every job's overrides (None values left out).

    ``reproduce --norm-limit 0`` runs every job of its grids without the norm rule, say.
    """
    extra = {k: v for k, v in settings.items() if v is not None}
    return [replace(j, overrides=dict(j.overrides, **extra)) for j in jobs] if extra else list(jobs)


def _slim(result: dict, keep_cosines_epoch: int = 1) -> dict:
    """Drop per-epoch cosines except those of one epoch (they dominate a file's size)."""
    for h in result["history"]:
        if h["epoch"] != keep_cosines_epoch:
            h.pop("update_cosines", None)
            h.pop("update_clients", None)
    return result


def one_torch_thread() -> None:
    """Give this process one torch thread (a grid's worker: results must not depend on it)."""
    import torch

    torch.set_num_threads(1)


def compute_job(job: Job, device=None) -> tuple:
    """Run ``job`` here; never raises for the run itself.

    ``device`` None keeps the job's own. Returns ``(result, None)``, the result as a grid
    stores it (slimmed, with the job's ``grid`` and ``name``), or ``(None, reason)`` for a
    run that failed or stopped (nothing to store, so a grid reruns it).
    """
    kw = dict(job.overrides) if device is None else dict(job.overrides, device=device)
    cfg = make_config(job.task, job.scheme, job.seed, **kw)
    try:
        result = _slim(run_experiment(cfg, progress=False))
    except Exception as err:  # one failed run must not end a grid of hundreds
        return None, f"{type(err).__name__}: {err}"
    status = result.get("status", {"state": "complete"})
    if status["state"] != "complete":  # not written: a grid reruns it
        return None, f"stopped in epoch {status['epoch']}: {status['reason']}"
    result.update(grid=job.grid, name=job.name)
    return result, None


def store_job(job: Job, out_dir: str, result: dict) -> Outcome:
    """Write ``result`` atomically as ``job``'s file; its :class:`Outcome`."""
    write_json(job_path(out_dir, job), result)
    return Outcome(job, result["final"]["mean"], result["timing"]["seconds"])


def run_job(job: Job, out_dir: str, device=None) -> Outcome:
    """Run ``job`` and write its JSON atomically under ``out_dir``; never raises for the run.

    ``device`` None keeps the job's own. The :class:`Outcome` of a run that failed or
    stopped has its reason and nothing is written, so a grid reruns it.
    """
    result, why = compute_job(job, device)
    return Outcome(job, reason=why) if result is None else store_job(job, out_dir, result)

"""The notebooks' three modes, chosen by one environment variable, ``HCCT_MODE``.

``shipped`` (the default) reads the paper-scale results in ``results/`` and says what is
pending. ``quick`` recomputes on small models and data where the paper's effects still show.
``full`` recomputes at the paper's Table III settings, five seeds. Every notebook takes its
settings from :func:`task_settings`, so the modes mean the same thing everywhere.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from ..training.tasks import available_source

__all__ = [
    "MODES",
    "QUICK",
    "Mode",
    "notebook_mode",
    "classroom_style",
    "current_mode",
    "solutions_shown",
    "task_settings",
    "results_dir",
    "Stopwatch",
]

ENV = "HCCT_MODE"

MODES = {
    "shipped": "the paper-scale results shipped in results/ (no training)",
    "quick": "recomputed small: small models and data, 3 seeds, minutes on a CPU",
    "full": "recomputed at the paper's Table III settings, 5 seeds (a GPU is advised)",
}

# Quick settings per task, and why each still tells the paper's story (or cannot).
QUICK = {
    # scikit-learn's 8x8 digits split as Table II splits CIFAR-10 (clients 1 and 2 share five
    # classes 20 % / 80 %, client 3 has the other five): the patterns rank as in the paper
    "motivating": dict(dataset="digits", model="small_digits", epochs=10, batch_size=16),
    # Table III's FMNIST task itself, 20 of its 50 epochs: HCCT = Global << Independent shows
    "fmnist": dict(epochs=20, maxfl_reference_epochs=20),
    # the Digit task with a 65k-weight CNN of the same layer kinds and 100 samples per client
    "digit": dict(
        model="digit_cnn_small",
        samples=100,
        epochs=4,
        local_epochs=2,
        maxfl_reference_epochs=4,
    ),
    # CIFAR-10's class shards on scikit-learn's digits: small, but too easy a task for the
    # paper's HCCT = Independent < Global to show (the notebook says so)
    "cifar10": dict(
        dataset="digits", model="small_digits", samples=120, epochs=20, maxfl_reference_epochs=20
    ),
    # the project's own task is small already: its Table III settings
    "rotated-digits": {},
}
QUICK_SEEDS = (0, 1, 2)
FULL_SEEDS = (0, 1, 2, 3, 4)


@dataclass(frozen=True)
class Mode:
    """One of :data:`MODES`.

    Attributes
    ----------
    name : ``"shipped"``, ``"quick"`` or ``"full"``
    """

    name: str

    def __post_init__(self):
        if self.name not in MODES:
            raise ValueError(f"{ENV}={self.name!r} is not a mode; choose from {', '.join(MODES)}")

    @property
    def recompute(self) -> bool:
        """Whether this mode trains (quick, full) rather than reading ``results/``."""
        return self.name != "shipped"

    @property
    def seeds(self) -> tuple:
        """The seeds a recomputing mode runs (the shipped grids carry their own)."""
        return FULL_SEEDS if self.name == "full" else QUICK_SEEDS

    @property
    def caption(self) -> str:
        """What a figure's title adds: nothing at paper scale, " (small re-run)" in quick."""
        return " (small re-run)" if self.name == "quick" else ""

    def figure_name(self, stem: str) -> str:
        """File stem for a figure drawn from this mode's data: ``stem``, ``stem-quick`` ..."""
        return stem if self.name == "shipped" else f"{stem}-{self.name}"

    def __str__(self) -> str:
        return f"HCCT_MODE={self.name}: {MODES[self.name]}"


# Font sizes readable on a classroom projector (matplotlib's defaults are for print).
CLASSROOM = {
    "font.size": 12,
    "axes.titlesize": 13,
    "axes.labelsize": 12,
    "xtick.labelsize": 12,
    "ytick.labelsize": 12,
    "legend.fontsize": 12,
    "legend.title_fontsize": 12,
    "figure.dpi": 100,
}


def classroom_style() -> None:
    """Set matplotlib's font sizes for a projector (the notebooks call it once)."""
    import matplotlib.pyplot as plt

    plt.rcParams.update(CLASSROOM)


def current_mode(environ=None) -> Mode:
    """The mode ``HCCT_MODE`` names (default ``shipped``), without touching any setting."""
    environ = os.environ if environ is None else environ
    return Mode(environ.get(ENV, "shipped").strip().lower() or "shipped")


def notebook_mode(environ=None, style: bool = True) -> Mode:
    """The mode ``HCCT_MODE`` names (default ``shipped``); a clear error for any other value.

    Also sets one torch thread and one BLAS thread for this process: more threads slow
    the notebooks' small computations on a busy machine, and one thread is what the grids
    (and so the shipped results) use. With
    ``style`` (the default) it sets matplotlib's projector fonts too
    (:func:`classroom_style`), so a notebook's set-up is this one call.
    """
    import torch
    from threadpoolctl import threadpool_limits

    mode = current_mode(environ)
    torch.set_num_threads(1)
    threadpool_limits(1)
    if style:
        classroom_style()
    return mode


SOLUTIONS_ENV = "HCCT_SOLUTIONS"


def solutions_shown(environ=None) -> bool:
    """Whether ``HCCT_SOLUTIONS=1`` asks for solutions to be shown, else False.

    For a course's own notebooks, where ``if hl.solutions_shown():`` guards a solution
    cell. The package's own notebooks hold no solutions. Any value other than ``0``/``1``
    (or empty) is a clear error rather than a guess.
    """
    environ = os.environ if environ is None else environ
    value = environ.get(SOLUTIONS_ENV, "0").strip() or "0"
    if value not in ("0", "1"):
        raise ValueError(f"{SOLUTIONS_ENV} must be 0 or 1; got {value!r}")
    return value == "1"


def task_settings(mode: Mode, task: str) -> tuple:
    """Settings overrides for ``task`` in ``mode``, and a note on the data used.

    Returns
    -------
    settings : dict, keyword overrides for :func:`~hcct_lite.training.config.make_config`
    note : str, what differs from the paper's data (empty when nothing does)
    """
    if mode.name == "quick" and task in QUICK:
        settings = dict(QUICK[task])
        if "dataset" in settings:
            return settings, "scikit-learn's 8x8 digits (quick mode)"
        source, note = available_source(task)
        return {**source, **settings}, note
    source, note = available_source(task)
    return {**source, "device": "auto"}, note


def results_dir(environ=None) -> Path:
    """The folder of shipped results: ``$HCCT_RESULTS``, else the repository's ``results/``."""
    environ = os.environ if environ is None else environ
    path = Path(environ.get("HCCT_RESULTS") or Path(__file__).resolve().parents[2] / "results")
    if not path.is_dir():
        raise FileNotFoundError(
            f"shipped results not found at {path}: set HCCT_RESULTS to the results/ folder of "
            "an hcct-lite checkout, or use HCCT_MODE=quick to recompute"
        )
    return path


class Stopwatch:
    """Context manager that prints how long its block took, e.g. ``run time: 12 s``."""

    def __init__(self, label: str = "run time"):
        self.label, self.seconds = label, None

    def __enter__(self):
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self._start
        print(f"{self.label}: {self.seconds:.0f} s")
        return False

"""What decides a run's numbers besides its settings: code, versions, device, CPU kernels.

A run's *compute version* (:func:`compute_version`) names the version of each part of the
code its numbers come from; a change that alters numbers bumps it on purpose, and the
canary runs (:mod:`hcct_lite.runs.canary`) catch one that does not. CPU kernels and the
thread count change the last bits of every update, so every result records them.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import subprocess
from pathlib import Path

__all__ = [
    "provenance",
    "compute_version",
    "uses_defences",
    "ENGINE_VERSION",
    "DEFENCES_VERSION",
    "AGGREGATORS_VERSION",
    "BATCHED_VERSION",
    "compute_fingerprint",
    "source_fingerprint",
    "cpu_capability",
    "code_text",
    "kernel_env",
    "COMPUTE_PACKAGES",
    "CPU_KERNELS",
    "KERNEL_VARIABLES",
]

# Bump on purpose when a change alters what runs compute (the canary test says when):
# ENGINE_VERSION for the loop, local SGD, evaluation, networks, data, splits and the
# partition (every run); DEFENCES_VERSION for the norm rule and the count bound (runs that
# use them, and the robust aggregators as they were at version 1); AGGREGATORS_VERSION for
# the robust aggregators (runs whose aggregator is not FedAvg's: their history rule and the
# loners they judge came with version 2, one voice for near-identical updates with 3, no
# dispute between two that the history rule kept with 4; the round's norm band and no
# idle member with 5; the band's norms over batch-norm buffers too, with 6; a delta too
# short to raise as idle, and a dispute beside an idle member, with 7);
# BATCHED_VERSION for every client trained at once (batched_clients: gpu/batched.py and the
# stacked networks). A scheme's version is its class's ``compute_version``, a task's its
# entry in ``TASK_VERSIONS`` (hcct_lite/training/tasks.py).
ENGINE_VERSION = 1
DEFENCES_VERSION = 1
AGGREGATORS_VERSION = 7
BATCHED_VERSION = 2

# The subpackages whose code computes a run. Reports, plots, the command line and the
# notebooks' helpers may change without making a stored result stale.
COMPUTE_PACKAGES = ("partition", "training", "schemes")

# torch (ATEN_CPU_CAPABILITY), MKL (MKL_CBWR) and oneDNN (ONEDNN_MAX_CPU_ISA) each pick
# SIMD kernels per machine, and a partition decided near a break-even point can flip on them.
# One name, the same code path in torch, MKL and oneDNN. "default" runs the same on every
# x86-64 CPU (MKL's COMPATIBLE branch is its reproducible one for any vendor); "avx2" and
# "avx512" are faster and reproduce on Intel CPUs that have those instructions.
CPU_KERNELS = {
    "default": {
        "ATEN_CPU_CAPABILITY": "default",
        "MKL_CBWR": "COMPATIBLE",
        "ONEDNN_MAX_CPU_ISA": "SSE41",
    },
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "avx512": {
        "ATEN_CPU_CAPABILITY": "avx512",
        "MKL_CBWR": "AVX512",
        "ONEDNN_MAX_CPU_ISA": "AVX512_CORE",
    },
}
KERNEL_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA")


def kernel_env(capability: str, base=None) -> dict:
    """``base`` (default ``os.environ``) with the variables that pin ``capability``'s kernels.

    Any of :data:`KERNEL_VARIABLES` already in ``base`` is replaced or removed, so the
    result pins exactly ``capability`` (a name of :data:`CPU_KERNELS`).
    """
    if capability not in CPU_KERNELS:
        raise ValueError(
            f"CPU capability must be one of {', '.join(CPU_KERNELS)}; got {capability!r}"
        )
    env = {k: v for k, v in (os.environ if base is None else base).items()}
    for var in KERNEL_VARIABLES:
        env.pop(var, None)
    env.update(CPU_KERNELS[capability])
    return env


def uses_defences(cfg) -> bool:
    """Whether a run of ``cfg`` (a RunConfig) depends on the defences' code.

    A robust aggregator, the norm rule switched on (``norm_limit`` > 0), or the count bound
    (``count_bound`` > 0).
    """
    return (
        cfg.option("aggregator", "mean") != "mean"
        or cfg.option("norm_limit", 0) > 0
        or cfg.option("count_bound", 0) > 0
    )


def compute_version(cfg) -> dict:
    """The version of each part of the code a run of ``cfg`` (a RunConfig) computes with.

    Returns
    -------
    dict
        ``{"engine": int, "task <name>": int, "scheme <name>": int}``, with ``"defences"``
        when :func:`uses_defences`, ``"aggregators"`` when the aggregator is a robust rule
        and ``"batched"`` when ``batched_clients``. Two runs of the same settings and
        compute version give the same numbers under the same CPU kernels and threads, so
        a stored result stays valid through refactors, comments, renames and new modules.
    """
    from ..parts import load_parts
    from ..schemes.registry import SCHEME_CLASSES
    from .tasks import TASK_VERSIONS

    load_parts()  # an installed extension's scheme or task

    version = {
        "engine": ENGINE_VERSION,
        f"task {cfg.task}": TASK_VERSIONS[cfg.task],
        f"scheme {cfg.scheme}": SCHEME_CLASSES[cfg.scheme].compute_version,  # registered
    }
    if uses_defences(cfg):
        version["defences"] = DEFENCES_VERSION
    if cfg.option("aggregator", "mean") != "mean":
        version["aggregators"] = AGGREGATORS_VERSION
    if cfg.option("batched_clients", False):
        version["batched"] = BATCHED_VERSION
    return version


def compute_fingerprint() -> str:
    """Short hash of the code that computes a run (:data:`COMPUTE_PACKAGES`).

    Comments, docstrings and blank lines are left out. Recorded with each result to say
    which code text wrote it; what decides reuse is :func:`compute_version`.
    """
    return source_fingerprint(COMPUTE_PACKAGES)[:12]


@functools.cache
def source_fingerprint(packages: tuple | None = None) -> str:
    """SHA-1 (hex) of the code of hcct_lite's ``packages`` (None: the whole package).

    Each file's path and :func:`code_text`, in sorted order. Computed once per process (it
    reads every file, and is asked for every run and every stored file): the code a process
    runs is the code it imported.
    """
    h = hashlib.sha1()
    root = Path(__file__).resolve().parents[1]
    folders = [root] if packages is None else [root / pkg for pkg in packages]
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            h.update(path.relative_to(root).as_posix().encode())
            h.update(code_text(path.read_text()).encode())
    return h.hexdigest()


def code_text(source: str) -> str:
    """``source`` without its comments, docstrings, trailing spaces and blank lines."""
    import ast
    import io
    import tokenize

    spans = [
        (
            node.body[0].lineno,
            node.body[0].col_offset,
            node.body[0].end_lineno,
            node.body[0].end_col_offset,
        )
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
        and isinstance(node.body[0].value.value, str)
    ]
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            spans.append((*tok.start, *tok.end))
    lines = source.splitlines()
    for r0, c0, r1, c1 in sorted(spans, reverse=True):  # from the end: offsets stay valid
        head, tail = lines[r0 - 1][:c0], lines[r1 - 1][c1:]
        lines[r0 - 1 : r1] = [head + tail]
    return "\n".join(line.rstrip() for line in lines if line.strip())


def cpu_capability() -> str:
    """The SIMD kernels torch uses on this CPU: ``default``, ``avx2``, ``avx512``, ..."""
    import torch

    return torch.backends.cpu.get_cpu_capability().lower()


def provenance(device: str, cfg=None) -> dict:
    """Where a result came from and what decides its numbers.

    Returns
    -------
    dict
        ``compute_version`` (:func:`compute_version`, when ``cfg`` is given), ``code_commit``
        (None outside a git checkout), ``code_fingerprint`` (see
        :func:`compute_fingerprint`), ``python``, ``torch``, ``numpy``, ``device``,
        ``torch_threads``, ``cpu_capability`` (torch's kernels) and ``cpu_kernel_env`` (the
        :data:`KERNEL_VARIABLES` set for the run; empty: each library picked the machine's
        best): the same seed gives bit-identical CPU results only when these are the same;
        ``machine``; and ``extensions`` (part -> ``"distribution version"``) where
        another package adds schemes, tasks or networks.
    """
    import numpy
    import torch

    dev = device
    if device.startswith("cuda") and torch.cuda.is_available():
        dev = f"cuda ({torch.cuda.get_device_name(0)})"
    from ..parts import extensions

    version = {} if cfg is None else {"compute_version": compute_version(cfg)}
    # the installed packages that add schemes, tasks or networks: "name version" each
    version.update({"extensions": ext} if (ext := extensions()) else {})
    return {
        **version,
        "code_commit": os.environ.get("HCCT_CODE_COMMIT") or _git_commit(),
        "code_fingerprint": compute_fingerprint(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "device": dev,
        "torch_threads": torch.get_num_threads(),
        "cpu_capability": cpu_capability(),
        "cpu_kernel_env": {v: os.environ[v] for v in KERNEL_VARIABLES if v in os.environ},
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
    }


@functools.cache
def _git_commit():
    """The checkout's commit, asked once per process (the code it imported)."""
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

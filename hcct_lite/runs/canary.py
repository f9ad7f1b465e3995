"""Canary runs: what guards the compute version.

A fixed set of tiny runs (every scheme, task and network, and the options that change
numbers) runs in a fresh process under pinned kernels (:func:`pinned_env`). ``canaries.json``
holds each one's compute version and a digest of its numbers; ``hcct-lite verify --canaries``
flags a digest that changed while its version did not, naming the results it would alter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ..training.provenance import KERNEL_VARIABLES, kernel_env
from .store import NOT_COMPARED, digest

__all__ = [
    "CANARIES",
    "CANARY_FILE",
    "canary_config",
    "canary_numbers",
    "digest",
    "run_canaries",
    "load_canaries",
    "write_canaries",
    "canary_problems",
    "change_report",
]

CANARY_FILE = Path(__file__).with_name("canaries.json")
# The kernels and threads every canary runs under: bit-identical on any x86-64 CPU.
CANARY_KERNELS, CANARY_THREADS = "default", 1
# numpy's float64 products (the Gram matrix, the update cosines) go through OpenBLAS, which
# picks its kernels per CPU: pinned to Nehalem's, which every CPU numpy supports can run.
BLAS_CORE = "Nehalem"
PINS = {"kernels": CANARY_KERNELS, "blas_core": BLAS_CORE, "threads": CANARY_THREADS}

# Tiny federations: three epochs of a few clients with a few dozen samples each (two
# epochs of one client per domain for Digit, whose network is the largest).
_TINY = {
    "rotated-digits": dict(n_clients=8, samples=40, batch_size=16),
    "digit": dict(
        n_clients=3, samples=30, batch_size=32, epochs=2, domains=["mnist", "usps", "mnistm"]
    ),
    "fmnist": dict(n_clients=4, samples=40, batch_size=16),
    "cifar10": dict(n_clients=4, samples=40, batch_size=16),
    "motivating": dict(samples=20, batch_size=16),
}
# Every setting a canary's numbers depend on is given here, not taken from a default.
_COMMON = dict(
    epochs=3,
    local_epochs=1,
    maxfl_reference_epochs=2,
    record_cosines=True,
    norm_limit=0.0,
    aggregator="mean",
    download=False,
    device="cpu",
)
_SCHEMES = ("independent", "global", "hcct", "hcct-e", "hcct-p", "maxfl", "fedfa", "ifca", "flsc")
_ROBUST = ("clipped-mean", "trimmed-mean", "median", "centered-clip", "multi-krum", "krum-mean")

# name -> (task, scheme, settings beyond the tiny ones)
CANARIES = {
    **{f"scheme-{s}": ("rotated-digits", s, {}) for s in _SCHEMES},
    "scheme-fixed": ("rotated-digits", "fixed", {"partition": [[0, 1, 2, 3], [4, 5], [6, 7]]}),
    **{f"task-{t}": (t, "hcct", {}) for t in ("digit", "fmnist", "cifar10", "motivating")},
    "option-buffers": (
        "digit",
        "hcct",
        {"model": "digit_cnn_small", "update_includes_buffers": True},
    ),
    "option-authors-round0": ("rotated-digits", "hcct", {"authors_round0": True}),
    "option-fixed-k": ("rotated-digits", "hcct", {"fixed_groups": 2}),
    "option-incoming": (
        "rotated-digits",
        "hcct",
        {"initial_clients": 6, "new_clients": 1, "join_every": 1},
    ),
    "option-maxfl-reference-loss": (
        "rotated-digits",
        "maxfl",
        {"maxfl_threshold": "reference-loss"},
    ),
    "option-dropout-network": ("fmnist", "global", {"model": "fmnist_mlp_dropout"}),
    "option-authors-network": ("fmnist", "hcct", {"model": "fmnist_mlp_authors"}),
    "defence-norm-rule": ("rotated-digits", "global", {"norm_limit": 2.0}),
    "defence-count-bound": ("fmnist", "global", {"count_bound": 1.0}),
    "batched-clients": ("rotated-digits", "hcct", {"batched_clients": True}),
    "batched-batch-norm": ("digit", "hcct", {"model": "digit_cnn_small", "batched_clients": True}),
    **{f"defence-{a}": ("rotated-digits", "global", {"aggregator": a}) for a in _ROBUST},
}


def canary_config(name: str):
    """The validated RunConfig of canary ``name`` (seed 0)."""
    from ..training.config import make_config

    if name not in CANARIES:
        raise ValueError(f"unknown canary {name!r}; choose from {sorted(CANARIES)}")
    task, scheme, extra = CANARIES[name]
    return make_config(task, scheme, 0, **{**_COMMON, **_TINY[task], **extra})


def canary_numbers(result: dict) -> dict:
    """The numbers of a run a canary compares: what its computation decides, no wording.

    Per epoch its groups, client errors, training losses and update cosines (float64, so a
    change in the last bit of any update shows); the refused replies as ``[epoch,
    client]``; the aggregator's groups of two.
    """
    keys = ("groups", "client_test_error", "train_loss", "update_cosines", "update_clients")
    return {
        "history": [{k: h[k] for k in keys if k in h} for h in result["history"]],
        "rejected": [[r["epoch"], r["client"]] for r in result.get("rejected", [])],
        "few_replies": (result.get("aggregation") or {}).get("few_replies", []),
    }


def _run_here(names) -> dict:
    """Run the canaries ``names`` in this process; name -> entry (or ``unavailable``)."""
    from ..training.data import DataNotFoundError
    from ..training.engine import run_experiment
    from ..training.provenance import compute_version

    out = {}
    for name in names:
        cfg = canary_config(name)
        try:
            result = run_experiment(cfg, progress=False)
        except DataNotFoundError as err:  # the offline data sets are not on this machine
            out[name] = {"unavailable": str(err).splitlines()[0]}
            continue
        settings = {k: v for k, v in cfg.to_dict().items() if k not in NOT_COMPARED}
        out[name] = {
            "pins": PINS,
            "settings": settings,
            "compute_version": compute_version(cfg),
            "digest": digest(canary_numbers(result)),
            "final_mean": result["final"]["mean"],
            "final_groups": result["history"][-1]["groups"],
        }
    return out


def run_canaries(names=None) -> dict:
    """Run the canaries ``names`` (default all) in a fresh, pinned process; name -> entry.

    The process is ``python -m hcct_lite.runs.canary OUT [NAME ...]``, which writes the
    entries as JSON to ``OUT``.

    The process pins :data:`CANARY_KERNELS` and one thread, and refuses to run if this
    CPU cannot use them (torch would silently take others). An entry holds ``pins``
    (:data:`PINS`), ``settings`` (every setting of its config), ``compute_version``,
    ``digest``, ``final_mean`` and ``final_groups``; a canary whose data this machine
    lacks gets ``unavailable`` (the reason) instead.
    """
    names = list(CANARIES) if names is None else list(names)
    for name in names:
        canary_config(name)  # an unknown name fails here, not in the child
    with tempfile.TemporaryDirectory(prefix="hcct-canary-") as tmp:
        out = os.path.join(tmp, "canaries.json")
        proc = subprocess.run(
            [sys.executable, "-m", "hcct_lite.runs.canary", out, *names],
            env=pinned_env(),
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            lines = (proc.stderr or proc.stdout).strip().splitlines()
            raise RuntimeError(f"the canary runs failed: {lines[-1] if lines else proc.returncode}")
        with open(out) as f:
            return json.load(f)


def pinned_env(base=None) -> dict:
    """``base`` (default ``os.environ``) pinned as the canaries run: kernels and threads.

    torch, MKL and oneDNN at :data:`CANARY_KERNELS`, OpenBLAS at :data:`BLAS_CORE`,
    numpy's loops at its baseline (every optimisation it dispatches per CPU disabled), and
    :data:`CANARY_THREADS` threads.
    """
    try:  # numpy >= 2
        from numpy._core._multiarray_umath import __cpu_dispatch__ as dispatch
    except ImportError:  # pragma: no cover - numpy 1.x
        from numpy.core._multiarray_umath import __cpu_dispatch__ as dispatch
    env = kernel_env(CANARY_KERNELS, base)
    threads = str(CANARY_THREADS)
    env.update(
        OPENBLAS_CORETYPE=BLAS_CORE,
        NPY_DISABLE_CPU_FEATURES=" ".join(dispatch),
        OMP_NUM_THREADS=threads,
        MKL_NUM_THREADS=threads,
        OPENBLAS_NUM_THREADS=threads,
    )
    return env


def _check_pinned() -> None:
    """Stop unless this process computes with the pinned kernels (else say which it has)."""
    from threadpoolctl import threadpool_info

    from ..training.provenance import cpu_capability

    if cpu_capability() != CANARY_KERNELS:
        pinned = {v: os.environ.get(v) for v in KERNEL_VARIABLES}
        raise SystemExit(
            f"this CPU cannot use {CANARY_KERNELS} kernels (torch uses "
            f"{cpu_capability()}; {pinned})"
        )
    for lib in threadpool_info():
        core = lib.get("architecture")
        if lib.get("internal_api") == "openblas" and str(core).lower() != BLAS_CORE.lower():
            raise SystemExit(
                f"OpenBLAS ({lib.get('prefix')}) uses {core} kernels, not "
                f"{BLAS_CORE}: is OPENBLAS_CORETYPE ignored?"
            )


def load_canaries(path=CANARY_FILE) -> dict:
    """The stored canaries at ``path``: name -> entry; ``ValueError`` naming the file else."""
    try:
        with open(path) as f:
            stored = json.load(f)
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: unreadable ({type(err).__name__}: {err})") from None
    canaries = stored.get("canaries") if isinstance(stored, dict) else None
    if not isinstance(canaries, dict) or not all(
        isinstance(e, dict)
        and isinstance(e.get("digest"), str)
        and isinstance(e.get("compute_version"), dict)
        and isinstance(e.get("settings"), dict)
        for e in canaries.values()
    ):
        raise ValueError(
            f"{path}: not a canary file (each canary needs its settings, compute version and "
            "digest)"
        )
    return canaries


def write_canaries(fresh: dict, path=CANARY_FILE, stored=None) -> None:
    """Store ``fresh`` (from :func:`run_canaries`, every canary run) as the canaries.

    Refused (``ValueError``) while a canary's numbers differ from ``stored`` ones of the
    same settings and compute version: bump the version of the part that changed first,
    or results of the old computation would pass for the new one.
    """
    missing = sorted(n for n, e in fresh.items() if "unavailable" in e)
    if missing or set(fresh) != set(CANARIES):
        raise ValueError(
            "store every canary at once, on a machine with the offline data (HCCT_DATA_DIR): "
            f"unavailable {missing}, not run {sorted(set(CANARIES) - set(fresh))}"
        )
    _, changed = canary_problems(stored or {}, fresh)
    if changed:
        raise ValueError(
            f"the numbers of {', '.join(changed)} changed while their compute version did "
            "not: bump the version of the part you changed, then write the canaries"
        )
    doc = {
        "about": "hcct-lite's canary runs: their compute version and the SHA-256 of their "
        "numbers (hcct_lite/runs/canary.py); written by hcct-lite verify --canaries --write",
        "canaries": {n: fresh[n] for n in CANARIES},
    }
    lines = [f" {json.dumps(k)}: {json.dumps(v)}" for k, v in doc.items() if k != "canaries"]
    rows = [f"  {json.dumps(n)}: {json.dumps(e)}" for n, e in doc["canaries"].items()]
    with open(path, "w") as f:  # one line per canary: a change reads as one line of a diff
        f.write("{\n" + ",\n".join(lines) + ',\n "canaries": {\n' + ",\n".join(rows) + "\n }\n}\n")


def canary_problems(stored: dict, fresh: dict) -> tuple:
    """Compare ``fresh`` canaries with ``stored`` ones: ``(problems, changed)``.

    ``problems`` lists, one sentence each, a canary stored and not defined (or the
    reverse), a canary stored under other kernel pins (:data:`PINS`), one whose settings
    differ from the stored ones (a task's default moved), and one whose compute version
    differs from the stored one (a version was bumped): write the canaries again.
    ``changed`` lists the canaries whose numbers differ from the stored ones while their
    compute version is the same: a change of the computation that no version says.
    Canaries ``fresh`` could not run are left out.
    """
    problems, changed = [], []
    for name in sorted(set(stored) | set(fresh)):
        old, new = stored.get(name), fresh.get(name)
        if new is not None and "unavailable" in new:
            continue
        if old is None:
            problems.append(f"canary {name} is not stored: write the canaries")
        elif new is None:
            problems.append(f"canary {name} is stored but no longer defined: write the canaries")
        elif old.get("pins") != new["pins"]:
            problems.append(
                f"canary {name} was stored under other pins ({old.get('pins')}, "
                f"now {new['pins']}): write the canaries again"
            )
        elif old["settings"] != new["settings"]:
            diff = sorted(
                k
                for k in set(old["settings"]) | set(new["settings"])
                if old["settings"].get(k) != new["settings"].get(k)
            )
            problems.append(
                f"canary {name} now runs other settings ({', '.join(diff)}) than "
                "stored: write the canaries again"
            )
        elif old["compute_version"] != new["compute_version"]:
            problems.append(
                f"canary {name} was stored for compute version {old['compute_version']}, "
                f"now {new['compute_version']}: write the canaries again"
            )
        elif old["digest"] != new["digest"]:
            changed.append(name)
    return problems, changed


def change_report(stored: dict, fresh: dict, changed: list, stale=None) -> str:
    """What to do about ``changed`` canaries (see :func:`canary_problems`), in words.

    One line per canary (its parts and versions, what its numbers did), the instruction
    to bump a version, and, per part the changed canaries use, the stored results a bump
    of it makes stale: ``stale(part)`` gives grid -> runs (e.g.
    :func:`~hcct_lite.reproduction.paper_grids.grids_using`).
    """
    lines = ["numbers changed while the compute version did not:"]
    for name in changed:
        old, new = stored[name], fresh[name]
        parts = ", ".join(f"{k} {v}" for k, v in new["compute_version"].items())
        groups = "the same" if old.get("final_groups") == new["final_groups"] else "differ"
        lines.append(
            f"  {name} ({parts}): final mean error {old.get('final_mean')} -> "
            f"{new['final_mean']}, final groups {groups}"
        )
    lines.append(
        "Bump the version of the part you changed (ENGINE_VERSION, DEFENCES_VERSION, "
        "AGGREGATORS_VERSION or BATCHED_VERSION in hcct_lite/training/provenance.py, the "
        "scheme class's compute_version, TASK_VERSIONS in hcct_lite/training/tasks.py), then: "
        "hcct-lite verify --canaries --write"
    )
    if stale is not None:
        lines.append("Stored results a bump of each part makes stale:")
        for part in sorted({p for n in changed for p in fresh[n]["compute_version"]}):
            grids = stale(part)
            runs = ", ".join(f"{g} ({n})" for g, n in grids.items()) or "none of the grids"
            lines.append(f"  {part}: {runs}")
    return "\n".join(lines)


def _child(out_path: str, names: list) -> None:
    """The fresh process: check its kernels, run the canaries, write their entries."""
    import numpy  # noqa: F401 - loads OpenBLAS, so that its kernels can be checked
    import torch

    _check_pinned()
    torch.set_num_threads(CANARY_THREADS)
    with open(out_path, "w") as f:
        json.dump(_run_here(names or list(CANARIES)), f)


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2:])

"""``hcct-lite verify``: rerun a stored result in a fresh process and compare every epoch.

It reproduces when every epoch's groups match and each client's error is within one test
sample. The rerun uses the result's recorded thread count and CPU kernels, which decide the
last bits of every update (:func:`rerun`). A GPU result where no GPU is, is checked for
internal consistency only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from ..training.provenance import KERNEL_VARIABLES, kernel_env
from .store import load_result

__all__ = ["load_for_verify", "rerun", "compare_runs", "verify", "computed_on"]


def load_for_verify(path: str) -> dict:
    """Load a result to verify; ``ValueError`` naming ``path`` and the fault otherwise."""
    if not os.path.isfile(path):
        what = "does not exist" if not os.path.exists(path) else "is not a regular file"
        raise ValueError(f"{path}: {what}")
    return load_result(path)


def computed_on(r: dict) -> str:
    """The device a result was computed on (its provenance's, else its config's)."""
    prov = r.get("provenance") if isinstance(r.get("provenance"), dict) else {}
    return str(prov.get("device") or r["config"].get("device", "cpu"))


def _consistency_report(path: str, stored: dict, device: str, log) -> dict:
    """A GPU result where no GPU is: every derived field was checked on loading; say so."""
    log(
        f"{path}: computed on {device}, and this machine has no GPU: not rerun; checked for "
        "internal consistency only (each epoch's mean, missing clients, learning rate, final "
        "block, rejections and aggregation agree with what they derive from)"
    )
    return {
        "path": path,
        "checked": "consistency",
        "reproduces": None,
        "device": device,
        "epochs_compared": 0,
    }


def rerun(result: dict, capability: str | None = None, threads: int | None = None) -> dict:
    """Rerun ``result``'s config in a fresh process; return the rerun's result.

    The rerun pins the CPU kernels and the torch thread count recorded in the result's
    provenance (``cpu_kernel_env``, else ``cpu_capability``; one thread and this machine's
    kernels when it records none). ``capability`` (a name of
    :data:`~hcct_lite.training.provenance.CPU_KERNELS`) and ``threads`` replace them. The
    rerun's result carries ``test_sizes`` (T_i, each client's test samples).
    """
    from ..training.config import setting_names

    prov = result.get("provenance") or {}
    threads = int(threads or prov.get("torch_threads") or 1)
    names = set(setting_names())
    fields = {k: v for k, v in result["config"].items() if k in names}
    env = {k: v for k, v in os.environ.items() if k not in KERNEL_VARIABLES}
    if capability:
        env = kernel_env(capability, env)
    elif isinstance(prov.get("cpu_kernel_env"), dict) and prov["cpu_kernel_env"]:
        pinned = {k: str(v) for k, v in prov["cpu_kernel_env"].items() if k in KERNEL_VARIABLES}
        env.update(pinned)  # any other variable a file names is not ours to set
        # the kernels the rerun pins are the ones to check for, not a label beside them
        capability = pinned.get("ATEN_CPU_CAPABILITY") or prov.get("cpu_capability")
    elif prov.get("cpu_capability"):
        capability = env["ATEN_CPU_CAPABILITY"] = prov["cpu_capability"]
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    with tempfile.TemporaryDirectory(prefix="hcct-verify-") as tmp:
        spec, out = os.path.join(tmp, "config.json"), os.path.join(tmp, "rerun.json")
        with open(spec, "w") as f:
            json.dump({"config": fields, "threads": threads, "capability": capability}, f)
        proc = subprocess.run(
            [sys.executable, "-m", "hcct_lite.runs.verify", spec, out],
            env=env,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            lines = (proc.stderr or proc.stdout).strip().splitlines()
            raise RuntimeError(f"the rerun failed: {lines[-1] if lines else proc.returncode}")
        with open(out) as f:
            return json.load(f)


def _child(spec_path: str, out_path: str) -> None:
    """The fresh process: check its kernels, run the config, write the result."""
    import torch

    from ..training.config import RunConfig
    from ..training.engine import run_experiment
    from ..training.provenance import cpu_capability
    from ..training.tasks import build_clients

    with open(spec_path) as f:
        spec = json.load(f)
    want = spec["capability"]
    if want and cpu_capability() != want.lower():
        raise SystemExit(f"this CPU cannot use {want} kernels (torch uses {cpu_capability()})")
    torch.set_num_threads(spec["threads"])
    cfg = RunConfig.from_dict(spec["config"])
    clients = build_clients(cfg)
    result = run_experiment(cfg, progress=False, clients=clients)
    result["test_sizes"] = [int(c.y_test.shape[0]) for c in clients]
    with open(out_path, "w") as f:
        json.dump(result, f)


def compare_runs(stored: dict, again: dict) -> dict:
    """How far ``again`` (a rerun with ``test_sizes``) is from ``stored``, epoch by epoch.

    Returns
    -------
    dict
        ``reproduces`` (bool: the same number of epochs, the same groups in every epoch
        and every client's error within one test sample, 100 / T_i points, in every
        epoch), ``epochs_compared``, ``first_group_difference`` (epoch or None),
        ``same_groups_share`` (share of epochs with identical groups),
        ``mean_adjusted_rand`` (partition agreement over epochs, 1 = identical),
        ``first_error_difference`` (``[epoch, client]`` of the first error beyond one test
        sample, or None), ``error_differences`` (per client, final rerun minus stored, in
        points; None where either is missing), ``clients_beyond_one_sample`` (final
        epoch), ``mean_error_change``.
    """
    from sklearn.metrics import adjusted_rand_score

    from .reading import group_labels

    n = len(again["test_sizes"])
    a = [h["groups"] for h in stored["history"]]
    b = [h["groups"] for h in again["history"]]
    same = [x == y for x, y in zip(a, b, strict=False)] + [False] * abs(len(a) - len(b))
    ari = [
        adjusted_rand_score(group_labels(x, n), group_labels(y, n))
        for x, y in zip(a, b, strict=False)
    ]
    one = [100.0 / t for t in again["test_sizes"]]
    e0, e1 = _final_errors(stored, n), _final_errors(again, n)
    diffs, beyond = _beyond(e0, e1, one)
    first_error = None
    for t, (h0, h1) in enumerate(zip(stored["history"], again["history"], strict=False)):
        _, off = _beyond(
            _padded(h0["client_test_error"], n), _padded(h1["client_test_error"], n), one
        )
        if off:
            first_error = [t, off[0]]
            break
    first = next((t for t, ok in enumerate(same) if not ok), None)
    return {
        "reproduces": first is None and first_error is None and not beyond,
        "epochs_compared": min(len(a), len(b)),
        "first_group_difference": first,
        "first_error_difference": first_error,
        "same_groups_share": float(np.mean(same)),
        "mean_adjusted_rand": float(np.mean(ari)) if ari else float("nan"),
        "error_differences": diffs,
        "clients_beyond_one_sample": beyond,
        "mean_error_change": again["final"]["mean"] - stored["final"]["mean"],
    }


def _padded(errors, n: int) -> list:
    return list(errors) + [None] * (n - len(errors))


def _beyond(e0, e1, one) -> tuple:
    """Differences (rerun minus stored) and the clients off by more than one test sample."""
    diffs = [None if x is None or y is None else y - x for x, y in zip(e0, e1, strict=True)]
    off = [
        i
        for i, (x, y, d, s) in enumerate(zip(e0, e1, diffs, one, strict=True))
        if (x is None) != (y is None) or (d is not None and abs(d) > s + 1e-9)
    ]
    return diffs, off


def _final_errors(r: dict, n: int) -> list:
    """Each client's final error (n,), None for a missing (or never active) client."""
    return _padded(r["final"]["client_test_error"], n)


def verify(path: str, capability: str | None = None, log=print, stored=None) -> dict:
    """Rerun the result at ``path`` (:func:`rerun`) and compare (:func:`compare_runs`).

    ``stored``: the result already loaded by :func:`load_for_verify` (loaded here if None).
    ``capability`` reruns under other kernels: a partition decided near a break-even point
    may flip on them, and this shows how much the conclusions depend on them.
    Returns the comparison plus ``path``, ``capability`` and ``threads`` of the rerun and
    the stored result's ``recorded_capability``; ``log`` gets a line per finding.
    """
    stored = load_for_verify(path) if stored is None else stored
    prov = stored.get("provenance") or {}
    device = computed_on(stored)
    if not device.startswith("cpu"):
        import torch

        if not torch.cuda.is_available():
            return _consistency_report(path, stored, device, log)
    again = rerun(stored, capability)
    used = again["provenance"]["cpu_capability"]
    if not prov.get("cpu_capability"):
        log(f"{path}: its provenance records no CPU kernels; reran with this machine's ({used})")
    report = compare_runs(stored, again)
    report.update(
        path=path,
        checked="rerun",
        device=device,
        capability=used,
        threads=again["provenance"]["torch_threads"],
        recorded_capability=prov.get("cpu_capability"),
        code_fingerprint=again["provenance"]["code_fingerprint"],
    )
    _log_report(report, log)
    return report


def _log_report(rep: dict, log) -> None:
    head = f"{rep['path']} ({rep['capability']} kernels, {rep['threads']} thread(s)): "
    if rep["reproduces"]:
        log(
            head + f"reproduces (all {rep['epochs_compared']} epochs compared: the same "
            "groups and every client's error within one test sample in each)"
        )
        return
    where = rep["first_error_difference"]
    log(
        head + f"does NOT reproduce: groups first differ in epoch {rep['first_group_difference']}"
        f"; errors first differ by more than one test sample in "
        + (f"epoch {where[0]} (client {where[1]})" if where else "no epoch")
        + f"; groups identical in {100 * rep['same_groups_share']:.0f}% of epochs, mean "
        f"adjusted Rand {rep['mean_adjusted_rand']:.3f}; mean final error "
        f"{rep['mean_error_change']:+.2f} points"
    )
    for i in rep["clients_beyond_one_sample"]:
        d = rep["error_differences"][i]
        log(f"  client {i}: final error " + ("missing in one run" if d is None else f"{d:+.2f}"))


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])

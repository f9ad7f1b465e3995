"""``hcct-lite verify``: check a stored result without rerunning it, then rerun it.

Checked first, without a rerun: a shipped file must be as shipped (its digest), and the
federation its config builds must give its sizes and domains and a whole number of test
samples behind every error (:func:`sample_problem`); its derived fields were checked on
loading. A CPU result is then rerun in a fresh process under its recorded thread count and
CPU kernels (:func:`rerun`), and reproduces only if every field a rerun produces is the
same, bit for bit (:func:`compare_runs`). A GPU result where no GPU is, is not rerun.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from ..training.provenance import KERNEL_VARIABLES, kernel_env
from .store import load_result, shipped_key, shipped_problem

__all__ = [
    "load_for_verify",
    "federation",
    "sample_problem",
    "rerun",
    "compare_runs",
    "verify",
    "computed_on",
    "EPOCH_FIELDS",
    "RUN_FIELDS",
]

# What a rerun produces, compared exactly where the stored file has it (a grid's files keep
# one epoch's cosines). Timing is wall-clock, never compared; the thread count is what the
# rerun runs under.
EPOCH_FIELDS = ("groups", "client_test_error", "train_loss", "update_cosines", "update_clients")
RUN_FIELDS = ("sizes", "domains", "rejected", "aggregation")
_WORDS = {
    "groups": "groups",
    "client_test_error": "errors",
    "train_loss": "training losses",
    "update_cosines": "update cosines",
    "update_clients": "the cosines' clients",
}


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


def _config(result: dict):
    """The RunConfig of ``result``'s config, settings this version does not know left out."""
    from ..training.config import RunConfig, setting_names

    names = set(setting_names())
    return RunConfig.from_dict({k: v for k, v in result["config"].items() if k in names})


def _federation_of(clients) -> dict:
    return {
        "sizes": [int(c.size) for c in clients],
        "domains": [c.domain for c in clients],
        "test_sizes": [int(c.y_test.shape[0]) for c in clients],
    }


def federation(result: dict) -> dict:
    """``sizes``, ``domains`` and ``test_sizes`` (T_i) of ``result``'s federation.

    Built here from its config, without training.
    """
    from ..training.tasks import build_clients

    return _federation_of(build_clients(_config(result)))


def sample_problem(stored: dict, fed: dict) -> str | None:
    """What in ``stored`` no run of its federation ``fed`` (:func:`federation`) gives; or None.

    Sizes or domains other than the federation's, or an error that is not a whole number of
    its client's test samples (``100 * wrong / T_i``, as every trainer computes it).
    """
    for key in ("sizes", "domains"):
        if stored[key] != fed[key]:
            i = next(
                i for i, (a, b) in enumerate(zip(stored[key], fed[key], strict=True)) if a != b
            )
            return (
                f"its {key} are not those its config builds (client {i}: {stored[key][i]!r}, "
                f"built {fed[key][i]!r})"
            )
    for t, h in enumerate(stored["history"]):
        for i, (e, n) in enumerate(zip(h["client_test_error"], fed["test_sizes"], strict=False)):
            n = max(n, 1)
            if e is not None and 100.0 * round(e * n / 100.0) / n != e:
                return (
                    f"client {i}'s error in epoch {t} ({e!r}) is not a whole number of its "
                    f"{n} test samples"
                )
    return None


def rerun(result: dict, capability: str | None = None, threads: int | None = None) -> dict:
    """Rerun ``result``'s config in a fresh process; return the rerun's result.

    The rerun pins the CPU kernels and the torch thread count recorded in the result's
    provenance (``cpu_kernel_env``, else ``cpu_capability``; one thread and this machine's
    kernels when it records none). ``capability`` (a name of
    :data:`~hcct_lite.training.provenance.CPU_KERNELS`) and ``threads`` replace them. The
    rerun's result carries ``test_sizes`` (T_i, each client's test samples).
    """
    prov = result.get("provenance") or {}
    threads = int(threads or prov.get("torch_threads") or 1)
    fields = _config(result).to_dict()
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
    result["test_sizes"] = _federation_of(clients)["test_sizes"]
    with open(out_path, "w") as f:
        json.dump(result, f)


def _same(a, b) -> bool:
    """Equal as JSON, bit for bit (NaN equal to NaN)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def compare_runs(stored: dict, again: dict) -> dict:
    """How ``again`` (a rerun with ``test_sizes``) differs from ``stored``, field by field.

    Returns
    -------
    dict
        ``reproduces`` (bool: as many epochs, and every field of :data:`EPOCH_FIELDS` in
        every epoch and of :data:`RUN_FIELDS` the same, bit for bit, where ``stored`` has
        it), ``epochs_compared``, ``first_differences`` (field -> the first epoch it
        differs in), ``run_differences`` (the fields of :data:`RUN_FIELDS` that differ),
        ``first_group_difference`` (epoch or None), ``first_error_difference`` (``[epoch,
        client]`` or None), ``same_groups_share`` (share of epochs with identical groups),
        ``mean_adjusted_rand`` (partition agreement over epochs, 1 = identical),
        ``error_differences`` (per client, final rerun minus stored, in points; None where
        either is missing), ``clients_differing`` (final epoch), ``mean_error_change``.
    """
    from sklearn.metrics import adjusted_rand_score

    from .reading import group_labels

    n = len(again["test_sizes"])
    a, b = stored["history"], again["history"]
    pairs = list(zip(a, b, strict=False))
    first = {}
    for t, (h0, h1) in enumerate(pairs):
        for k in EPOCH_FIELDS:
            if k in h0 and not _same(h0[k], h1.get(k)):
                first.setdefault(k, t)
    run = [k for k in RUN_FIELDS if k in stored and not _same(stored[k], again.get(k))]
    same = [h0["groups"] == h1["groups"] for h0, h1 in pairs] + [False] * abs(len(a) - len(b))
    ari = [
        adjusted_rand_score(group_labels(h0["groups"], n), group_labels(h1["groups"], n))
        for h0, h1 in pairs
    ]
    first_error = None
    if "client_test_error" in first:
        t = first["client_test_error"]
        e0, e1 = (_padded(h[t]["client_test_error"], n) for h in (a, b))
        first_error = [t, next(i for i, (x, y) in enumerate(zip(e0, e1, strict=True)) if x != y)]
    e0, e1 = (_padded(r["final"]["client_test_error"], n) for r in (stored, again))
    diffs = [None if x is None or y is None else y - x for x, y in zip(e0, e1, strict=True)]
    return {
        "reproduces": len(a) == len(b) and not first and not run,
        "epochs_compared": len(pairs),
        "first_differences": {k: first[k] for k in EPOCH_FIELDS if k in first},
        "run_differences": run,
        "first_group_difference": first.get("groups"),
        "first_error_difference": first_error,
        "same_groups_share": float(np.mean(same)),
        "mean_adjusted_rand": float(np.mean(ari)) if ari else float("nan"),
        "error_differences": diffs,
        "clients_differing": [i for i, (x, y) in enumerate(zip(e0, e1, strict=True)) if x != y],
        "mean_error_change": again["final"]["mean"] - stored["final"]["mean"],
    }


def _padded(errors, n: int) -> list:
    return list(errors) + [None] * (n - len(errors))


def verify(path: str, capability: str | None = None, log=print, stored=None) -> dict:
    """Check the result at ``path`` without a rerun, then rerun it (:func:`rerun`) and compare.

    ``stored``: the result already loaded by :func:`load_for_verify` (loaded here if None).
    ``capability`` reruns under other kernels: a partition decided near a break-even point
    may flip on them, and this shows how much the conclusions depend on them.

    Returns the report: ``path``, ``device``, ``checked`` and ``reproduces``. ``checked``
    is ``"refused"`` (``reproduces`` False, ``problem`` says why: a shipped file not as
    shipped, or what :func:`sample_problem` finds), ``"consistency"`` (a GPU result where no
    GPU is: not rerun, ``reproduces`` None) or ``"rerun"``, with :func:`compare_runs`'s
    fields, ``capability`` and ``threads`` of the rerun and the stored result's
    ``recorded_capability``. ``log`` gets a line per finding.
    """
    stored = load_for_verify(path) if stored is None else stored
    prov = stored.get("provenance") or {}
    device = computed_on(stored)
    base = {"path": path, "device": device, "epochs_compared": 0}
    problem = shipped_problem(path, stored) or sample_problem(stored, federation(stored))
    if problem:
        log(f"{path}: refused, not rerun: {problem}")
        return {**base, "checked": "refused", "reproduces": False, "problem": problem}
    if not device.startswith("cpu"):
        import torch

        if not torch.cuda.is_available():
            whose = "a shipped file as shipped" if shipped_key(path) else "not a shipped file"
            log(
                f"{path}: computed on {device}, and this machine has no GPU: not rerun. "
                f"Checked without a rerun: {whose}; its sizes and domains are those its config "
                "builds, every error is a whole number of its client's test samples, and "
                "every derived field agrees with what it derives from"
            )
            return {**base, "checked": "consistency", "reproduces": None}
    again = rerun(stored, capability)
    used = again["provenance"]["cpu_capability"]
    if not prov.get("cpu_capability"):
        log(f"{path}: its provenance records no CPU kernels; reran with this machine's ({used})")
    report = {**base, "checked": "rerun", **compare_runs(stored, again)}
    report.update(
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
            "groups, errors and training losses in each, and the same sizes and domains, bit "
            "for bit; its timing is not compared, and its thread count is the rerun's)"
        )
        return
    found = []
    for k, t in rep["first_differences"].items():
        where = rep["first_error_difference"]
        client = f" (client {where[1]})" if k == "client_test_error" else ""
        found.append(f"{_WORDS[k]} first differ in epoch {t}{client}")
    found += [f"its {k} differ" for k in rep["run_differences"]]
    if not found:
        found.append("the rerun has another number of epochs")
    log(
        head + "does NOT reproduce: " + "; ".join(found) + f"; groups identical in "
        f"{100 * rep['same_groups_share']:.0f}% of epochs, mean adjusted Rand "
        f"{rep['mean_adjusted_rand']:.3f}; mean final error {rep['mean_error_change']:+.2f} points"
    )
    for i in rep["clients_differing"]:
        d = rep["error_differences"][i]
        log(f"  client {i}: final error " + ("missing in one run" if d is None else f"{d:+.2f}"))


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])

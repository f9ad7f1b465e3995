"""``hcct-lite migrate-results``: state in older result files what their code ran with.

A file written before a setting existed does not state it, and one written before compute
versions records none. The reuse rule fills no gap (:func:`~hcct_lite.runs.store.
reuse_decision`), so such a file is run again until this migration has written, once:

- each setting it lacks, from :data:`SETTINGS_BEFORE`: what code before the setting
  existed did (no norm rule, plain averaging), never today's default;
- its compute version, when the code that wrote it is listed in :data:`KNOWN_CODE`: code
  whose canary runs give version 1's numbers bit for bit (``tools/canaries_of_commit.py``
  measures it).

Nothing else in a file changes. A migrated file says what was added and why under
``provenance.migrated``; a file of unknown code, or whose config contradicts what the
migration would write, is left as it is and named.
"""

from __future__ import annotations

import copy
import json
import os

from ..training.provenance import compute_version
from .results import write_json
from .schema import config_problem, result_problem

__all__ = ["SETTINGS_BEFORE", "KNOWN_CODE", "migrate_result", "migrate_folder"]

# setting -> (what code before it did, the commit that brought the setting, in words)
SETTINGS_BEFORE = {
    "norm_limit": (0.0, "c42ff55", "no norm rule: every reply was averaged"),
    "aggregator": ("mean", "0303c33", "plain D-weighted averaging (FedAvg)"),
    "clip_factor": (4.0, "0303c33", "its first value; no part of a run whose aggregator is mean"),
    "trim_fraction": (0.25, "0303c33", "its first value; no part of a run whose aggregator is "
                      "mean"),
    "cuda_graphs": (False, "332b0bb", "every step run eagerly"),
}  # fmt: skip

# The code that wrote shipped results and computes what version 1 computes, by the code
# fingerprint it recorded or, for files older than fingerprints, by its commit (a prefix of
# 10 hex digits). Each was checked with tools/canaries_of_commit.py: every canary that code
# can run (21-22 of 27 by fingerprint, 18-21 by commit; the others need networks or
# defences it did not have) gives version 1's groups, errors and training losses bit for
# bit. The fingerprinted code also gives its update cosines bit for bit; the older commits
# record them through an earlier Gram computation that differs in the last bits (by at most
# 3.0e-15, as two OpenBLAS kernels do; only the Digit ablation's files record cosines).
KNOWN_CODE = {
    "fingerprint": {"2f5b3c8a9ed4": 1, "45095d940d1c": 1},
    "commit": {
        "e624479aa0": 1, "283478727d": 1, "4adbcc8a37": 1, "7f17fec428": 1,
        "f5a7df51ec": 1, "1c2bdc2596": 1, "9f21c83494": 1, "eeebe0678a": 1,
    },
}  # fmt: skip


def _known_version(prov: dict):
    """The compute version the code that wrote a result is known to compute as, or None."""
    fp = prov.get("code_fingerprint")
    if fp is not None:
        return KNOWN_CODE["fingerprint"].get(fp)
    commit = prov.get("code_commit")
    return KNOWN_CODE["commit"].get(commit[:10]) if isinstance(commit, str) else None


def migrate_result(r: dict) -> tuple:
    """``(migrated result or None, what was done)`` for one loaded result ``r``.

    None when nothing needs writing (already complete) or when the file cannot be
    migrated; the sentence says which, and why.
    """
    if problem := result_problem(r):
        return None, f"not migrated: not a complete result ({problem})"
    prov = r.get("provenance")
    if not isinstance(prov, dict):
        return None, "not migrated: it has no provenance to say which code wrote it"
    added = {k: v for k, (v, _c, _w) in SETTINGS_BEFORE.items() if k not in r["config"]}
    versioned = isinstance(prov.get("compute_version"), dict)
    if not added and versioned:
        return None, "complete: states every setting and its compute version"
    code = prov.get("code_fingerprint") or (prov.get("code_commit") or "unknown")[:10]
    if not versioned and _known_version(prov) != 1:
        return None, f"not migrated: code {code} is not known to compute as a version does"
    out = copy.deepcopy(r)
    out["config"].update(added)
    cfg, problem = config_problem(out["config"])
    if problem:
        return None, f"not migrated: with the settings older code ran with, {problem}"
    record = {
        "by": "hcct-lite migrate-results",
        "settings": {k: f"{v!r}: {SETTINGS_BEFORE[k][2]} (before commit {SETTINGS_BEFORE[k][1]})"
                     for k, v in added.items()},
    }  # fmt: skip
    if not versioned:
        out["provenance"]["compute_version"] = compute_version(cfg)
        record["compute_version"] = (
            f"its code ({code}) gives version 1's canary numbers (tools/canaries_of_commit.py)"
        )
    out["provenance"]["migrated"] = record
    return out, "migrated: " + ", ".join([*added, *([] if versioned else ["compute_version"])])


def migrate_folder(folder: str, dry_run: bool = False, log=print) -> dict:
    """Migrate every result file under ``folder`` (``<grid>/<name>.json``) in place.

    Each file is written atomically, only if something is added; ``dry_run`` writes
    nothing. Returns counts: ``migrated``, ``complete``, ``not migrated``.
    """
    counts = {"migrated": 0, "complete": 0, "not migrated": 0}
    for grid in sorted(os.listdir(folder)):
        path = os.path.join(folder, grid)
        if not os.path.isdir(path):
            continue
        for name in sorted(os.listdir(path)):
            if not name.endswith(".json") or name.startswith("."):
                continue
            file = os.path.join(path, name)
            try:
                with open(file) as f:
                    r = json.load(f)
            except (OSError, ValueError, RecursionError) as err:
                r, why = None, f"not migrated: unreadable ({type(err).__name__})"
            else:
                r, why = migrate_result(r)
            counts[why.split(":")[0]] += 1
            if r is not None and not dry_run:
                write_json(file, r)
            if not why.startswith("complete"):
                log(f"{os.path.join(grid, name)}: {why}")
    return counts

"""The result store trusts nothing.

A file is reused only if it is a complete, well-formed result of the same settings and of
the same compute version (:func:`~hcct_lite.training.provenance.compute_version`: the
version of each part of the code its numbers come from, not the code's text); output paths
are checked before any training. Older files gain the settings their code ran with once,
through ``hcct-lite migrate-results`` (:func:`migrate_folder`, below).
"""

from __future__ import annotations

import copy
import json
import os
import stat
import tempfile
import time

from ..training.provenance import compute_version, source_fingerprint
from .files import output_problem
from .results import write_json
from .schema import config_problem, result_problem

__all__ = [
    "load_result",
    "result_problem",
    "reuse_problem",
    "reuse_decision",
    "check_output_path",
    "clean_temp_files",
    "TEMP_PREFIX",
    "OTHER_CODE",
    "NOT_COMPARED",
    "SETTINGS_BEFORE",
    "KNOWN_CODE",
    "migrate_result",
    "migrate_folder",
    "settings_dir",
    "code_fingerprint",
]

# write_json's temporary files; one older than a minute belongs to a killed write
TEMP_PREFIX = ".tmp-"
_STALE_TEMP_SECONDS = 60.0
# how reuse_decision starts the reason of a result of another compute version
OTHER_CODE = "of another compute version"
# settings that do not change what a run computes (where it ran, where data came from, and
# whether a GPU replayed its steps as CUDA graphs: the same kernels)
NOT_COMPARED = ("device", "data_root", "download", "cuda_graphs")
_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _unreadable(err: Exception) -> str:
    if isinstance(err, RecursionError):  # a crafted file: JSON nested thousands deep
        return "its JSON is nested too deeply to be a result"
    return f"{type(err).__name__}: {err}"


def load_result(path: str) -> dict:
    """The complete, well-formed result at ``path``; ``ValueError`` naming the file else."""
    try:
        with open(path) as f:
            r = json.load(f)
    except (OSError, ValueError, RecursionError) as err:
        raise ValueError(f"{path}: unreadable ({_unreadable(err)})") from None
    if problem := result_problem(r):
        raise ValueError(f"{path}: not a complete result ({problem})")
    return r


def _kind(path: str) -> str | None:
    """None for a regular file (or nothing there); else what is there, in words."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):  # nothing there
        return None
    except OSError as err:
        return f"unreadable ({err.strerror})"
    return next((word for test, word in _KINDS if test(mode)), None)


def _parts(version) -> str:
    return ", ".join(f"{k} {v}" for k, v in version.items())


def _version_problem(stored: dict, want: dict) -> str | None:
    """Why ``stored``'s compute version is not ``want`` (a compute version); None if it is.

    Every part ``want`` names must have the same version (an int, not a bool) in the
    stored result's provenance.
    """
    prov = stored.get("provenance") if isinstance(stored.get("provenance"), dict) else {}
    have = prov.get("compute_version")
    commit = (prov.get("code_commit") or "unknown")[:8]
    if not isinstance(have, dict):
        return (
            f"{OTHER_CODE} (commit {commit}): its provenance records none; hcct-lite "
            "migrate-results records it for code known to compute as a version does"
        )
    for part, version in want.items():
        got = have.get(part)
        if type(got) is not int or got != version:
            return f"{OTHER_CODE} (commit {commit}): its {part} is version {got!r}, now {version}"
    return None


def _same_as_without_rule(stored: dict, want: dict) -> bool:
    """Whether ``stored`` ran under the norm rule, refused no reply, and ``want`` has none.

    The rule only removes replies: a run in which it refused none computed exactly what
    the run without it computes (tests/test_store.py reruns one both ways). Any refused
    reply, or a record of refusals that is not a list, and the run is another.
    """
    limit = stored["config"].get("norm_limit")
    rejected = stored.get("rejected")
    return (want.get("norm_limit") == 0 and isinstance(limit, (int, float)) and limit > 0
            and isinstance(rejected, list) and not rejected)  # fmt: skip


def reuse_decision(path: str, cfg) -> tuple:
    """``(reusable, reason)``: whether the file at ``path`` can stand for a run of ``cfg``.

    Not reusable: ``"missing"``; an unreadable or incomplete file (:func:`result_problem`,
    named); a setting that changes the computation (all but :data:`NOT_COMPARED`) whose
    stored value differs from ``cfg``'s, or that the file does not state (never filled in
    from today's defaults: older code did not run as today's defaults say); or a compute
    version (:func:`~hcct_lite.training.provenance.compute_version`) other than ``cfg``'s,
    the reason then starting with :data:`OTHER_CODE`. The reason of a reusable file names
    the compute version it shares. A run under the norm rule that refused no reply stands
    for the same run without the rule (the rule only removes replies), never the reverse.

    Raises
    ------
    ValueError
        If something other than a regular file is at ``path`` (a folder, a FIFO, a
        device): it is never read or replaced.
    """
    if not os.path.lexists(path):
        return False, "missing"
    if kind := _kind(path):
        raise ValueError(f"{path}: is {kind}, not a result file; move it away and rerun")
    try:
        with open(path) as f:
            stored = json.load(f)
    except (OSError, ValueError, RecursionError) as err:
        return False, f"unreadable ({_unreadable(err)})"
    if problem := result_problem(stored):
        return False, f"not a complete result ({problem})"
    want, have = cfg.to_dict(), dict(stored["config"])
    note = ""
    if _same_as_without_rule(stored, want):
        note = f"; its norm rule ({have['norm_limit']:g}) refused no reply: the run without it"
        have["norm_limit"] = want["norm_limit"]
    for key in sorted((set(want) | set(have)) - set(NOT_COMPARED)):
        if key not in have:
            return False, (f"its config does not state {key} (written before the setting "
                           "existed): hcct-lite migrate-results records what older code ran "
                           "with")  # fmt: skip
        if have[key] != want.get(key):
            return False, f"its {key} is {have[key]!r}, the run asks for {want.get(key)!r}"
    version = compute_version(cfg)
    if problem := _version_problem(stored, version):
        return False, problem
    return True, f"same settings and compute version ({_parts(version)}){note}"


def reuse_problem(path: str, cfg, allow_older: bool = False) -> str | None:
    """Why the file at ``path`` cannot stand for a run of ``cfg``; None if it can be reused.

    :func:`reuse_decision`'s reason; ``allow_older`` also reuses a result of another
    compute version (its reason starts with :data:`OTHER_CODE`).
    """
    ok, why = reuse_decision(path, cfg)
    return None if ok or (allow_older and why.startswith(OTHER_CODE)) else why


def check_output_path(path, folder: bool = False, what: str = "--json") -> None:
    """Raise ``ValueError`` naming ``what`` unless results can be written at ``path``.

    Called before any training, so a bad output path never costs a finished run: an empty
    name, a name too long for the file system, something other than a regular file (a
    device, a FIFO: never replaced), a folder where a file is asked for (or the reverse),
    or a place this process cannot write to.
    """
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"{what} {path!r}: give a {'folder' if folder else 'file'} name")
    target = os.path.abspath(path)
    for part in target.split(os.sep):
        if len(os.fsencode(part)) > 255:
            raise ValueError(f"{what}: the name {part[:20]}... has {len(part)} characters; "
                             "file systems allow 255")  # fmt: skip
    kind = _kind(target)
    if folder and (kind not in (None, "a folder") or os.path.isfile(target)):
        raise ValueError(f"{what} {path}: is {kind or 'a file'}, not a folder")
    if not folder and kind is not None:
        hint = "; give a file name such as out.json" if kind == "a folder" else ""
        raise ValueError(f"{what} {path}: is {kind}, not a regular file{hint}")
    parent = target if folder else os.path.dirname(target)
    if problem := output_problem(target, folder):  # no other user steers what is written
        raise ValueError(f"{what} {path}: {problem}")
    try:
        os.makedirs(parent, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".check-"):
            pass
    except OSError as err:
        raise ValueError(f"{what} {path}: cannot write there ({err.strerror or err})") from None


def clean_temp_files(folder: str) -> list:
    """Remove temporary files that killed writes left in ``folder``; return their names.

    Only :func:`~hcct_lite.runs.results.write_json`'s own (``.tmp-*.json``), and only those
    older than a minute: a live write takes milliseconds.
    """
    removed = []
    if not os.path.isdir(folder):
        return removed
    now = time.time()
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if not (name.startswith(TEMP_PREFIX) and name.endswith(".json")):
            continue
        try:
            if os.path.isfile(path) and now - os.path.getmtime(path) > _STALE_TEMP_SECONDS:
                os.unlink(path)
                removed.append(name)
        except OSError:
            continue  # another process removed it first
    return removed


# ``hcct-lite migrate-results``: state in older result files what their code ran with.
#
# A file written before a setting existed does not state it, and one written before compute
# versions records none. The reuse rule fills no gap (:func:`reuse_decision`), so such a
# file is run again until this migration has written, once:
#
# - each setting it lacks, from :data:`SETTINGS_BEFORE`: what code before the setting
#   existed did (no norm rule, plain averaging), never today's default;
# - its compute version, when the code that wrote it is listed in :data:`KNOWN_CODE`: code
#   whose canary runs give version 1's numbers bit for bit (``tools/canaries_of_commit.py``
#   measures it).
#
# Nothing else in a file changes. A migrated file says what was added and why under
# ``provenance.migrated``; a file of unknown code, or whose config contradicts what the
# migration would write, is left as it is and named.

# setting -> (what code before it did, the commit that brought the setting, in words)
SETTINGS_BEFORE = {
    "norm_limit": (0.0, "c42ff55", "no norm rule: every reply was averaged"),
    "aggregator": ("mean", "0303c33", "plain D-weighted averaging (FedAvg)"),
    "clip_factor": (4.0, "0303c33", "its first value; no part of a run whose aggregator is mean"),
    "trim_fraction": (0.25, "0303c33", "its first value; no part of a run whose aggregator is "
                      "mean"),
    "cuda_graphs": (False, "332b0bb", "every step run eagerly"),
    "batched_clients": (False, "ae2f28a", "each client trained after the other"),
    "gpu_precision": ("default", "ae2f28a", "torch's own arithmetic"),
    "count_bound": (0.0, "f510233", "every declared count taken as it was"),
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
    record = copy.deepcopy(prov.get("migrated")) or {"by": "hcct-lite migrate-results"}
    record.setdefault("settings", {}).update(  # an earlier migration's record is kept
        {k: f"{v!r}: {SETTINGS_BEFORE[k][2]} (before commit {SETTINGS_BEFORE[k][1]})"
         for k, v in added.items()})  # fmt: skip
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

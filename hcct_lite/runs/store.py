"""The result store trusts nothing.

A file is reused only if it is a complete, well-formed result of the same settings and of
the same code; output paths are checked before any training.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import time

from ..training.provenance import compute_fingerprint
from .files import output_problem
from .schema import result_problem

__all__ = [
    "load_result",
    "result_problem",
    "reuse_problem",
    "check_output_path",
    "clean_temp_files",
    "TEMP_PREFIX",
    "OTHER_CODE",
]

# write_json's temporary files; one older than a minute belongs to a killed write
TEMP_PREFIX = ".tmp-"
_STALE_TEMP_SECONDS = 60.0
# how reuse_problem starts the reason of a result written by other code
OTHER_CODE = "written by other code"
# settings that do not change what a run computes (where it ran, where data came from, and
# whether a GPU replayed its steps as CUDA graphs: the same kernels)
_NOT_COMPARED = ("device", "data_root", "download", "cuda_graphs")
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


def _default(key: str):
    """RunConfig's default for setting ``key`` (what a run without the setting does)."""
    from dataclasses import MISSING, fields

    from ..training.config import RunConfig

    f = next(f for f in fields(RunConfig) if f.name == key)
    return f.default_factory() if f.default is MISSING else f.default


def reuse_problem(path: str, cfg, allow_older: bool = False) -> str | None:
    """Why the file at ``path`` cannot stand for a run of ``cfg``; None if it can be reused.

    ``"missing"``; an unreadable or incomplete file (:func:`result_problem`, named); the
    first setting whose stored value differs from ``cfg``'s (device and data location are
    not compared; a setting older code did not record counts as its default); or a result
    written by other
    code (its ``code_fingerprint`` differs from
    :func:`~hcct_lite.training.provenance.compute_fingerprint`), unless ``allow_older``.

    Raises
    ------
    ValueError
        If something other than a regular file is at ``path`` (a folder, a FIFO, a
        device): it is never read or replaced.
    """
    if not os.path.lexists(path):
        return "missing"
    if kind := _kind(path):
        raise ValueError(f"{path}: is {kind}, not a result file; move it away and rerun")
    try:
        with open(path) as f:
            stored = json.load(f)
    except (OSError, ValueError, RecursionError) as err:
        return f"unreadable ({_unreadable(err)})"
    if problem := result_problem(stored):
        return f"not a complete result ({problem})"
    want, have = cfg.to_dict(), stored["config"]
    for key in sorted((set(want) | set(have)) - set(_NOT_COMPARED)):
        if key not in have:  # older code without this setting ran as its default does
            if want[key] != (default := _default(key)):
                return (f"its config has no {key} (older code); the grid asks for "
                        f"{want[key]!r}, not the default {default!r}")  # fmt: skip
        elif have[key] != want.get(key):
            return f"its {key} is {have[key]!r}, the grid asks for {want.get(key)!r}"
    if not allow_older:
        prov = stored.get("provenance") if isinstance(stored.get("provenance"), dict) else {}
        fp, now = prov.get("code_fingerprint"), compute_fingerprint()
        if fp != now:
            commit = (prov.get("code_commit") or "unknown")[:8]
            return f"{OTHER_CODE} (commit {commit}, fingerprint {fp or 'not recorded'}; now {now})"
    return None


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

    Only :func:`~hcct_lite.runs.results.write_json`'s own (``.tmp-*.json``), and
    only those older than a minute: a live write takes milliseconds.
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

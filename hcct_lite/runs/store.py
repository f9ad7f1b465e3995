"""The result store trusts nothing.

A file is reused only if it is a complete, well-formed result of the same settings and of
the same compute version (:func:`~hcct_lite.training.provenance.compute_version`: the
version of each part of the code its numbers come from, not the code's text), and, if it
is a shipped file, only as it was shipped (:func:`shipped_problem`). Output paths are
checked before any training.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
import tempfile
import time
from pathlib import Path

from .. import parts
from ..training.provenance import compute_version, source_fingerprint
from .files import other_writer, output_problem
from .schema import result_problem

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
    "settings_dir",
    "code_fingerprint",
    "digest",
    "SHIPPED_DIGESTS",
    "shipped_folder",
    "shipped_key",
    "shipped_problem",
    "write_shipped_digests",
]

# write_json's temporary files; one older than a minute belongs to a killed write
TEMP_PREFIX = ".tmp-"
_STALE_TEMP_SECONDS = 60.0
# how reuse_decision starts the reason of a result of another compute version
OTHER_CODE = "of another compute version"
# settings that do not change what a run computes (where it ran, where data came from, and
# whether a GPU replayed its steps as CUDA graphs: the same kernels)
NOT_COMPARED = ("device", "data_root", "download", "cuda_graphs")
# the digest of every shipped result file, by its path in the shipped folder
SHIPPED_DIGESTS = Path(__file__).with_name("shipped.json")
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
        return f"{OTHER_CODE} (commit {commit}): its provenance records none"
    for part, version in want.items():
        got = have.get(part)
        if type(got) is not int or got != version:
            return f"{OTHER_CODE} (commit {commit}): its {part} is version {got!r}, now {version}"
    return None


def _installed_since(key: str, want: dict, stored: dict) -> str | None:
    """The extension ``key`` belongs to, if it was installed after ``stored`` ran.

    An extension's setting, asked at its default, that a result made without the extension
    does not state: the run could not have used it, so it ran as at the default. A part's
    setting must keep every run as it was at its default (docs/extending.md).
    """
    default, part = parts.part_settings().get(key, (None, None))
    prov = stored.get("provenance") if isinstance(stored.get("provenance"), dict) else {}
    had = prov.get("extensions") if isinstance(prov.get("extensions"), dict) else {}
    if part in parts.extensions() and part not in had and want.get(key) == default:
        return part
    return None


def _same_as_without_rule(stored: dict, want: dict) -> bool:
    """Whether ``stored`` ran under the norm rule, refused no reply, and ``want`` has none.

    The rule only removes replies: a run in which it refused none computed exactly what
    the run without it computes (tests/runs/test_store.py reruns one both ways). Any refused
    reply, or a record of refusals that is not a list, and the run is another.
    """
    limit = stored["config"].get("norm_limit")
    rejected = stored.get("rejected")
    return (
        want.get("norm_limit") == 0
        and isinstance(limit, (int, float))
        and limit > 0
        and isinstance(rejected, list)
        and not rejected
    )


def reuse_decision(path: str, cfg) -> tuple:
    """``(reusable, reason)``: whether the file at ``path`` can stand for a run of ``cfg``.

    Not reusable: ``"missing"``; a file another user owns or may edit in place; a shipped
    file edited since (:func:`shipped_problem`); an unreadable or incomplete file
    (:func:`result_problem`, named); a setting that changes the computation (all but
    :data:`NOT_COMPARED`) whose stored value differs from ``cfg``'s, or that the file does
    not state (never filled in from today's defaults: older code did not run as today's
    defaults say); or a compute version
    (:func:`~hcct_lite.training.provenance.compute_version`) other than ``cfg``'s,
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
            st = os.fstat(f.fileno())  # of the file read, not of a name swapped since
            stored = json.load(f)
    except (OSError, ValueError, RecursionError) as err:
        return False, f"unreadable ({_unreadable(err)})"
    if st.st_uid not in (os.getuid(), 0):
        return False, f"another user (uid {st.st_uid}) owns it: it may say anything"
    if who := other_writer(st):
        mode = stat.S_IMODE(st.st_mode)
        return False, f"other users can edit it (mode {mode:04o}: {who}): it may say anything"
    if problem := shipped_problem(path, stored):
        return False, problem
    if problem := result_problem(stored):
        return False, f"not a complete result ({problem})"
    want, have = cfg.to_dict(), dict(stored["config"])
    note = ""
    if _same_as_without_rule(stored, want):
        note = f"; its norm rule ({have['norm_limit']:g}) refused no reply: the run without it"
        have["norm_limit"] = want["norm_limit"]
    for key in sorted((set(want) | set(have)) - set(NOT_COMPARED)):
        if key not in have and (part := _installed_since(key, want, stored)):
            note += f"; {key} at its default ({part} was not installed when it ran)"
            continue
        if key not in have:
            return False, f"its config does not state {key} (written before the setting existed)"
        if have[key] != want.get(key):
            return False, f"its {key} is {have[key]!r}, the run asks for {want.get(key)!r}"
    version = compute_version(cfg)
    if problem := _version_problem(stored, version):
        return False, problem
    return True, f"same settings and compute version ({_parts(version)}){note}"


def digest(obj) -> str:
    """SHA-256 of ``obj`` as canonical JSON: sorted keys, floats written exactly (``repr``).

    The layout of a file (indents, line ends) does not change it; any value does.
    """
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def shipped_folder() -> str:
    """The folder of shipped results: ``$HCCT_RESULTS``, else the repository's ``results/``.

    As :func:`~hcct_lite.lessons.modes.results_dir` says; a file anywhere else is a user's own.
    """
    return os.environ.get("HCCT_RESULTS") or str(Path(__file__).resolve().parents[2] / "results")


@functools.cache
def _listed() -> dict:
    with open(SHIPPED_DIGESTS) as f:
        return json.load(f)


def shipped_key(path: str) -> str | None:
    """``path``'s name in :data:`SHIPPED_DIGESTS` (``"<grid>/<run>.json"``), or None.

    None for a file outside :func:`shipped_folder`, or one the list does not name: a user's
    own run.
    """
    key = os.path.relpath(os.path.realpath(path), os.path.realpath(shipped_folder()))
    key = key.replace(os.sep, "/")
    return key if key in _listed() else None


def shipped_problem(path: str, stored) -> str | None:
    """Why ``stored``, read from ``path``, is not the shipped file it stands at; or None.

    None also for a user's own run (no :func:`shipped_key`), which nothing vouches for.
    """
    key = shipped_key(path)
    if key is None or digest(stored) == _listed()[key]:
        return None
    return (
        f"edited since it was shipped (its digest is not the one {SHIPPED_DIGESTS.name} "
        "lists): restore it, or run it into another folder"
    )


def write_shipped_digests(folder: str | None = None) -> dict:
    """List in :data:`SHIPPED_DIGESTS` the digest of each result of ``folder``; return them.

    ``folder`` defaults to :func:`shipped_folder`. Run it after regenerating ``results/``.
    """
    import glob

    folder = folder or shipped_folder()
    listed = {
        os.path.relpath(p, folder).replace(os.sep, "/"): digest(load_result(p))
        for p in sorted(glob.glob(os.path.join(folder, "*", "*.json")))
    }
    SHIPPED_DIGESTS.write_text(json.dumps(listed, indent=0, sort_keys=True) + "\n")
    _listed.cache_clear()
    return listed


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
            raise ValueError(
                f"{what}: the name {part[:20]}... has {len(part)} characters; "
                "file systems allow 255"
            )
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
    older than a minute, far longer than a live write lasts.
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

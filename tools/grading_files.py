"""The files grading watches: the hashes of a folder or of the checkout's tracked files,
and making a copy read-only and removable again."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["changed", "few", "fingerprint", "lock", "manifest", "remove", "tracked", "unlock"]


def manifest(folder: Path) -> dict:
    """``relative path -> sha256`` of every file under ``folder`` (a link: its target)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_symlink():
            out[rel] = "link:" + os.readlink(path)
        elif path.is_file():
            try:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError:
                out[rel] = "unreadable"
        elif not path.is_dir():
            out[rel] = "special"
    return out


def changed(before: dict, after: dict) -> list:
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def tracked(root: Path) -> list:
    """The checkout's tracked files (``git ls-files``), or every file of the package."""
    done = subprocess.run(
        ["git", "ls-files", "-z"], cwd=root, capture_output=True, timeout=60, check=False
    )
    names = [n for n in done.stdout.decode().split("\0") if n] if done.returncode == 0 else []
    if not names:
        names = [p.relative_to(root).as_posix() for p in (root / "hcct_lite").rglob("*.py")]
    return [root / n for n in names]


def untracked(root: Path) -> list:
    """The checkout's untracked files that git does not ignore (none outside git)."""
    done = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard", "-z"],
        cwd=root,
        capture_output=True,
        timeout=60,
        check=False,
    )
    names = [n for n in done.stdout.decode().split("\0") if n] if done.returncode == 0 else []
    return [root / n for n in names]


def fingerprint(paths: list) -> dict:
    out = {}
    for path in paths:
        try:
            out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            out[str(path)] = "missing"
    return out


def lock(folder: Path) -> None:
    """Make ``folder`` read-only: files 444, folders 555."""
    for path in sorted(folder.rglob("*"), reverse=True):
        if not path.is_symlink():
            path.chmod(0o555 if path.is_dir() else 0o444)
    folder.chmod(0o555)


def unlock(folder: Path) -> None:
    """Give every folder and file under ``folder`` back to its owner (u+rwx), not following
    links, so that it can be read and removed."""
    if not folder.exists() or folder.is_symlink():
        return
    folder.chmod(0o700)
    for top, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(top, name)
            if not path.is_symlink():
                try:
                    path.chmod(0o700 if path.is_dir() else 0o600)
                except OSError:
                    pass


def remove(folder: Path) -> None:
    unlock(folder)
    shutil.rmtree(folder, ignore_errors=True)


def few(paths: list) -> str:
    names = [Path(p).name if os.path.isabs(p) else p for p in paths[:3]]
    return ", ".join(names) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")

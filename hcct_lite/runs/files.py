"""Local files other users cannot steer.

hcct-lite writes task tokens, results and tables, sometimes where other users share the
disk. Whatever ``fs.protected_symlinks`` says, a folder is used only if no one else can
write or swap it (:func:`folder_problem`), and a file is written under a fresh name, then
renamed over its target (:func:`write_at`). The mode of a folder it did not make never changes.
"""

from __future__ import annotations

import grp
import os
import pwd
import secrets
import stat
from pathlib import Path

TEMP_PREFIX = ".tmp-"

__all__ = [
    "folder_problem",
    "private_folder",
    "write_at",
    "write_text",
    "others_can_write",
    "other_writer",
    "output_problem",
]


def _owner(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def other_writer(st: os.stat_result) -> str | None:
    """Who besides me may write where ``st`` describes, or None.

    Parameters
    ----------
    st : os.stat_result
        The entry's status (``os.stat`` or ``os.lstat``).

    Returns
    -------
    str or None
        ``"everyone"`` if it is world-writable. If it is group-writable: another user in
        the group, or ``"anyone in group ..."``. None if no one else may write it.

    Notes
    -----
    A group has another writer if another user is listed in it (``gr_mem``) or has it as
    primary group (``pw_gid``). The list never names users whose primary group it is. A
    group that is not my primary group counts as others, and so does an unknown gid. My
    own private group, the default of many systems, has no other writer.
    """
    if st.st_mode & stat.S_IWOTH:
        return "everyone"
    if not st.st_mode & stat.S_IWGRP:
        return None
    try:
        group = grp.getgrgid(st.st_gid)
    except KeyError:
        return f"anyone in group {st.st_gid} (an unknown group)"
    me = _owner(os.getuid())
    others = [m for m in group.gr_mem if m != me] or [
        u.pw_name for u in pwd.getpwall() if u.pw_gid == st.st_gid and u.pw_name != me
    ]
    if others:
        return f"{others[0]}, of group {group.gr_name}"
    if st.st_gid != os.getgid():
        return f"anyone in group {group.gr_name}"
    return None


def others_can_write(st: os.stat_result) -> bool:
    """Whether a user other than me may write where ``st`` describes.

    See :func:`other_writer`, which also says who.
    """
    return other_writer(st) is not None


def _ancestor_problem(path: Path) -> str | None:
    """Why a folder above ``path`` would let another user swap what ``path`` names, or None.

    Each folder from ``path``'s own up to ``/`` must be owned by this user or root, and
    writable by another only with the sticky bit (which keeps others' hands off names they
    do not own).
    """
    parent = path.parent
    if not os.path.isdir(parent):
        return f"its folder {parent} does not exist (or is not a folder)"
    # a link on the way, as written, counts only if this user or root made it: another
    # user's link in a shared folder would choose where the file goes
    for step in (parent, *parent.parents):
        st = os.lstat(step)
        if stat.S_ISLNK(st.st_mode) and st.st_uid not in (os.getuid(), 0):
            return f"{step}, on its way, is a link {_owner(st.st_uid)} made"
    here = Path(os.path.realpath(parent))
    for folder in (here, *here.parents):
        try:
            st = os.stat(folder)
        except OSError as err:
            return f"{folder}, a folder above it, cannot be read ({err.strerror})"
        if st.st_uid not in (os.getuid(), 0):
            return f"{folder}, a folder above it, belongs to {_owner(st.st_uid)}"
        who = other_writer(st)
        if who and not st.st_mode & stat.S_ISVTX:
            return (
                f"other users can write to {folder}, a folder above it with no sticky bit ({who})"
            )
    return None


def folder_problem(path, private: bool = False) -> str | None:
    """Why ``path`` is no folder to write in, or None.

    Not a real folder (a link, a file, a device, ``/proc`` or ``/sys``), owned by another
    user, writable by another, or under a folder that lets another swap it. ``private``:
    also readable or searchable by no one else (a folder of credentials).
    """
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "does not exist"
    except OSError as err:
        return f"cannot be read ({err.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return f"is a symbolic link (to {os.readlink(path)}), not a folder"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a folder"
    if st.st_uid != os.getuid() and not (st.st_uid == 0 and not os.access(path, os.W_OK)):
        return f"belongs to {_owner(st.st_uid)}"
    if who := other_writer(st):
        return f"other users can write to it (mode {stat.S_IMODE(st.st_mode):04o}: {who})"
    if private and st.st_mode & 0o077:
        return (
            f"other users can read it (mode {stat.S_IMODE(st.st_mode):04o}); make it "
            f"private (chmod 700) or name another"
        )
    return _ancestor_problem(path)


def private_folder(path) -> int:
    """An open descriptor of the private folder ``path``, made (mode 0700) if missing.

    Raises ``ValueError`` naming the folder if it is not one only this user can use
    (:func:`folder_problem`). The descriptor is what later writes go through
    (:func:`write_at`), so a folder swapped after this check is never written to.
    """
    path = Path(path)
    parent_problem = None
    if not os.path.lexists(path):
        parent_problem = _ancestor_problem(path)
        if parent_problem is None:
            try:
                os.mkdir(path, 0o700)  # never follows a link: an existing name fails
            except FileExistsError:
                pass  # made meanwhile: judged below, as any existing folder
            except OSError as err:
                raise ValueError(f"{path}: cannot be made ({err.strerror})") from None
    problem = parent_problem or folder_problem(path, private=True)
    if problem:
        raise ValueError(f"{path}: {problem}")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as err:
        raise ValueError(f"{path}: cannot be opened ({err.strerror})") from None
    st = os.fstat(fd)
    if st.st_uid != os.getuid() or st.st_mode & 0o077:  # swapped between check and open
        os.close(fd)
        raise ValueError(f"{path}: changed while it was being opened")
    return fd


def write_at(folder_fd: int, name: str, data: bytes, mode: int = 0o600) -> None:
    """Replace ``name`` in the open folder ``folder_fd`` by ``data``, in one step.

    Written under a fresh name (``O_EXCL | O_NOFOLLOW``), then renamed over ``name``: a
    reader never sees half a file, and nothing planted receives the data.
    """
    tmp = f"{TEMP_PREFIX}{secrets.token_hex(6)}-{name}"  # .tmp-*.json: a killed write's
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    fd = os.open(tmp, flags, mode, dir_fd=folder_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=folder_fd)
        except FileNotFoundError:
            pass
        raise


def write_text(path, text: str, mode: int = 0o644) -> None:
    """Replace the file ``path`` by ``text`` without following a link or a planted file.

    Refuses (``ValueError``, naming it) a folder another user owns or can write, unless it
    has the sticky bit (the temporary folder): there a fresh name cannot be taken over and
    the rename fails on another user's file instead of replacing it.
    """
    path = Path(os.path.abspath(path))
    if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
        if not os.path.islink(path):
            raise ValueError(f"{path}: is not a regular file; results are never written over one")
    problem = _ancestor_problem(path)
    if problem:
        raise ValueError(f"{path}: {problem}")
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        write_at(fd, path.name, text.encode(), mode)
    except PermissionError as err:
        raise ValueError(
            f"{path}: cannot be replaced ({err.strerror}: another user's file in a shared folder?)"
        ) from None
    finally:
        os.close(fd)


def output_problem(path, folder: bool = False) -> str | None:
    """Why results cannot be written safely at ``path`` (a file, or a ``folder``), or None.

    A grid's folder is read back (finished runs are reused), so no other user may write in
    it, even with a sticky bit; a single file may sit in a sticky shared folder such as the
    temporary folder (:func:`write_text` neither follows nor replaces another user's file).
    """
    path = Path(os.path.abspath(path))
    if folder and os.path.lexists(path):
        return folder_problem(path)
    return _ancestor_problem(path) if os.path.isdir(path.parent) else None

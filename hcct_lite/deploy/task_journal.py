"""What ``silo-exec`` keeps of each ClientApp task, so that it can answer for one that died.

A SuperNode takes its next message only once the last task has replied. A task that dies
without replying leaves it waiting until the token expires, so the silo misses a round
too. Each task records its token and message here, and the executor answers for a dead one
as Flower answers a task that raised (:meth:`TaskJournal.settle`).
"""

from __future__ import annotations

import base64
import fcntl
import json
import logging
import os
import re
import stat
from pathlib import Path

from ..runs.files import private_folder, write_at
from . import flower_internals as flower

__all__ = ["TaskJournal", "default_folder", "alive"]

REASON = "the ClientApp task died before replying (answered by the silo's executor)"
_NO_RECORD = "it died before recording its token (Flower's token expiry frees it)"
_MAX_RECORD = 64 << 20  # a record holds a token and a message without its content

log = logging.getLogger("hcct_lite")


def default_folder(runtime_api_address: str) -> Path:
    """The journal's folder for the SuperNode at ``runtime_api_address`` (one per node).

    In this user's own cache folder (``~/.cache/hcct_lite``), never a shared one: another
    user cannot plant a link there or take the name first.
    """
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", runtime_api_address)
    return Path.home() / ".cache" / "hcct_lite" / f"silo-exec-{name}"


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (and is ours to signal)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process now holds that number
        return False
    return True


class TaskJournal:
    """The task records of one silo's executor, in a folder only its user can use.

    Parameters
    ----------
    folder : path of the folder (made with mode 0700 if missing; a task token is a
        credential of the SuperNode's Runtime API). An existing folder must be a real,
        private folder of this user, under folders no other user can swap: anything else
        is refused with a ``ValueError`` naming it (:func:`hcct_lite.runs.files.private_folder`),
        and its mode is never changed.

    Every file is opened through the folder's descriptor, without following links. One
    executor per SuperNode: the folder holds a lock for as long as its executor lives.
    """

    def __init__(self, folder):
        self.folder = Path(folder)
        home = Path.home()
        if self.folder.is_relative_to(home):
            # the default's ~/.cache/hcct_lite, or any missing folder on the way under the
            # user's own home: made private, as the folder itself
            missing = [p for p in self.folder.parents if p.is_relative_to(home) and p != home]
            for parent in reversed(missing):
                if not os.path.lexists(parent):
                    os.close(private_folder(parent))
        self.fd = private_folder(self.folder)
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
        try:
            self._lock = os.open("lock", flags, 0o600, dir_fd=self.fd)
        except OSError as err:
            raise ValueError(f"{self.folder / 'lock'}: cannot be opened ({err.strerror})") from None
        if not stat.S_ISREG(os.fstat(self._lock).st_mode):
            os.close(self._lock)
            raise ValueError(f"{self.folder / 'lock'}: is not a regular file")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._lock, 32, 0).decode(errors="replace").strip() or "?"
            os.close(self._lock)
            raise RuntimeError(
                f"another silo-exec (pid {holder}) already serves this SuperNode "
                f"({self.folder} is locked)"
            ) from None
        os.ftruncate(self._lock, 0)
        os.pwrite(self._lock, str(os.getpid()).encode(), 0)

    def _write(self, name: str, record: dict) -> None:
        """Replace record ``name`` in one step (a reader never sees half a record)."""
        write_at(self.fd, name, json.dumps(record).encode())

    def record(self, pid: int) -> Path:
        """Path of the record of the task in process ``pid``."""
        return self.folder / f"task-{pid}.json"

    def pids(self) -> list:
        """Process ids of the tasks with a record, alive or not.

        A file that is no task's record (a name without a process id, a link, not a
        file, not a JSON object of strings) is set aside, renamed ``*.set-aside``, with
        one line naming it.
        """
        out = []
        for name in sorted(os.listdir(self.fd)):
            if not (name.startswith("task-") and name.endswith(".json")):
                continue
            pid = name.removeprefix("task-").removesuffix(".json")
            st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
            number = pid.isascii() and pid.isdigit() and 0 < int(pid) < 2**31
            if not (number and stat.S_ISREG(st.st_mode)):
                self._set_aside(name, "it is no task's record")
            elif self.read(int(pid)) is not None:  # a bad record is set aside by read
                out.append(int(pid))
        return out

    def _set_aside(self, name: str, why: str) -> None:
        try:
            os.replace(name, name + ".set-aside", src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except OSError:
            return
        log.warning("silo-exec: %s set aside (%s): %s.set-aside", self.folder / name, why, name)

    def read(self, pid: int) -> dict | None:
        """The record of task ``pid`` (None if there is none); a bad one is set aside."""
        name = f"task-{pid}.json"
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError as err:
            self._set_aside(name, f"unreadable: {err.strerror}")
            return None
        try:
            with os.fdopen(fd, "rb") as f:
                record = json.loads(f.read(_MAX_RECORD))
        except (OSError, ValueError, RecursionError):
            record = None
        fields = ("token", "message", "message_id")
        ok = isinstance(record, dict) and all(isinstance(record.get(k, ""), str) for k in fields)
        if not ok:
            self._set_aside(name, "not a task record")
            return None
        return record

    def in_child(self, token: str) -> None:
        """In a task's process, before Flower's ClientApp code runs: record its token.

        Flower's pull of the message and push of the reply then update the record.
        """
        os.close(self._lock)  # the lock is the executor's: a task must not hold it
        name, record = f"task-{os.getpid()}.json", {"token": token}
        self._write(name, record)

        def pulled(message):
            record["message"] = base64.b64encode(flower.message_to_bytes(message)).decode()
            record["message_id"] = message.metadata.message_id
            self._write(name, record)

        def pushed():
            record["replied"] = True
            self._write(name, record)

        flower.record_task_io(pulled, pushed)

    def settle(self, pid: int, connect) -> str | None:
        """Answer for the ended task ``pid`` if it did not reply; forget its record.

        The answer is an error reply to the task's message, then its status, failed; the
        SuperNode then takes its next message at once. ``connect(token)`` returns a Flower
        ``RuntimeHttpClient`` authenticated as the task. Returns None if the task had
        replied, else what was done, in words.
        """
        record = self.read(pid)
        try:
            if record is None:  # none, or set aside: nothing to answer with
                return _NO_RECORD
            if record.get("replied"):
                return None
            if "token" not in record:
                return "it died before recording its token (Flower's token expiry frees it)"
            return _answer(record, connect)
        finally:
            try:
                os.unlink(f"task-{pid}.json", dir_fd=self.fd)
            except FileNotFoundError:
                pass
            self._clean_temporary(pid)

    def _clean_temporary(self, pid: int) -> None:
        """Remove the temporary records a task killed while writing left."""
        for name in os.listdir(self.fd):
            if name.startswith(".tmp-") and name.endswith(f"-task-{pid}.json"):
                try:
                    os.unlink(name, dir_fd=self.fd)
                except FileNotFoundError:
                    pass

    def close(self) -> None:
        """Release the folder's lock (a new executor may take it) and its descriptor."""
        os.close(self._lock)
        os.close(self.fd)


def _answer(record: dict, connect) -> str:
    """Push an error reply to the task's message, then its status: failed.

    A task that had not recorded its message takes it now, with its own token: while its
    message waits, the SuperNode takes no other, so the first one not yet handed out is
    the task's. If the message was handed out but not recorded, Flower's token expiry
    answers it (its error reply is for messages handed out).
    """
    client = connect(record["token"])
    try:
        if "message" in record:
            data = base64.b64decode(record["message"])
            message = flower.message_from_bytes(data, record["message_id"])
        else:
            message = flower.take_task_message(client)
        if message is None:
            return "it had taken its message but not recorded it (Flower's expiry answers)"
        flower.answer_task_with_error(client, message, REASON)
    except Exception as err:  # noqa: BLE001 - the SuperNode already settled it (expired token)
        return f"not answered: {type(err).__name__}: {err}"
    finally:
        client.close()
    return f"answered message {message.metadata.message_id[:12]} with an error reply"

"""Running a submission's kernel apart from the teacher's files, and ending every process it
started.

On Linux, :func:`wrap` runs the kernel under ``unshare``, in new user, mount and PID
namespaces. The kernel sees a root of its own: the system's programs and libraries,
Python's install and the virtual environment, all read-only; its own temporary folder; its
copy of the package, read-only. The checkout, its tools and solutions, the grader's pristine
copy and the other submissions are not there. The kernel runs with no capabilities, so it
cannot mount anything back. It is process 1 of its PID namespace: when it dies, every
process it started dies with it. :func:`unavailable` tries all this once and says why it
fails, where it does.

:class:`Reaper` ends what is left. On Linux it makes the grader the subreaper of its
descendants, so that a detached process stays one of them, and kills each one that started
while a submission ran. Elsewhere it can only kill the kernel's process group.
"""

from __future__ import annotations

import ctypes
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["Reaper", "unavailable", "wrap"]

LINUX = sys.platform.startswith("linux") and Path("/proc/self/stat").exists()
# what every program needs; a link (as /bin on Debian) is made again as a link
SYSTEM = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
DEVICES = """
mkdir "$R/dev"
mount -t tmpfs -o mode=0755 hcct-dev "$R/dev"
for d in null zero full random urandom; do
    touch "$R/dev/$d"
    mount --bind "/dev/$d" "$R/dev/$d"
done
ln -s /proc/self/fd "$R/dev/fd"
mkdir "$R/dev/shm"
mount -t tmpfs -o mode=1777 hcct-shm "$R/dev/shm"
mkdir "$R/proc"
mount -t proc proc "$R/proc"
mkdir "$R/sys"
mount --rbind -o ro /sys "$R/sys"
mkdir "$R/tmp"
mount -t tmpfs -o mode=1777 hcct-tmp "$R/tmp"
"""
# the new root replaces the old one, which is then gone; no capability is kept
ENTER = """
cd "$R"
mkdir .old
pivot_root . .old
umount -l /.old
rmdir /.old
mount -o remount,ro,bind /
"""
UNSHARE = ["--user", "--map-root-user", "--mount", "--pid", "--fork", "--kill-child"]


def _python_dirs() -> list:
    """Python's install and the virtual environment, outside the system's folders."""
    found = {sys.base_prefix, sys.prefix, sys.exec_prefix, sys.base_exec_prefix}
    found.add(os.path.dirname(os.path.realpath(sys.executable)))
    paths = sorted({Path(p).resolve() for p in found}, key=lambda p: len(p.parts))
    keep = []
    for path in paths:
        if not any(path.is_relative_to(k) for k in [*keep, *map(Path, SYSTEM)]):
            keep.append(path)
    return keep


def _script(new_root: Path, tmp: Path, kit: Path) -> str:
    """The shell script that builds the kernel's root in ``new_root`` and enters it."""
    q = shlex.quote
    lines = ["set -eu", f"R={q(str(new_root))}", 'mount -t tmpfs -o mode=0755 hcct-root "$R"']
    for top in map(Path, SYSTEM):
        if top.is_symlink():
            lines.append(f'ln -s {q(os.readlink(top))} "$R"{q(str(top))}')
        elif top.is_dir():
            lines.append(f'mkdir -p "$R"{q(str(top))}')
            lines.append(f'mount --bind -o ro {q(str(top))} "$R"{q(str(top))}')
    lines.append(DEVICES)  # first: a virtual environment under /tmp goes on its tmpfs
    for path in _python_dirs():
        lines.append(f'mkdir -p "$R"{q(str(path))}')
        lines.append(f'mount --bind -o ro {q(str(path))} "$R"{q(str(path))}')
    lines.append(f'mkdir -p "$R"{q(str(tmp))}')
    lines.append(f'mount --bind {q(str(tmp))} "$R"{q(str(tmp))}')
    lines.append(f'mount --bind -o ro {q(str(kit))} "$R"{q(str(kit))}')
    lines.append(ENTER)
    lines.append(f"cd {q(str(tmp / 'work'))}")
    lines.append('exec setpriv --bounding-set=-all --inh-caps=-all --no-new-privs -- "$@"')
    return "\n".join(lines) + "\n"


def wrap(argv: list, new_root: Path, tmp: Path, kit: Path) -> list:
    """``argv`` run in a root of its own (see the module's docstring)."""
    script = _script(new_root, tmp, kit)
    return ["unshare", *UNSHARE, "--", "/bin/sh", "-c", script, "hcct-sandbox", *argv]


# the probe: exit 0 when no hidden path is seen and the kit cannot be written
PROBE = """
import os, sys
kit, hidden = sys.argv[1], sys.argv[2:]
seen = [p for p in hidden if os.path.lexists(p)]
try:
    open(os.path.join(kit, "x"), "w").close()
    seen.append("the kit is writable")
except OSError:
    pass
print("; ".join(seen))
sys.exit(1 if seen else 0)
"""


def unavailable(base: Path, hidden: list) -> str | None:
    """None when a kernel can run isolated here, else why not (one short phrase).

    It runs Python in the isolation :func:`wrap` builds, and checks that none of
    ``hidden`` can be seen there and that the kit cannot be written.
    """
    if not LINUX:
        return f"{sys.platform} has no Linux namespaces"
    for tool in ("unshare", "setpriv", "pivot_root", "mount"):
        if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists():
            return f"{tool} is not installed (util-linux)"
    tmp = base / "probe"
    for name in ("kit", "work"):
        (tmp / name).mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-I", "-c", PROBE, str(tmp / "kit"), *map(str, hidden)]
    try:
        done = subprocess.run(
            wrap(argv, base / "root", tmp, tmp / "kit"),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"unshare failed: {type(err).__name__}"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if done.returncode != 0:
        said = (done.stdout + done.stderr).strip().splitlines()
        return f"unshare failed: {said[-1] if said else 'exit ' + str(done.returncode)}"
    return None


def _processes() -> dict:
    """``pid -> (parent pid, state)`` of every process (Linux's ``/proc``)."""
    out = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        out[int(entry.name)] = (int(fields[1]), fields[0])
    return out


class Reaper:
    """Ends every process a submission started (see the module's docstring)."""

    def __init__(self):
        self.libc = ctypes.CDLL(None, use_errno=True) if LINUX else None
        if self.libc is not None:
            self.libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER

    def close(self) -> None:
        if self.libc is not None:
            self.libc.prctl(36, 0, 0, 0, 0)

    def descendants(self) -> dict:
        """``pid -> state`` of every process below this one."""
        table = _processes() if LINUX else {}
        children = {}
        for pid, (parent, _) in table.items():
            children.setdefault(parent, []).append(pid)
        found, todo = {}, [os.getpid()]
        while todo:
            for child in children.get(todo.pop(), []):
                if child not in found:
                    found[child] = table[child][1]
                    todo.append(child)
        return found

    def end(self, before: set, kernel: int | None, wait: float = 10.0) -> list | None:
        """Kill each process below this one that is not in ``before``; return those still
        alive, or None where they cannot be seen (not Linux: only the kernel's group dies)."""
        if not LINUX:
            if kernel:
                try:
                    os.killpg(kernel, signal.SIGKILL)
                except OSError:
                    pass
            return None
        deadline = time.monotonic() + wait
        while True:
            new = {p: s for p, s in self.descendants().items() if p not in before}
            for pid, state in new.items():
                try:
                    if state == "Z":
                        os.waitpid(pid, os.WNOHANG)
                    else:
                        os.kill(pid, signal.SIGKILL)
                except (ChildProcessError, ProcessLookupError, PermissionError):
                    pass
            alive = [p for p, s in new.items() if s != "Z"]
            if not alive or time.monotonic() > deadline:
                return alive
            time.sleep(0.05)

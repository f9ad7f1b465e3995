"""``hcct-lite silo-exec``: a warm SuperExec for one silo's SuperNode.

Flower's default isolation starts a fresh ``flwr-clientapp`` per message, paying the import
of torch, Flower and hcct-lite each time. Under ``--isolation process``, ``silo-exec`` runs
Flower's SuperExec loop with those imports done and forks a child per ClientApp task. A
task that dies without replying is answered for (:mod:`.task_journal`). POSIX only.
"""

from __future__ import annotations

import importlib
import ipaddress
import logging
import math
import os
import re
import signal
import sys
import time
from pathlib import Path

from . import flower_internals as flower
from .processes import die_with_parent
from .task_journal import TaskJournal, alive, default_folder

__all__ = [
    "run_silo_exec",
    "ForkExecutor",
    "runtime_connector",
    "check_runtime_api_address",
    "check_root_certificates",
    "READY",
    "CLIENT_MODULES",
]

log = logging.getLogger("hcct_lite")

# Seconds between two asks to the SuperNode for a task (FLWR_SUPEREXEC_TASK_POLL_INTERVAL wins)
TASK_POLL_SECONDS = 0.1
# A ClientApp task (one message: local training, an evaluation) still running after this
# is hung: ended, so that the silo serves the next one
MAX_TASK_SECONDS = 1800.0
READY = "silo-exec: warm (torch, Flower and hcct-lite imported), serving ClientApp tasks"
# What every ClientApp task of hcct-lite imports: done once, before any fork
CLIENT_MODULES = ("torch", "hcct_lite.deploy.flower.client")


# A host name or an IPv4 address, as the Runtime API's URL takes it
_HOST = re.compile(r"[A-Za-z0-9._-]+")


def check_runtime_api_address(address) -> tuple:
    """The ``(host, port)`` of a SuperNode's Runtime API address ``HOST:PORT``.

    Parameters
    ----------
    address : str
        ``host:port``: a host name or IPv4 address, or an IPv6 address in brackets
        (``[::1]:9094``); the port an integer in 1..65535.

    Returns
    -------
    tuple of (str, int)

    Raises
    ------
    ValueError
        Naming ``--runtime-api-address``, for anything else. Flower would fail on it
        with a traceback, or ask again for ever.
    """
    host, colon, port = str(address).rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
            ok = True
        except ValueError:
            ok = False
    else:
        ok = _HOST.fullmatch(host) is not None
    # isdigit alone takes other scripts' digits, which no URL takes
    ok = ok and bool(colon) and port.isascii() and port.isdigit() and 1 <= int(port) <= 65535
    if not ok:
        raise ValueError(
            f"--runtime-api-address must be HOST:PORT with a port 1-65535 (an IPv6 host in "
            f"brackets: [::1]:9094); got {address!r}"
        )
    return host, int(port)


def check_root_certificates(path, insecure: bool) -> None:
    """Raise ``ValueError`` naming ``--root-certificates`` where Flower would exit on it.

    Parameters
    ----------
    path : str or None
        The PEM file of the CA (None: the system's roots, or no TLS).
    insecure : bool
        Whether ``--insecure`` (no TLS) was given too.
    """
    if path is None:
        return
    if insecure:
        raise ValueError(
            "--root-certificates is for a Runtime API with TLS, and --insecure means none: "
            "give one of the two"
        )
    where = Path(path).expanduser()
    if not str(path) or where.is_dir():  # Path("") is the current folder
        raise ValueError(f"--root-certificates must be a PEM file; {path!r} is a folder")
    if not where.exists():
        raise ValueError(f"--root-certificates must be a PEM file; {path!r} does not exist")
    if not where.is_file():
        raise ValueError(f"--root-certificates must be a PEM file; {path!r} is not a file")
    try:
        with open(where, "rb"):
            pass
    except OSError as err:
        raise ValueError(f"--root-certificates: cannot read {path!r} ({err.strerror})") from None


def _run_child(spec, certificates) -> None:
    """In the forked child: run one ClientApp task with Flower's own code, then exit."""
    code = 1
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        flower.run_clientapp_task(spec, certificates)
        code = 0
    except SystemExit as done:  # Flower's ClientApp process always ends with sys.exit
        code = done.code if isinstance(done.code, int) else 1
    except BaseException:  # noqa: BLE001 - reported, and the child must not return
        log.exception("silo-exec: the ClientApp task failed")
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # skips the parent's atexit handlers, inherited by the fork


def _reaped(pid: int, started: float, max_task_seconds: float) -> bool:
    """Whether task ``pid`` has ended and is reaped: by itself, or killed past the limit."""
    done, _ = os.waitpid(pid, os.WNOHANG)
    if done:
        return True
    if not 0 < max_task_seconds < time.monotonic() - started:
        return False
    log.warning("silo-exec: a ClientApp task ran past %g s; ended (pid %d)", max_task_seconds, pid)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return True


class ForkExecutor(flower.SubprocessExecutor):
    """Flower's SuperExec executor, but each ClientApp task runs in a fork of this process.

    The child runs Flower's own ``flwr-clientapp`` code with the task's token, then exits:
    nothing a message leaves in memory reaches the next, and Flower's Context carries the
    silo's state.

    Parameters
    ----------
    certificates : bytes or None
        PEM root certificates for the SuperNode's Runtime API (None: no TLS, or the
        system's roots)
    max_task_seconds : float
        A task still running after this many seconds is killed (SIGKILL) and reaped, so
        that a hung ClientApp cannot hold the silo (0: no limit)
    journal : TaskJournal or None
        Where each task records its token and message; with it, a task that ended
        without replying is answered for (None: left to Flower's token expiry)
    connect : callable token -> Flower ``RuntimeHttpClient`` authenticated as that task
        (needed with ``journal``; :func:`runtime_connector`)

    Attributes
    ----------
    children : dict pid -> start (``time.monotonic``) of the tasks running
    orphans : set of pids of tasks an executor killed before this one left in the journal
    """

    def __init__(
        self,
        certificates=None,
        max_task_seconds: float = MAX_TASK_SECONDS,
        journal=None,
        connect=None,
    ):
        super().__init__()
        self.certificates, self.children = certificates, {}
        self.max_task_seconds, self.journal, self.connect = max_task_seconds, journal, connect
        self.orphans = set(journal.pids()) if journal is not None else set()

    def launch(self, spec):
        """Start a ClientApp task in a fork (other tasks as Flower starts them)."""
        if not flower.is_clientapp_task(spec):
            return super().launch(spec)
        dies_with_us = die_with_parent()  # prepared here: the child only calls it
        try:
            pid = os.fork()
        except OSError as err:
            return flower.LaunchResult.failed(f"silo-exec could not fork: {err}")
        if pid == 0:
            # a task that outlived a killed executor would keep its token alive with
            # its heartbeats: the SuperNode would wait for it and serve nothing else
            if dies_with_us is not None:
                dies_with_us()
            if self.journal is not None:
                self.journal.in_child(spec.token)
            _run_child(spec, self.certificates)  # never returns
        self.children[pid] = time.monotonic()
        return flower.LaunchResult.accepted()

    def reconcile(self):
        """Reap ended tasks, kill those past the limit; answer for those that did not reply.

        Ours (children) and an orphan's (a killed executor's, recorded in the journal).
        """
        for pid, started in list(self.children.items()):
            if _reaped(pid, started, self.max_task_seconds):
                del self.children[pid]
                self._settle(pid)
        for pid in [p for p in self.orphans if not alive(p)]:
            self.orphans.discard(pid)
            self._settle(pid)

    def _settle(self, pid):
        if self.journal is None:
            return
        what = self.journal.settle(pid, self.connect)
        if what is not None:
            log.warning("silo-exec: task pid %d ended without replying: %s", pid, what)


def runtime_connector(runtime_api_address: str, insecure: bool, certificates):
    """``token -> RuntimeHttpClient``: the SuperNode's Runtime API, as the task of that token."""
    return lambda token: flower.runtime_client(runtime_api_address, insecure, certificates, token)


def run_silo_exec(
    runtime_api_address: str,
    insecure: bool = False,
    root_certificates=None,
    max_task_seconds: float = MAX_TASK_SECONDS,
    state_dir=None,
    warm=CLIENT_MODULES,
) -> None:
    """Serve one SuperNode's ClientApp tasks from a warm process until it is stopped.

    Parameters
    ----------
    runtime_api_address : the SuperNode's Runtime API, ``host:port`` (its ``--port``; an
        IPv6 host in brackets)
    insecure : connect without TLS (a SuperNode started without ``--ssl-certfile``)
    root_certificates : path of the PEM CA that signed the SuperNode's Runtime API
        certificate, when it has one
    max_task_seconds : a task running longer is killed (0: no limit)
    state_dir : the private folder of the silo's task journal (default: one per Runtime API
        address in ``~/.cache/hcct_lite``); a second ``silo-exec`` on it is refused
    warm : the modules a ClientApp task imports, imported once here (default
        :data:`CLIENT_MODULES`: torch and hcct-lite's ClientApp)

    Raises
    ------
    ValueError
        For a bad argument, naming its option (``--runtime-api-address``, ...).
    RuntimeError
        Where this system or Flower cannot run a warm SuperExec.
    """
    # bad input is refused in one line before anything starts: Flower itself would print
    # a traceback, exit with its own message, or ask again for ever
    check_runtime_api_address(runtime_api_address)
    check_root_certificates(root_certificates, insecure)
    if not (math.isfinite(max_task_seconds) and max_task_seconds >= 0):
        raise ValueError(f"--max-task-seconds must be a number >= 0; got {max_task_seconds}")
    if not hasattr(os, "fork"):
        raise RuntimeError("silo-exec needs os.fork (Linux or macOS); use Flower's default")
    if not flower.has_executor_hook():
        raise RuntimeError(
            "this Flower version's SuperExec has no executor hook; run the SuperNode with its "
            "default isolation instead of silo-exec"
        )
    certificates = flower.resolve_root_certificates(root_certificates, insecure)
    journal = TaskJournal(state_dir or default_folder(runtime_api_address))
    flower.warm_up()
    for module in warm:
        importlib.import_module(module)
    connect = runtime_connector(runtime_api_address, insecure, certificates)
    executor = ForkExecutor(certificates, max_task_seconds, journal, connect)
    executor.reconcile()  # answer at once for the tasks a killed executor left
    # one line an operator (or a script) can wait for: from here a task costs a fork
    print(f"{READY} for the SuperNode at {runtime_api_address}", file=sys.stderr, flush=True)
    # Flower's loop asks the SuperNode for a task every second by default; a local call
    os.environ.setdefault("FLWR_SUPEREXEC_TASK_POLL_INTERVAL", str(TASK_POLL_SECONDS))
    flower.serve_superexec(executor, runtime_api_address, insecure, root_certificates)

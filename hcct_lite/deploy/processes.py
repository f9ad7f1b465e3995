"""Processes a deployment starts (SuperLink, SuperNodes, executors) that end with their starter.

A federation's processes each run in a session of their own, so a starter killed by
SIGKILL would leave them running. :func:`die_with_parent` asks Linux to kill such a process
when its parent dies; a SuperNode's apps end with it (Flower passes them ``--parent-pid``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

__all__ = ["die_with_parent"]

_PR_SET_PDEATHSIG = 1


def die_with_parent():
    """A ``preexec_fn`` for :class:`subprocess.Popen`: the child dies with its starter.

    The child gets SIGKILL when the process that started it dies. Linux only
    (``prctl(PR_SET_PDEATHSIG)``); elsewhere None, and the child outlives its parent as
    before. The signal follows the thread that started the child, so start such children
    from a thread that lives as long as they should (the main thread).
    """
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True).prctl  # loaded here,
    parent = os.getpid()  # not in the child, where only the call itself runs

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the request took effect
            os._exit(1)

    return preexec

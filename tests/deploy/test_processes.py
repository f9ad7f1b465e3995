"""A process a test or benchmark starts for a federation dies when its starter is killed."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


# how the starter starts its bound child: the helper itself, or the deployment tests' own
# starter of SuperLinks, SuperNodes and executors
BOUND = {
    "die_with_parent": "from hcct_lite.deploy.processes import die_with_parent\n"
    "bound = subprocess.Popen(sleep, start_new_session=True, preexec_fn=die_with_parent())",
    "Processes.start": f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
    "from test_flower_deploy import Processes\n"
    "bound = Processes(folder, dict(os.environ)).start('sleep', *sleep)",
}


def _start_two_children(tmp_path, how: str) -> tuple:
    """A starter process with two sleeping children in sessions of their own (as the
    deployment test starts its SuperLink and SuperNodes): one asks to die with its starter."""
    code = "\n".join(
        [
            "import os, pathlib, subprocess, sys, time",
            f"folder = pathlib.Path({str(tmp_path)!r})",
            "sleep = [sys.executable, '-c', 'import time; time.sleep(600)']",
            BOUND[how],
            "free = subprocess.Popen(sleep, start_new_session=True)",
            "(folder / 'pids').write_text(f'{bound.pid} {free.pid}')",
            "time.sleep(600)",
        ]
    )
    starter = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 60
    while not (tmp_path / "pids").exists() or len((tmp_path / "pids").read_text().split()) < 2:
        assert time.monotonic() < deadline and starter.poll() is None, "the starter did not start"
        time.sleep(0.1)
    bound, free = map(int, (tmp_path / "pids").read_text().split())
    return starter, bound, free


@pytest.mark.parametrize("how", sorted(BOUND))
def test_a_child_started_with_die_with_parent_ends_when_its_starter_is_killed(tmp_path, how):
    starter, bound, free = _start_two_children(tmp_path, how)
    try:
        assert _alive(bound) and _alive(free)
        starter.send_signal(signal.SIGKILL)  # as a CI timeout kills a test run
        starter.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _alive(bound) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(bound)
        assert _alive(free)  # without it a child outlives its starter: what the helper fixes
    finally:
        for pid in (bound, free):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)

"""A rehearsal deployment on this machine, timed against ``hcct-lite run``.

    python benchmarks/bench_deployment.py [--task rotated-digits] [--epochs 6] [--clients 8]
        [--fast-silos]

Starts one ``flower-superlink`` and one ``flower-supernode`` per silo on 127.0.0.1 (without
TLS: the certificates and keys of ``docs/deploy.md`` change the set-up, not the rounds),
waits until every silo has connected (and, with ``--fast-silos``, said it is warm), then
times ``hcct-lite flower-run`` from submission to the ServerApp's result JSON and to its
return. ``--fast-silos`` starts each SuperNode with
``--isolation process`` beside an ``hcct-lite silo-exec`` (one warm process per silo that
forks for each message) instead of a fresh ``flwr-clientapp`` process per message.
Prints the times, whether the deployment's groups equal ``hcct-lite run``'s, and where the
time went, from the SuperNodes' log lines stamped on arrival (``round_breakdown``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from hcct_lite.deploy.processes import die_with_parent
from hcct_lite.deploy.silo_exec import READY

BIN = Path(sys.executable).parent
APP = Path(__file__).resolve().parents[1] / "hcct_lite" / "flower" / "app"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _stamp(lines, log) -> None:
    """Copy a process's output to the open file ``log``, each line after its arrival time
    (Unix s), and close it."""
    with log:
        for line in lines:
            log.write(f"{time.time():.3f} {line}")
            log.flush()


def _stamps(text: str, word: str) -> list:
    """The arrival times of the lines of a stamped log that contain ``word``."""
    return [float(line.split()[0]) for line in text.splitlines() if word in line]


def round_breakdown(fed, submitted: float, finished: float) -> dict:
    """Where the wall time went, from the SuperNodes' stamped "Receiving"/"Sending" lines.

    Returns mean seconds per round of: ``spread`` (first to last silo receiving the
    round's message), ``silo`` (one silo: message received to reply sent), ``between``
    (last reply sent to the next round's first receipt); plus ``start`` (submission to the
    first receipt), ``end`` (last reply to the result JSON) and ``rounds``.
    """
    logs = [fed.log(f"silo{i}") for i in range(fed.clients)]
    got, sent = [_stamps(t, "Receiving:") for t in logs], [_stamps(t, "Sending:") for t in logs]
    rounds = min(map(len, got + sent))
    first = [min(g[r] for g in got) for r in range(rounds)]
    last = [max(s[r] for s in sent) for r in range(rounds)]
    mean = lambda xs: sum(xs) / max(len(xs), 1)  # noqa: E731
    return {
        "rounds": rounds,
        "start": first[0] - submitted,
        "spread": mean([max(g[r] for g in got) - first[r] for r in range(rounds)]),
        "silo": mean([s[r] - g[r] for g, s in zip(got, sent, strict=True) for r in range(rounds)]),
        "between": mean([first[r + 1] - last[r] for r in range(rounds - 1)]),
        "end": finished - last[-1],
    }


class _Federation:
    """SuperLink and SuperNodes as process groups, logs in ``folder``, stopped on exit."""

    def __init__(self, folder: Path, clients: int, fast: bool):
        self.folder, self.procs = folder, []
        self.port = _free_port()
        home = folder / "flwr-home"
        home.mkdir()
        (home / "config.toml").write_text(
            '[superlink]\ndefault = "local"\n\n[superlink.local]\n'
            f'address = "127.0.0.1:{self.port}"\ninsecure = true\n'
        )
        self.env = {
            **os.environ,
            "FLWR_HOME": str(home),
            "PYTHONUNBUFFERED": "1",
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        self.clients, self.fast = clients, fast

    def _start(self, name: str, *args: str) -> None:
        proc = subprocess.Popen(
            [str(BIN / args[0]), *args[1:]],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=self.folder,
            start_new_session=True,
            text=True,
            errors="replace",
        )
        self.procs.append(proc)
        # the file exists once this returns: log() may read it before any line arrives
        log = open(self.folder / f"{name}.log", "w")  # noqa: SIM115 - _stamp closes it
        copy = threading.Thread(target=_stamp, args=(proc.stdout, log))
        copy.daemon = True
        copy.start()

    def log(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text(errors="replace")

    def start(self) -> None:
        self._start(
            "superlink",
            "flower-superlink",
            "--insecure",
            "--port",
            str(self.port),
            "--disable-runtime-dependency-installation",
        )
        _wait(lambda: "Uvicorn running" in self.log("superlink"), 120, "the SuperLink")
        for i in range(self.clients):
            port = _free_port()
            isolation = ["--isolation", "process"] if self.fast else []
            self._start(
                f"silo{i}",
                "flower-supernode",
                "--insecure",
                "--superlink",
                f"127.0.0.1:{self.port}",
                "--port",
                str(port),
                *isolation,
                "--node-config",
                f"partition-id={i}",
            )
            if self.fast:
                self._start(
                    f"exec{i}",
                    "hcct-lite",
                    "silo-exec",
                    "--runtime-api-address",
                    f"127.0.0.1:{port}",
                    "--insecure",
                )
        for i in range(self.clients):
            _wait(lambda i=i: "SuperNode ID" in self.log(f"silo{i}"), 120, f"silo {i}")
            if self.fast:  # timing starts once every silo is warm, not while it imports
                _wait(lambda i=i: READY in self.log(f"exec{i}"), 120, f"silo-exec {i}")

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


def _deployment_seconds(args, folder: Path) -> tuple:
    """Seconds from submission to the result JSON and to flower-run's return, where the
    time went (``round_breakdown``), and the result."""
    fed = _Federation(folder, args.clients, args.fast_silos)
    out = folder / "result.json"
    config = (
        f'task="{args.task}" scheme="hcct" epochs={args.epochs} '
        f'n-clients={args.clients} json-out="{out}"'
    )
    try:
        fed.start()
        t0, submitted = time.perf_counter(), time.time()
        submit = subprocess.Popen(
            [str(BIN / "hcct-lite"), "flower-run", str(APP), "local", "--run-config", config],
            env=fed.env,
            cwd=folder,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=die_with_parent(),
        )
        _wait(out.exists, 3600, "the result JSON")
        seconds, finished = time.perf_counter() - t0, time.time()
        said = submit.communicate(timeout=300)[0]
        returned = time.perf_counter() - t0
        if submit.returncode != 0:
            raise RuntimeError(f"the run did not complete: {said}")
        parts = round_breakdown(fed, submitted, finished)
    finally:
        fed.stop()
    return seconds, returned, parts, json.loads(out.read_text())


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="rotated-digits")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--fast-silos", action="store_true")
    p.add_argument("--logs", help="keep the processes' logs in this folder")
    args = p.parse_args(argv)

    import torch

    from hcct_lite.deploy.flower.common import deployment_defence
    from hcct_lite.training.config import make_config
    from hcct_lite.training.engine import run_experiment

    torch.set_num_threads(1)
    # the deployment defends as the app's run config says (a robust rule by default)
    cfg = make_config(
        args.task, "hcct", 0, epochs=args.epochs, n_clients=args.clients, **deployment_defence()
    )
    t0 = time.perf_counter()
    local = run_experiment(cfg, progress=False)
    engine = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as folder:
        if args.logs:
            os.makedirs(args.logs, exist_ok=False)
        seconds, returned, parts, result = _deployment_seconds(args, Path(args.logs or folder))
    same = [e["groups"] for e in result["history"]] == [e["groups"] for e in local["history"]]
    kind = "warm silos (silo-exec)" if args.fast_silos else "a process per message"
    print(f"{args.task}, {args.clients} silos, {args.epochs} epochs, HCCT, {kind}")
    print("| what | seconds | vs hcct-lite run |")
    print("|---|---|---|")
    print(f"| `hcct-lite run` | {engine:.1f} | 1.0 |")
    print(
        f"| rehearsal deployment, submission to result | {seconds:.1f} | {seconds / engine:.1f} |"
    )
    print(f"| ... to `hcct-lite flower-run`'s return | {returned:.1f} | {returned / engine:.1f} |")
    print(f"same groups every epoch as `hcct-lite run`: {same}")
    print(f"\nwhere it went ({parts['rounds']} rounds; the SuperNodes' stamped log lines)")
    print("| part | seconds |")
    print("|---|---|")
    print(f"| submission to the first silo receiving a message | {parts['start']:.1f} |")
    print(f"| per round: first to last silo receiving the message | {parts['spread']:.2f} |")
    print(f"| per round: one silo, message received to reply sent | {parts['silo']:.2f} |")
    print(
        f"| per round: last reply sent to the next round's first receipt | {parts['between']:.2f} |"
    )
    print(f"| last reply sent to the result JSON | {parts['end']:.1f} |")


if __name__ == "__main__":
    main()

"""The GPU queue: longest runs first, admitted by memory and time, failures retried once.

The queue runs jobs in spawned workers like every runner; here on the CPU (the memory it
admits by is then its estimate alone), with runs a few seconds long.
"""

import json
import os

import pytest

from hcct_lite.gpu.queue import (
    QueueOptions,
    job_work,
    memory_estimate,
    run_and_measure,
    run_queue,
)
from hcct_lite.reproduction.paper_grids import grid_jobs
from hcct_lite.runs.jobs import Job, Outcome, job_path

TINY = {"epochs": 1, "n_clients": 4, "samples": 40}


def test_longer_runs_come_first_whatever_their_grid():
    jobs = grid_jobs(["schemes-cifar10", "k-vs-n-digit"])
    work = {f"{j.grid}/{j.name}": job_work(j) for j in jobs}
    assert work["k-vs-n-digit/n50-k1-seed0"] > work["k-vs-n-digit/n10-k1-seed0"]
    assert work["k-vs-n-digit/n10-k1-seed0"] > work["schemes-cifar10/hcct-seed0"]
    # MAXFL's reference rounds (50 local epochs each client alone) are work too
    assert work["schemes-cifar10/maxfl-seed0"] > work["schemes-cifar10/hcct-seed0"]


def test_memory_estimate_grows_with_clients_and_learns_from_measured_peaks():
    small, big = (Job("g", f"n{n}", "digit", "hcct", 0, {"n_clients": n}) for n in (10, 50))
    assert memory_estimate(big, {}) > memory_estimate(small, {}) > 1.5
    assert memory_estimate(big, {}) == 3.5 + 50 * 0.29  # the peaks measured on a card
    assert memory_estimate(big, {"digit_cnn": 0.1}) == 3.5 + 50 * 0.1
    cifar = Job("g", "c", "cifar10", "hcct", 0, {})
    assert memory_estimate(cifar, {}) < memory_estimate(small, {})  # a smaller network


def test_queue_writes_every_run_retries_a_failure_once_and_logs_each(tmp_path):
    ok = [Job("g", f"{s}-seed0", "rotated-digits", s, 0, dict(TINY)) for s in ("hcct", "global")]
    bad = Job("g", "bad-seed0", "rotated-digits", "hcct", 0, dict(TINY, dataset="no_such_set"))
    log = tmp_path / "runs.jsonl"
    said = []
    opts = QueueOptions(workers=2, memory_gb=2.0, log=str(log))  # one run's estimate fits
    failed = run_queue([*ok, bad], str(tmp_path), "cpu", opts, said.append)
    assert failed == ["g/bad-seed0"]
    for j in ok:
        with open(job_path(str(tmp_path), j)) as f:
            assert json.load(f)["status"] == {"state": "complete"}
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted(r["name"] for r in rows) == [
        "g/bad-seed0",
        "g/bad-seed0",
        "g/global-seed0",
        "g/hcct-seed0",
    ]
    assert all(r["in_flight"] == 1 for r in rows)  # the memory held one run at a time
    assert sum(m.startswith("FAILED g/bad-seed0") for m in said) == 2
    assert any("no_such_set" in m for m in said)


def test_a_deadline_leaves_runs_that_cannot_finish_unstarted(tmp_path):
    jobs = [Job("g", f"s{seed}", "rotated-digits", "hcct", seed, dict(TINY)) for seed in range(3)]
    opts = QueueOptions(workers=1, memory_gb=8.0, deadline=30.0)
    # runs that say they took 40 s (in one): however loaded the machine, the first starts
    # well before the deadline, and then no other can be expected to end before it
    left = run_queue(jobs, str(tmp_path), "cpu", opts, lambda m: None, work=_a_second)
    # the first run starts (no time measured yet), and shows the others cannot end in time
    assert len(left) == 2 and all(name.endswith("(not started)") for name in left)


def _a_second(job, out, device):  # a run's outcome as run_and_measure gives it: 40 s
    import time

    time.sleep(1.0)
    return Outcome(job, 12.5, 40.0), 0.0


def _fails_after_6_s(job, out, device):  # a failed run's outcome, after the deadline
    import time

    time.sleep(6.0)
    return Outcome(job, reason="ValueError: no such data set"), 0.0


def _dies_on_bad(job, out, device):  # a worker killed mid-run (the OS's OOM killer, say)
    if job.name.startswith("bad"):
        os._exit(3)
    return run_and_measure(job, out, device)


def test_a_worker_that_dies_fails_its_run_and_fresh_workers_go_on(tmp_path):
    jobs = [Job("g", f"{n}-seed0", "rotated-digits", "hcct", 0, dict(TINY)) for n in ("bad", "ok")]
    said = []
    opts = QueueOptions(workers=1, memory_gb=8.0)
    failed = run_queue(jobs, str(tmp_path), "cpu", opts, said.append, work=_dies_on_bad)
    assert failed == ["g/bad-seed0"]
    assert sum(m.startswith("FAILED g/bad-seed0: BrokenProcessPool") for m in said) == 2
    assert os.path.exists(job_path(str(tmp_path), jobs[1]))


def test_the_motivating_examples_whole_split_is_work_too():
    job = grid_jobs(["motivating"])[0]
    assert job_work(job) > 0  # samples 0 (the whole split) once divided a rate by zero


def test_no_run_starts_after_the_deadline_even_before_any_has_ended(tmp_path):
    bad = Job("g", "bad-seed0", "rotated-digits", "hcct", 0, dict(TINY, dataset="no_such_set"))
    said = []
    opts = QueueOptions(workers=1, memory_gb=8.0, deadline=5.0)  # its failure comes later
    left = run_queue([bad], str(tmp_path), "cpu", opts, said.append, work=_fails_after_6_s)
    assert left == ["g/bad-seed0 (not started)"]  # its retry: the deadline had passed
    assert sum(m.startswith("start") for m in said) == 1


@pytest.mark.parametrize(
    "kw, name",
    [
        ({"workers": 0}, "workers"),
        ({"workers": 2.5}, "workers"),
        ({"workers": True}, "workers"),
        ({"workers": "8"}, "workers"),
        ({"memory_gb": 0}, "memory_gb"),
        ({"memory_gb": float("nan")}, "memory_gb"),
        ({"memory_gb": "80"}, "memory_gb"),
        ({"deadline": -1.0}, "deadline"),
        ({"deadline": float("inf")}, "deadline"),
        ({"deadline": True}, "deadline"),
    ],
)
def test_queue_options_refuse_what_cannot_be_a_count_memory_or_time(kw, name):
    with pytest.raises(ValueError, match=f"^{name} must be"):
        QueueOptions(**kw)

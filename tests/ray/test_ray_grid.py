"""Grids on a real Ray cluster of two nodes on this machine (Ray's own cluster utilities).

A grid on Ray must equal the same grid with one worker outside timing and provenance, a node
killed mid-grid must cost nothing but time, and a wrong address must be one sentence.
"""

import json
import os
import threading
import time

import pytest

ray = pytest.importorskip("ray")

from ray.cluster_utils import Cluster  # noqa: E402

from hcct_lite.cli import main  # noqa: E402
from hcct_lite.gpu.queue import gpu_share, memory_estimate  # noqa: E402
from hcct_lite.ray.grid import RayOptions, ray_environment  # noqa: E402
from hcct_lite.runs.jobs import Job, job_path  # noqa: E402
from hcct_lite.runs.runner import run_jobs  # noqa: E402
from hcct_lite.runs.store import load_result  # noqa: E402

# Ray's nodes start slowly on a loaded two-core machine: give them room.
STARTUP_WAIT = 180.0


def _jobs(grid, epochs, seeds, schemes=("hcct", "global")):
    return [
        Job(grid, f"{s}-seed{seed}", "rotated-digits", s, seed, {"epochs": epochs, "n_clients": 4})
        for s in schemes
        for seed in seeds
    ]


@pytest.fixture(scope="module")
def cluster():
    ray_environment(STARTUP_WAIT)
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    c.add_node(num_cpus=1)
    c.wait_for_nodes(timeout=STARTUP_WAIT)
    yield c
    c.shutdown()


def _node_ids(c) -> set:
    return {n.node_id for n in c.list_all_nodes()}


def _without_timing(path) -> dict:
    with open(path) as f:
        r = json.load(f)
    r.pop("timing")
    r.pop("provenance")
    return r


def test_a_grid_on_two_ray_nodes_equals_the_same_grid_on_one_worker(cluster, tmp_path):
    jobs = _jobs("g", epochs=2, seeds=(0, 1))
    on_ray, alone = str(tmp_path / "ray"), str(tmp_path / "one")
    options = RayOptions(cluster.address, startup_wait=STARTUP_WAIT)
    assert run_jobs(jobs, on_ray, ray=options, cpu_capability="default", progress=False) == 4
    run_jobs(jobs, alone, workers=1, cpu_capability="default", progress=False, log=None)
    nodes = _node_ids(cluster)
    for j in jobs:
        assert _without_timing(job_path(on_ray, j)) == _without_timing(job_path(alone, j))
        ran_on = load_result(job_path(on_ray, j))["provenance"]["node"]
        assert ran_on["ray_node_id"] in nodes and ran_on["host"] and ran_on["ip"]
    # resumes as the process pool does: nothing left to run
    assert run_jobs(jobs, on_ray, ray=options, progress=False, log=None) == 0


def test_the_flower_simulation_runs_its_silos_on_the_same_cluster(cluster, tmp_path, capsys):
    from hcct_lite.training.config import make_config
    from hcct_lite.training.engine import run_experiment

    out = tmp_path / "flower.json"
    args = ["--task", "rotated-digits", "--scheme", "hcct", "--epochs", "3", "--clients", "4"]
    assert (
        main(
            [
                "flower-sim",
                *args,
                "--engine",
                "ray",
                "--ray-address",
                cluster.address,
                "--json",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    assert "on Flower (ray)" in capsys.readouterr().out
    flower = json.loads(out.read_text())
    local = run_experiment(
        make_config("rotated-digits", "hcct", 0, epochs=3, n_clients=4), progress=False
    )
    assert [h["groups"] for h in flower["history"]] == [h["groups"] for h in local["history"]]
    assert abs(flower["final"]["mean"] - local["final"]["mean"]) < 0.01


def test_a_node_killed_mid_grid_costs_only_time(cluster, tmp_path):
    doomed = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes(timeout=STARTUP_WAIT)
    # HCCT runs of about 3 s: when the doomed node's first run is stored, it holds its next
    jobs = _jobs("k", epochs=12, seeds=range(6), schemes=("hcct",))
    out, killed = str(tmp_path), []

    def kill_once_the_doomed_node_has_run():
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not killed:
            for j in jobs:
                try:
                    node = load_result(job_path(out, j))["provenance"]["node"]["ray_node_id"]
                except (ValueError, FileNotFoundError, KeyError):
                    continue
                if node == doomed.node_id:
                    cluster.remove_node(doomed, allow_graceful=False)
                    killed.append(j.name)
                    return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_once_the_doomed_node_has_run, daemon=True)
    killer.start()
    lines = []
    options = RayOptions(cluster.address, startup_wait=STARTUP_WAIT)
    assert run_jobs(jobs, out, ray=options, progress=False, log=lines.append) == len(jobs)
    killer.join(timeout=60)
    assert killed, "the doomed node ran nothing: the test did not test a kill"
    for j in jobs:  # every run whole, and none of the temporary files of a killed write
        assert load_result(job_path(out, j))["status"]["state"] == "complete"
    assert not [f for f in os.listdir(os.path.join(out, "k")) if f.startswith(".tmp-")]
    assert sum(line.startswith("done ") for line in lines) == len(jobs)
    ran_on = [load_result(job_path(out, j))["provenance"]["node"]["ray_node_id"] for j in jobs]
    assert doomed.node_id in ran_on and set(ran_on) <= _node_ids(cluster) | {doomed.node_id}


def test_a_wrong_address_is_one_sentence(capsys, tmp_path):
    code = main(
        [
            "compare",
            "--task",
            "rotated-digits",
            "--schemes",
            "hcct",
            "--seeds",
            "0",
            "--epochs",
            "1",
            "--out",
            str(tmp_path),
            "--ray",
            "127.0.0.1:1",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert err.startswith("hcct-lite: error: --ray 127.0.0.1:1: nothing answers there")


def test_cuda_runs_on_a_cluster_without_gpus_are_refused_at_once(cluster, tmp_path):
    options = RayOptions(cluster.address, startup_wait=STARTUP_WAIT)
    with pytest.raises(ValueError, match="the cluster has none"):
        run_jobs(_jobs("c", 1, (0,)), str(tmp_path), device="cuda", ray=options, log=None)


def test_ray_flags_need_ray(capsys, tmp_path):
    assert (
        main(
            ["flower-sim", "--task", "rotated-digits", "--scheme", "hcct", "--ray-address", "auto"]
        )
        == 2
    )
    assert "--ray-address needs --engine ray" in capsys.readouterr().err
    code = main(
        ["compare", "--task", "rotated-digits", "--out", str(tmp_path), "--gpus-per-run", "0.5"]
    )
    assert code == 2 and "--gpus-per-run needs --ray" in capsys.readouterr().err


def test_gpu_shares_follow_the_device_and_the_task():
    job = _jobs("g", 1, (0,), ("hcct",))[0]
    assert RayOptions().gpus(job, "cpu") == 0.0
    # rotated digits: a small CNN, by the prior from its weights (2 GB of 80)
    assert (
        RayOptions().gpus(job, "cuda") == gpu_share(job) == round(memory_estimate(job, {}) / 80, 3)
    )
    assert 0.01 < gpu_share(job) < 0.05
    assert RayOptions(gpus_per_run=0.5).gpus(job, "cuda:0") == 0.5
    digit = Job("g", "n50", "digit", "hcct", 0, {"n_clients": 50})
    assert RayOptions().gpus(digit, "cuda") == 0.225  # 18 GB of an 80 GB card: 4 at once
    assert RayOptions().gpus(Job("g", "n10", "digit", "hcct", 0), "cuda") == 0.08
    huge = Job("g", "n400", "digit", "hcct", 0, {"n_clients": 400})  # 120 GB: the whole card
    assert RayOptions().gpus(huge, "cuda") == 1.0
    with pytest.raises(ValueError, match="--gpus-per-run"):
        RayOptions(gpus_per_run=2.0)


@pytest.mark.parametrize("wait", ["inf", "nan", "-1", "0", "1e300", "86401"])
def test_a_startup_wait_that_is_no_number_of_seconds_is_one_sentence(capsys, tmp_path, wait):
    argv = [
        "compare",
        "--task",
        "rotated-digits",
        "--schemes",
        "hcct",
        "--seeds",
        "0",
        "--out",
        str(tmp_path),
        "--ray",
        "127.0.0.1:1",
        "--ray-startup-wait",
        wait,
    ]
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert err.startswith("hcct-lite: error: --ray-startup-wait must be a number of seconds")


@pytest.mark.parametrize("wait", ["inf", "soon", ""])
def test_a_startup_wait_from_the_environment_is_checked_and_named(monkeypatch, wait):
    monkeypatch.delenv("RAY_raylet_start_wait_time_s", raising=False)
    monkeypatch.setenv("HCCT_RAY_STARTUP_WAIT", wait)
    with pytest.raises(ValueError, match="HCCT_RAY_STARTUP_WAIT must be a number of seconds"):
        ray_environment()
    monkeypatch.setenv("HCCT_RAY_STARTUP_WAIT", "0.5")
    ray_environment()
    assert os.environ["RAY_raylet_start_wait_time_s"] == "1"  # rounded up, never 0

"""``hcct-lite verify``: a stored CPU result reruns, in a fresh process under its recorded
CPU kernels and threads, to the same groups, errors and losses, bit for bit; whatever
kernels this process has."""

import json
import os
import platform
import subprocess
import sys

import pytest
from forging import lowered, whole

from hcct_lite.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHIPPED_FMNIST = os.path.join(ROOT, "results", "schemes-fmnist", "hcct-seed0.json")
x86 = pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64"), reason="the shipped kernels are x86-64's"
)


def _verify(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "hcct_lite.cli", "verify", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, **(env or {})),
    )


@x86
@pytest.mark.parametrize("ambient", ["default", "avx2", "avx512"])
def test_a_shipped_fmnist_run_reproduces_whatever_kernels_the_caller_has(ambient):
    # HCCT's FMNIST groups flip on float noise (epoch 23 with this machine's own kernels):
    # verify pins the recorded ones in its rerun, so the caller's setting does not matter
    r = json.load(open(SHIPPED_FMNIST))
    assert r["provenance"]["cpu_kernel_env"]["ATEN_CPU_CAPABILITY"] == "default"
    done = _verify(SHIPPED_FMNIST, env={"ATEN_CPU_CAPABILITY": ambient})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reproduces (all 50 epochs compared: the same groups" in done.stdout


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    path = tmp_path_factory.mktemp("verify") / "run.json"
    argv = ["run", "--task", "rotated-digits", "--scheme", "hcct", "--epochs", "3", "--quiet"]
    assert main([*argv, "--json", str(path)]) == 0
    return path


def test_a_fresh_result_records_what_decides_its_numbers_and_reproduces(fresh, tmp_path):
    prov = json.loads(fresh.read_text())["provenance"]
    for key in ("code_fingerprint", "cpu_capability", "cpu_kernel_env", "torch_threads"):
        assert key in prov
    out = tmp_path / "report.json"
    done = _verify(str(fresh), "--json", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    (rep,) = json.loads(out.read_text())
    assert rep["reproduces"] and rep["same_groups_share"] == 1.0
    assert rep["mean_adjusted_rand"] == 1.0 and rep["first_group_difference"] is None
    assert rep["first_error_difference"] is None and rep["epochs_compared"] == 3


def test_a_result_that_does_not_reproduce_says_where(fresh, tmp_path):
    r = json.loads(fresh.read_text())  # tampered, but whole: its final is its history's
    r["history"][1]["groups"] = [[0, 1, 2, 3, 4, 5, 6, 7]]
    last = r["history"][-1]["client_test_error"]
    wrong = round(last[2] * 112 / 100)  # 34 of its 112 test samples more or fewer
    moved = wrong + 34 if wrong <= 78 else wrong - 34
    shift = 100.0 * moved / 112 - last[2]
    last[2] = 100.0 * moved / 112
    bad = tmp_path / "tampered.json"
    bad.write_text(json.dumps(whole(r)))
    done = _verify(str(bad))
    assert done.returncode == 1
    assert "does NOT reproduce: groups first differ in epoch 1" in done.stdout
    assert "errors first differ in epoch 2 (client 2)" in done.stdout
    assert f"client 2: final error {-shift:+.2f}" in done.stdout


def test_errors_lowered_before_the_last_epoch_are_found(fresh, tmp_path):
    """Every client 11 test samples better in the epochs before the last, every derived
    field recomputed: the schema cannot tell, the rerun of every epoch does."""
    from hcct_lite.runs.schema import result_problem

    r = json.loads(fresh.read_text())
    for h in r["history"][:-1]:
        h["client_test_error"] = [
            100.0 * max(round(e * 112 / 100) - 11, 0) / 112 for e in h["client_test_error"]
        ]
    forged = whole(r)
    assert (
        result_problem(forged) is None and forged["final"] != json.loads(fresh.read_text())["final"]
    )
    (tmp_path / "forged.json").write_text(json.dumps(forged))
    out = tmp_path / "report.json"
    assert main(["verify", str(tmp_path / "forged.json"), "--json", str(out)]) == 1
    (rep,) = json.loads(out.read_text())
    assert rep["first_group_difference"] is None and rep["first_error_difference"][0] == 0
    assert rep["clients_differing"] == [] and rep["epochs_compared"] == 3


def test_every_error_one_test_sample_lower_does_not_reproduce(fresh, tmp_path, capsys):
    """Within one test sample once passed a one-sided shift: the rerun is compared exactly."""
    bad = tmp_path / "lower.json"
    bad.write_text(json.dumps(lowered(json.loads(fresh.read_text()), 1)))
    assert main(["verify", str(bad), "--json", str(tmp_path / "report.json")]) == 1
    out = capsys.readouterr().out
    assert "does NOT reproduce: errors first differ in epoch 0 (client 0)" in out
    assert "epoch None" not in out and "groups first differ" not in out
    (rep,) = json.loads((tmp_path / "report.json").read_text())
    assert rep["first_group_difference"] is None
    assert rep["first_differences"] == {"client_test_error": 0}


def test_training_losses_are_compared_and_timing_is_said_not_to_be(fresh, tmp_path, capsys):
    r = json.loads(fresh.read_text())
    r["timing"] = {"seconds": 0.001, "epoch_seconds": [0.0, 0.0, 0.0]}
    (tmp_path / "fast.json").write_text(json.dumps(r))
    assert main(["verify", str(tmp_path / "fast.json")]) == 0
    out = capsys.readouterr().out
    assert "reproduces (all 3 epochs compared: the same groups, errors and training losses" in out
    assert "its timing is not compared, and its thread count is the rerun's" in out
    for h in r["history"]:
        h["train_loss"] = [x * 0.01 for x in h["train_loss"]]
    (tmp_path / "losses.json").write_text(json.dumps(r))
    assert main(["verify", str(tmp_path / "losses.json")]) == 1
    assert "does NOT reproduce: training losses first differ in epoch 0;" in capsys.readouterr().out


def test_a_gpu_result_without_a_gpu_is_checked_whole_and_says_so(
    fresh, tmp_path, capsys, monkeypatch
):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    gpu = json.loads(fresh.read_text())
    gpu["provenance"]["device"] = "cuda (NVIDIA H200)"
    gpu["config"]["device"] = "cuda"
    (tmp_path / "gpu.json").write_text(json.dumps(gpu))
    assert main(["verify", str(tmp_path / "gpu.json")]) == 3  # not rerun
    out = capsys.readouterr().out
    assert "computed on cuda (NVIDIA H200), and this machine has no GPU: not rerun" in out
    assert "reproduces" not in out
    gpu["history"][1]["mean_test_error"] = 1.0  # Fig. 3's table reads this field
    (tmp_path / "gpu-edited.json").write_text(json.dumps(gpu))
    assert main(["verify", str(tmp_path / "gpu-edited.json")]) == 2
    assert "mean_test_error 1.0 is not the mean of its client errors" in capsys.readouterr().err


def test_bad_arguments_exit_2_with_one_line(fresh, tmp_path, capsys):
    gpu = json.loads(fresh.read_text())
    gpu["provenance"]["device"] = "cuda (NVIDIA H200)"
    (tmp_path / "gpu.json").write_text(json.dumps(gpu))
    (tmp_path / "broken.json").write_text("{")
    stopped = dict(gpu, status={"state": "stopped", "epoch": 1, "reason": "no client answered"})
    (tmp_path / "stopped.json").write_text(json.dumps(stopped))
    cases = [
        (tmp_path / "nope.json", "does not exist"),
        (tmp_path, "is not a regular file"),
        (tmp_path / "broken.json", "unreadable"),
        (tmp_path / "stopped.json", "a stopped run"),
    ]
    fields = json.loads(fresh.read_text())
    for name, change, words in [
        ("norm", {"norm_limit": -1.0}, "norm_limit"),
        ("k50", {"cluster_models": 50}, "cluster_models"),
        ("seed", {"seed": 2**40}, "its config is not one a run accepts"),
        ("lr", {"lr": float("nan")}, "lr must be a finite number > 0"),
        ("batch", {"batch_size": 0}, "batch_size"),
        # bounds checked before any rerun: these once ran for minutes or filled the memory
        ("local", {"local_epochs": 1_000_000}, "local_epochs must be in [1, 10000]"),
        ("k2e6", {"cluster_models": 2_000_000}, "cluster_models must be in [1, 8]"),
        ("lr1e20", {"lr": 1e20}, "lr 1e+20 is too large"),
        ("agg", {"aggregator": "krum"}, "aggregator must be one of"),
    ]:
        bad = json.loads(json.dumps(fields))
        bad["config"].update(change)
        bad.update({k: v for k, v in change.items() if k == "seed"})
        (tmp_path / f"{name}.json").write_text(json.dumps(bad))
        cases.append((tmp_path / f"{name}.json", words))
    edited = json.loads(json.dumps(fields))
    edited["history"][-1]["client_test_error"][0] = 99.0  # the final block left as it was
    (tmp_path / "edited.json").write_text(json.dumps(edited))
    prov = dict(fields, provenance="cpu")
    (tmp_path / "prov.json").write_text(json.dumps(prov))
    cases += [
        (tmp_path / "edited.json", "its final client errors are not its last epoch's"),
        (tmp_path / "prov.json", "its provenance is str, not an object"),
    ]
    done = _verify(str(fresh), str(cases[0][0]))  # once through the installed command
    assert done.returncode == 2 and cases[0][1] in done.stderr and "reproduces" not in done.stdout
    for path, words in cases:  # the same code in this process: no interpreter to start
        code = main(["verify", str(fresh), str(path)])  # checked before the first rerun
        out, err = capsys.readouterr()
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err
        assert "reproduces" not in out


@x86
def test_only_the_kernel_variables_a_file_names_are_set_and_checked(fresh, tmp_path):
    from hcct_lite.runs.verify import rerun

    # a run under the kernels every x86-64 CPU has, as a grid's are: the rerun must pin them
    r = rerun(json.loads(fresh.read_text()), capability="default", threads=1)
    prov = r["provenance"]
    # a label this CPU may lack beside a pinned kernel env that any x86-64 CPU runs, and a
    # variable that is not a kernel setting: the rerun pins default kernels, ignores the rest
    prov["cpu_capability"] = "avx512"
    prov["cpu_kernel_env"] = dict(
        ATEN_CPU_CAPABILITY="default",
        MKL_CBWR="COMPATIBLE",
        ONEDNN_MAX_CPU_ISA="SSE41",
        LD_PRELOAD="/nonexistent.so",
    )
    odd = tmp_path / "odd-provenance.json"
    odd.write_text(json.dumps(r))
    done = _verify(str(odd))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "(default kernels, " in done.stdout and "reproduces (all 3 epochs compared" in done.stdout
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "name the result files to rerun"),
        (["--write"], "--write stores the canaries' numbers: use it with --canaries"),
        (["--canaries", "x.json"], "--canaries reruns the canaries alone"),
        (["--canaries", "--json", "out.json"], "--canaries reruns the canaries alone"),
    ],
)
def test_verify_refuses_a_mix_of_results_and_canaries_in_one_line(args, message, capsys):
    assert main(["verify", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_verify_canaries_passes_on_the_stored_numbers_and_fails_on_a_changed_one(
    monkeypatch, capsys
):
    from hcct_lite.runs import canary

    stored = canary.load_canaries()
    monkeypatch.setattr(canary, "run_canaries", lambda: json.loads(json.dumps(stored)))
    assert main(["verify", "--canaries"]) == 0
    assert f"{len(stored)} canaries give the stored numbers" in capsys.readouterr().out
    changed = json.loads(json.dumps(stored))
    name = sorted(changed)[0]
    changed[name]["digest"] = "0" * 64  # the same settings and version, other numbers
    monkeypatch.setattr(canary, "run_canaries", lambda: changed)
    assert main(["verify", "--canaries"]) == 1
    assert name in capsys.readouterr().out

"""The compute version's guard: the canary runs give their stored numbers bit for bit, on
any x86-64 CPU; a change of their numbers under the same version fails, saying what to bump
and which stored results that makes stale; the checker refuses garbage and liars."""

import copy
import json
import os
import platform

import pytest

from hcct_lite.reproduction.paper_grids import grids_using
from hcct_lite.runs import canary
from hcct_lite.runs.canary import (
    CANARIES,
    canary_problems,
    change_report,
    load_canaries,
    run_canaries,
    write_canaries,
)

x86 = pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64"), reason="the canaries' kernels are x86-64's"
)
DATA = os.environ.get("HCCT_DATA_DIR")


@x86
def test_the_canaries_give_their_stored_numbers_bit_for_bit():
    stored, fresh = load_canaries(), run_canaries()
    unavailable = {n for n, e in fresh.items() if "unavailable" in e}
    # the rotated digits are scikit-learn's, on every machine; the other tasks need the
    # offline data sets (HCCT_DATA_DIR), which CI has
    assert not {n for n in unavailable if CANARIES[n][0] == "rotated-digits"}
    if DATA and os.path.isdir(DATA):
        assert not unavailable, unavailable
    problems, changed = canary_problems(stored, fresh)
    assert not problems, problems
    assert not changed, change_report(stored, fresh, changed, grids_using)


def test_every_scheme_task_and_network_has_a_canary():
    from hcct_lite.schemes.registry import scheme_names
    from hcct_lite.training.models import MODELS
    from hcct_lite.training.tasks import TASKS

    configs = [canary.canary_config(n) for n in CANARIES]
    how = ": give each a canary (CANARIES, hcct_lite/runs/canary.py); verify --canaries --write"
    for what, have, registered in (
        ("schemes", {c.scheme for c in configs}, scheme_names()),
        ("tasks", {c.task for c in configs}, TASKS),
        ("networks", {c.model for c in configs}, MODELS),
    ):
        missing = sorted(set(registered) - have)
        assert not missing, f"{what} without a canary: {missing}{how}"
    from hcct_lite.deploy.defences.robust import AGGREGATORS

    assert {c.option("aggregator") for c in configs} == set(AGGREGATORS)
    assert any(c.option("norm_limit") > 0 for c in configs) and all(c.epochs <= 3 for c in configs)


def test_the_digest_sees_the_last_bit_of_one_update(monkeypatch):
    # the canaries' numbers hold float64 cosines of every update: one weight of one
    # average moved by one float32 step changes the digest
    import torch

    from hcct_lite.schemes import base

    before = canary._run_here(["scheme-global"])["scheme-global"]
    real = base.weighted_average

    def nudged(states, weights):
        out = real(states, weights)
        w = next(iter(out.values()))
        w.view(-1)[0] = torch.nextafter(w.view(-1)[0], torch.tensor(1e9, dtype=w.dtype))
        return out

    monkeypatch.setattr(base, "weighted_average", nudged)
    after = canary._run_here(["scheme-global"])["scheme-global"]
    assert before["compute_version"] == after["compute_version"]
    assert before["digest"] != after["digest"]
    assert canary._run_here(["scheme-global"])["scheme-global"]["digest"] == after["digest"]


def _pair():
    """A stored canary file's entries and a fresh run that agrees with them."""
    stored = load_canaries()
    return stored, copy.deepcopy(stored)


def test_numbers_changed_under_the_same_version_say_what_to_bump_and_what_goes_stale():
    stored, fresh = _pair()
    fresh["scheme-maxfl"]["digest"] = "0" * 64
    fresh["scheme-maxfl"]["final_mean"] = 1.5
    problems, changed = canary_problems(stored, fresh)
    assert problems == [] and changed == ["scheme-maxfl"]
    text = change_report(stored, fresh, changed, grids_using)
    assert "scheme-maxfl (engine 1, task rotated-digits 1, scheme maxfl 1)" in text
    assert "-> 1.5, final groups the same" in text and "Bump the version" in text
    # a bump of MAXFL's version would make its Table IV runs stale, nothing else
    assert (
        "scheme maxfl: schemes-fmnist (5), schemes-rotated-digits (5), schemes-digit (5), "
        "schemes-cifar10 (5)" in text
    )
    assert "  engine: schemes-fmnist (45), " in text


def test_a_bumped_version_a_moved_default_or_a_missing_canary_asks_to_write_again():
    stored, fresh = _pair()
    fresh["scheme-hcct"]["compute_version"]["scheme hcct"] = 2
    fresh["scheme-hcct"]["digest"] = "1" * 64
    fresh["task-fmnist"]["settings"]["lr"] = 0.2
    del fresh["scheme-ifca"]
    fresh["new-one"] = dict(fresh["scheme-flsc"])
    fresh["defence-median"]["pins"] = {"kernels": "avx2", "blas_core": "Haswell", "threads": 1}
    fresh["defence-median"]["digest"] = "3" * 64
    problems, changed = canary_problems(stored, fresh)
    assert changed == []
    assert any("scheme-hcct was stored for compute version" in p and "now {" in p for p in problems)
    assert any("task-fmnist now runs other settings (lr)" in p for p in problems)
    assert any("scheme-ifca is stored but no longer defined" in p for p in problems)
    assert any("new-one is not stored" in p for p in problems)
    assert any("defence-median was stored under other pins" in p for p in problems)


def test_a_canary_this_machine_cannot_run_is_left_out_not_passed():
    stored, fresh = _pair()
    fresh["task-digit"] = {"unavailable": "no mnist here"}
    assert canary_problems(stored, fresh) == ([], [])
    with pytest.raises(ValueError, match=r"unavailable \['task-digit'\]"):
        write_canaries(fresh, path=os.devnull, stored=stored)


def test_writing_refuses_numbers_that_changed_under_the_same_version(tmp_path):
    stored, fresh = _pair()
    fresh["defence-median"]["digest"] = "2" * 64
    target = tmp_path / "canaries.json"
    with pytest.raises(ValueError, match="defence-median changed while their compute version"):
        write_canaries(fresh, path=target, stored=stored)
    assert not target.exists()
    fresh["defence-median"]["compute_version"]["aggregators"] += 1  # bumped: now it may
    write_canaries(fresh, path=target, stored=stored)
    assert load_canaries(target) == fresh


@pytest.mark.parametrize(
    "content",
    [
        "",
        "[]",
        '{"canaries": []}',
        '{"canaries": {"a": {"digest": 5, "compute_version": {}, "settings": {}}}}',
        '{"canaries": {"a": {"digest": "x", "compute_version": [1], "settings": {}}}}',
        '{"canaries": {"a": {"digest": "x", "compute_version": {}, "settings": null}}}',
        '{"canaries": {"a": null}}',
    ],
)
def test_a_broken_canary_file_is_named(tmp_path, content):
    path = tmp_path / "canaries.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=str(path)):
        load_canaries(path)


def test_the_stored_file_holds_every_canary_once_per_line():
    text = canary.CANARY_FILE.read_text()
    doc = json.loads(text)
    assert list(doc["canaries"]) == list(CANARIES)
    assert all(
        e["pins"] == {"kernels": "default", "blas_core": "Nehalem", "threads": 1}
        for e in doc["canaries"].values()
    )
    assert sum(line.startswith('  "') for line in text.splitlines()) == len(CANARIES)


def test_an_unknown_canary_is_named():
    with pytest.raises(ValueError, match="unknown canary 'nope'"):
        run_canaries(["nope"])


def test_the_pins_override_whatever_the_caller_has():
    hostile = {
        "ATEN_CPU_CAPABILITY": "avx512",
        "MKL_CBWR": "AVX512",
        "KEEP": "1",
        "OPENBLAS_CORETYPE": "Prescott",
        "NPY_DISABLE_CPU_FEATURES": "",
        "OMP_NUM_THREADS": "8",
    }
    env = canary.pinned_env(hostile)
    assert env["ATEN_CPU_CAPABILITY"] == "default" and env["MKL_CBWR"] == "COMPATIBLE"
    assert env["ONEDNN_MAX_CPU_ISA"] == "SSE41" and env["OPENBLAS_CORETYPE"] == "Nehalem"
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == "1" and env["KEEP"] == "1"
    assert env["NPY_DISABLE_CPU_FEATURES"]  # every optimisation numpy dispatches per CPU


@x86
def test_a_process_whose_blas_is_not_pinned_refuses_to_run_canaries():
    import subprocess
    import sys

    env = dict(canary.pinned_env(), OPENBLAS_CORETYPE="Sandybridge")
    code = "import numpy; from hcct_lite.runs.canary import _check_pinned; _check_pinned()"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode != 0 and "uses Sandybridge kernels, not Nehalem" in done.stderr

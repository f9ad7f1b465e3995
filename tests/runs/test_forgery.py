"""Result files that tell an edit from a run.

Each test forges a result as an attacker or a hasty researcher would, every derived field
recomputed, and checks that ``verify`` and the store refuse it, naming what gives it away:
the device its config asked for, an error no test set gives, sizes or domains its config
does not build, or a shipped file whose digest is not the listed one. None needs a rerun;
``test_verify.py`` has the forgeries only a rerun finds.
"""

import json
import os
import shutil

import pytest
from forging import lowered, whole

from hcct_lite.cli import main
from hcct_lite.runs.store import reuse_decision
from hcct_lite.training.config import make_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHIPPED_CPU = os.path.join(ROOT, "results", "schemes-fmnist", "hcct-seed0.json")
SHIPPED_GPU = os.path.join(ROOT, "results", "schemes-digit", "flsc-seed1.json")


def _write(path, r: dict) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(r))
    return str(path)


def _one_line(capsys) -> tuple:
    out, err = capsys.readouterr()
    return out, err.strip()


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    path = tmp_path_factory.mktemp("forgery") / "run.json"
    argv = ["run", "--task", "rotated-digits", "--scheme", "hcct", "--epochs", "3", "--quiet"]
    assert main([*argv, "--json", str(path)]) == 0
    return json.loads(path.read_text())


@pytest.fixture
def no_gpu(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_a_cpu_result_that_claims_a_gpu_is_refused_by_verify_and_compare(tmp_path, capsys):
    """Every error 10 points lower and provenance.device "cuda:0", its config still cpu:
    once "not rerun" with exit 0, and compare reused it."""
    r = json.loads(open(SHIPPED_CPU).read())
    for h in r["history"]:
        h["client_test_error"] = [max(0.0, e - 10) for e in h["client_test_error"]]
    r["provenance"]["device"] = "cuda:0"
    path = _write(tmp_path / "fmnist__hcct__seed0.json", whole(r))
    words = "its provenance says it ran on 'cuda:0', its config on 'cpu'"
    assert main(["verify", path]) == 2
    out, err = _one_line(capsys)
    assert words in err and len(err.splitlines()) == 1 and "not rerun" not in out
    argv = ["compare", "--task", "fmnist", "--schemes", "hcct", "--seeds", "0"]
    assert main([*argv, "--out", str(tmp_path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"run fmnist__hcct__seed0.json: not a complete result ({words})" in out


def test_half_a_test_sample_is_refused_without_a_rerun(fresh, tmp_path, capsys):
    path = _write(tmp_path / "half.json", lowered(json.loads(json.dumps(fresh)), 0.5))
    assert main(["verify", path]) == 1
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"{path}: refused, not rerun: client 0's error in epoch 0 (")
    assert out.endswith("is not a whole number of its 112 test samples")
    assert len(out.splitlines()) == 1


def _more_samples(r):
    r["sizes"][0] += 1


def _rename_domains(r):
    r["domains"] = [f"mnist-{d}" for d in r["domains"]]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (_more_samples, "refused, not rerun: its sizes are not those its config builds (client 0"),
        (_rename_domains, "refused, not rerun: its domains are not those its config builds"),
    ],
)
def test_forged_sizes_and_domains_are_refused_without_a_rerun(
    fresh, tmp_path, capsys, change, words
):
    r = json.loads(json.dumps(fresh))
    change(r)
    assert main(["verify", _write(tmp_path / "forged.json", r)]) == 1
    assert words in capsys.readouterr().out


def _gpu_errors(r):
    return lowered(r, 1)


def _timing(r):
    r["timing"]["seconds"] /= 10
    return r


def _threads(r):
    r["provenance"]["torch_threads"] = 8
    return r


@pytest.mark.parametrize(
    ("source", "edit"),
    [(SHIPPED_GPU, _gpu_errors), (SHIPPED_CPU, _timing), (SHIPPED_CPU, _threads)],
    ids=["gpu-errors", "cpu-timing", "cpu-threads"],
)
def test_an_edited_shipped_file_is_refused_by_verify_and_reuse(
    tmp_path, monkeypatch, capsys, no_gpu, source, edit
):
    """A self-consistent edit of a shipped result: its digest is not the listed one.

    Elsewhere the same file is a user's own run: nothing vouches for it, and verify says
    what it checked (and, for a GPU result where no GPU is, exits 3: not rerun).
    """
    shipped = tmp_path / "results"
    grid = os.path.basename(os.path.dirname(source))
    monkeypatch.setenv("HCCT_RESULTS", str(shipped))
    path = str(shipped / grid / os.path.basename(source))
    os.makedirs(os.path.dirname(path))
    shutil.copy(source, path)
    r = json.loads(open(source).read())
    cfg = make_config(**r["config"])
    assert reuse_decision(path, cfg)[0]
    forged = _write(shipped / grid / os.path.basename(source), edit(r))
    ok, why = reuse_decision(forged, cfg)
    assert not ok and why.startswith("edited since it was shipped (its digest is not the one")
    assert main(["verify", forged]) == 1
    out = capsys.readouterr().out.strip()
    assert out == f"{forged}: refused, not rerun: {why}"
    if source == SHIPPED_GPU:
        own = _write(tmp_path / "mine" / "flsc-seed1.json", r)
        assert main(["verify", own]) == 3
        out = capsys.readouterr().out
        assert "this machine has no GPU: not rerun. Checked without a rerun: not a shipped" in out
        shutil.copy(source, forged)
        assert main(["verify", forged]) == 3
        assert "Checked without a rerun: a shipped file as shipped" in capsys.readouterr().out


def test_verify_exits_1_for_a_refusal_before_3_for_a_result_not_rerun(fresh, tmp_path, no_gpu):
    gpu = _write(tmp_path / "gpu.json", json.loads(open(SHIPPED_GPU).read()))
    half = _write(tmp_path / "half.json", lowered(json.loads(json.dumps(fresh)), 0.5))
    assert main(["verify", gpu]) == 3
    assert main(["verify", gpu, half]) == main(["verify", half, gpu]) == 1

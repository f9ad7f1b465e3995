"""The shipped paper-scale results: checked, not trusted; and the grid runner."""

import glob
import json
import os

import numpy as np
import pytest
import torch

from hcct_lite.reproduction.paper_grids import GRIDS, current_grid, grid_jobs
from hcct_lite.runs.runner import run_grid
from hcct_lite.runs.store import NOT_COMPARED
from hcct_lite.training.config import make_config
from hcct_lite.training.provenance import compute_version

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "results")
SHIPPED = sorted(glob.glob(os.path.join(RESULTS, "*", "*.json")))
# What a grid may change in a task's Table III settings, each said in docs/reproduction.md:
# the offline Digit domains, and what a figure, ablation or study grid varies by design.
DOCUMENTED = {
    "schemes-fmnist": set(),
    "schemes-rotated-digits": set(),
    "schemes-cifar10": set(),
    "schemes-digit": {"domains"},
    "fmnist-network": {"model"},
    "motivating": {"partition"},
    "ablation-digit": {"domains", "update_includes_buffers", "record_cosines"},
    "incoming-cifar10": {"n_clients", "initial_clients", "join_every", "new_clients"},
    "alpha-cifar10": {"alpha", "train_ratio"},
    "fixed-k-digit": {"domains", "n_clients", "fixed_groups"},
    "k-vs-n-digit": {"domains", "n_clients", "fixed_groups"},
    "buffers-rotated": {"model", "epochs", "update_includes_buffers", "record_cosines"},
    "small-clients-rotated": {
        "n_clients",
        "samples",
        "alpha",
        "epochs",
        "cluster_models",
        "local_epochs",
    },
    "alpha-scale-rotated": {"alpha"},
    "fixed-k-rotated": {"fixed_groups"},
}


def _load(path):
    with open(path) as f:
        return json.load(f)


def _job_of(result):
    jobs = {j.name: j for j in grid_jobs([current_grid(result["grid"])], seeds=[result["seed"]])}
    return jobs[result["name"]]


def test_results_are_shipped():
    assert len(SHIPPED) >= 45, "results/ should hold the shipped grids"
    assert set(DOCUMENTED) == set(GRIDS)


def _shipped_problem(path):
    """Why one shipped result file is not its grid's Table III run but for the documented
    differences (the first check it fails), or None when it is."""
    try:
        r = _load(path)
        job = _job_of(r)
        grid = current_grid(r["grid"])
        if not set(job.overrides) <= DOCUMENTED[grid]:
            return f"overrides {sorted(set(job.overrides) - DOCUMENTED[grid])} not documented"
        expected = make_config(job.task, job.scheme, job.seed, **job.overrides).to_dict()
        stored = dict(r["config"])
        # where and how a run ran (device, CUDA graphs) is not what it computed
        for how in NOT_COMPARED:
            stored.pop(how, None), expected.pop(how, None)
        # every setting that changes the computation is stated: no gap is filled
        if set(stored) != set(expected):
            return f"settings stored and expected differ: {sorted(set(expected) ^ set(stored))}"
        if not (expected["norm_limit"] == 0.0 and expected["aggregator"] == "mean"):  # the paper's
            return f"expected norm_limit {expected['norm_limit']}, {expected['aggregator']}"
        if stored["norm_limit"] != 0.0:  # ran under the norm rule, which refused no reply: the
            if r["rejected"] != []:  # run without it (runs/store.py), as the report says
                return f"norm rule {stored['norm_limit']} refused {r['rejected']}"
            stored["norm_limit"] = 0.0
        if stored != expected:
            return "config differs: " + ", ".join(
                f"{k} {stored.get(k)!r} (expected {expected.get(k)!r})"
                for k in sorted(set(stored) | set(expected))
                if stored.get(k) != expected.get(k)
            )
        prov = r["provenance"]
        if not (prov["code_commit"] and prov["torch"] and prov["device"]):
            return "provenance lacks code_commit, torch or device"
        if prov["compute_version"] != compute_version(make_config(**r["config"])):
            return f"compute_version {prov['compute_version']!r} is not its config's"
        if "update_cosines" in json.dumps(r["history"][2:]):  # kept small
            return "update_cosines recorded past the second epoch"
    except Exception as e:  # unreadable, or naming no run of its grid: bad too, said so
        return f"{type(e).__name__}: {e}"
    return None


def test_every_shipped_config_is_table3_but_for_documented_differences():
    """One audit of every file in results/: a failure names each bad file and its problem."""
    assert SHIPPED, "results/ holds no result files"
    problems = {os.path.relpath(p, RESULTS): _shipped_problem(p) for p in SHIPPED}
    bad = [f"{name}: {why}" for name, why in problems.items() if why is not None]
    assert not bad, f"{len(bad)} of {len(SHIPPED)} shipped files fail:\n" + "\n".join(bad)


def test_a_fresh_clone_plans_no_run_and_writes_nothing(capsys):
    from hcct_lite.cli import main

    def snapshot():
        return {
            p: (os.path.getmtime(p), open(p, "rb").read())
            for p in glob.glob(os.path.join(RESULTS, "**"), recursive=True)
            if os.path.isfile(p)
        }

    before = snapshot()
    assert main(["reproduce", "--grids", "all", "--dry-run", "--out", RESULTS]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert (
        lines[-1] == f"0 of {len(SHIPPED)} runs to run, {len(SHIPPED)} reused (dry run: "
        "nothing run or written)"
    )
    runs = [m for m in lines[:-1] if m.endswith(")") or ": " in m]
    assert len(runs) == len(SHIPPED) and all(m.startswith("reuse ") for m in runs)
    assert snapshot() == before


def test_maxfl_is_global_on_fmnist_as_in_the_paper():
    def mean_of(scheme):
        runs = [_load(p) for p in glob.glob(os.path.join(RESULTS, "schemes-fmnist", "*.json"))]
        return np.mean([x["final"]["mean"] for x in runs if x["scheme"] == scheme])

    assert abs(mean_of("maxfl") - mean_of("global")) < 2.0


def test_the_committed_report_is_generated_from_the_committed_results():
    from hcct_lite.reproduction.report import render_report

    with open(os.path.join(ROOT, "docs", "reproduction.md")) as f:
        committed = f.read()
    assert committed == render_report(RESULTS), "rerun: hcct-lite reproduce (make reproduce)"


def test_the_report_is_a_short_guide_in_short_sentences():
    """Issue 71: a guide of about 2,500 words, sentences of about 15 words, none over 40."""
    import re

    with open(os.path.join(ROOT, "docs", "reproduction.md")) as f:
        text = f.read()
    assert len(text.split()) <= 2600
    blocks = []  # each bullet, and each paragraph (wrapped over lines), outside tables
    for line in text.splitlines() + [""]:
        if not line.strip() or line.startswith(("|", "#", "![")):
            blocks.append("")
        elif line.lstrip().startswith("- "):
            blocks += [line.lstrip()[2:]]
        else:
            blocks[-1:] = [(blocks[-1] + " " + line) if blocks else line]
    sentences = [s.split() for b in blocks for s in re.split(r"[.!?]\s+", b) if s.strip()]
    longest = max(sentences, key=len)
    assert len(longest) <= 40, " ".join(longest)
    assert np.mean([len(s) for s in sentences]) <= 20
    assert "adjusted Rand" not in text and "kernels: recorded" not in text  # no kernel table


def test_workers_give_the_same_results_as_one_process(tmp_path):
    kw = dict(progress=False, log=None, epochs=3)
    one = run_grid("rotated-digits", ["hcct", "maxfl"], [0, 1], str(tmp_path / "a"), **kw)
    two = run_grid(
        "rotated-digits", ["hcct", "maxfl"], [0, 1], str(tmp_path / "b"), workers=2, **kw
    )
    for a, b in zip(one, two, strict=True):
        assert a["history"] == b["history"] and a["final"] == b["final"]


def test_unknown_grid_is_named():
    with pytest.raises(ValueError, match="unknown grid 'nope'"):
        grid_jobs(["nope"])


def test_provenance_records_the_thread_count_that_reproduces_a_run():
    from hcct_lite.training.provenance import provenance

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert provenance("cpu")["torch_threads"] == 1
    finally:
        torch.set_num_threads(threads)


def test_a_refactor_and_a_new_unused_module_leave_the_shipped_results_reusable(tmp_path):
    import shutil
    import subprocess
    import sys

    code = tmp_path / "hcct_lite"
    shutil.copytree(
        os.path.join(ROOT, "hcct_lite"), code, ignore=shutil.ignore_patterns("__pycache__")
    )
    (code / "schemes" / "unused_extension.py").write_text("def helper(x):\n    return 2 * x\n")
    engine = code / "training" / "engine.py"  # a rename inside the engine
    engine.write_text(engine.read_text().replace("_no_answer", "_why_no_answer"))
    from hcct_lite.training.provenance import compute_fingerprint

    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from hcct_lite.training.provenance import compute_fingerprint "
            "as f; from hcct_lite.cli import main; print(f()); main(['reproduce', '--grids', "
            f"'motivating', 'fixed-k-rotated', '--dry-run', '--out', {RESULTS!r}])",
        ],
        env=dict(os.environ, PYTHONPATH=str(tmp_path)),
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    lines = done.stdout.splitlines()
    assert lines[0] != compute_fingerprint()  # other code text
    assert lines[-1].startswith("0 of 42 runs to run, 42 reused"), done.stdout + done.stderr


def test_the_report_says_which_defences_each_grid_ran_and_what_they_refused():
    from hcct_lite.reproduction.report_tables import defences_ran, grid_status

    rows = {r[0]: r for r in grid_status(RESULTS)}
    assert rows["k-vs-n-digit"][4:] == ["norm rule 20 (57); none (15)", "0"]
    assert rows["schemes-digit"][4:] == ["none", "0"]
    assert rows["schemes-fmnist"][4:] == ["norm rule 20", "0"]

    def run(limit, aggregator="mean"):
        return {"config": {"norm_limit": limit, "aggregator": aggregator}}

    assert defences_ran([run(0.0)] * 3) == "none"
    assert (
        defences_ran([run(0.0, "median"), run(10.0, "median")])
        == "median (1); norm rule 10, median (1)"
    )
    assert defences_ran([run(20.0), run(20.0), run(0)]) == "norm rule 20 (2); none (1)"

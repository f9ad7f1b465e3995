"""The Fig. 3-6 studies and the buffer ablation, on the embedded task.

The notebook and the report draw these from grid runs (``run_jobs``) through the summaries
of :mod:`hcct_lite.lessons.shipped`; the same path is tested here.
"""

import numpy as np

from hcct_lite.reproduction.figure_checks import (
    alpha_ratio_errors,
    fixed_k_summary,
    incoming_curves,
)
from hcct_lite.reproduction.report_tables import ablation_summary
from hcct_lite.runs.jobs import Job, job_path
from hcct_lite.runs.reading import read_results
from hcct_lite.runs.runner import run_jobs


def _runs(tmp_path, variants, **common):
    jobs = [
        Job("study", name, "rotated-digits", "hcct", 0, {**common, **kw}) for name, kw in variants
    ]
    run_jobs(jobs, str(tmp_path), log=None, progress=False)
    return read_results([job_path(str(tmp_path), j) for j in jobs])


def test_incoming_curves_lengths(tmp_path):
    kw = dict(n_clients=8, initial_clients=4, join_every=3, epochs=7)
    runs = _runs(tmp_path, [(f"new{n}-seed0", {"new_clients": n}) for n in (0, 2)], **kw)
    c = incoming_curves(runs)
    assert list(c) == ["0 new per 3 epochs", "2 new per 3 epochs"]
    assert all(len(v) == 7 for v in c.values())
    # the first clients hold the same data in both runs: identical until the first arrival
    assert c["0 new per 3 epochs"][:3] == c["2 new per 3 epochs"][:3]


def test_alpha_ratio_grid_keys(tmp_path):
    v = [
        (f"r{r}-a{a:g}-seed0", {"alpha": a, "train_ratio": r})
        for r in (0.3, 0.5)
        for a in (1.0, 100.0)
    ]
    g = alpha_ratio_errors(_runs(tmp_path, v, epochs=2))
    assert set(g) == {(0.3, 1.0), (0.3, 100.0), (0.5, 1.0), (0.5, 100.0)}
    assert all(0 <= x <= 100 for x in g.values())


def test_fixed_k_forces_k_groups_and_reports_utility(tmp_path):
    runs = _runs(tmp_path, [(f"k{k}-seed0", {"fixed_groups": k}) for k in (1, 4, 8)], epochs=3)
    assert [len(r["history"][-1]["groups"]) for r in runs] == [1, 4, 8]
    ((n, (ks, errors, utils)),) = fixed_k_summary(runs).items()
    assert n == 8 and ks == [1, 4, 8] and len(errors) == 3
    # with every client alone each has utility 1 - alpha / D_i, the largest K here
    assert utils[2] > utils[0]


def test_buffers_ablation_on_a_model_without_batch_norm_changes_nothing(tmp_path):
    v = [
        (f"{label}-seed0", {"update_includes_buffers": flag})
        for label, flag in (("parameters", False), ("buffers", True))
    ]
    out = ablation_summary(_runs(tmp_path, v, epochs=2, record_cosines=True), seed=0)
    a, b = out["parameters"], out["buffers"]
    np.testing.assert_allclose(a["cosines"], b["cosines"])  # no buffers in this model
    assert a["groups"] == b["groups"] and a["final"] == b["final"]

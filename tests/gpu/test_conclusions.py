"""Whether another set of results keeps the shipped conclusions: judged grid by grid."""

import json
import shutil

import pytest

from hcct_lite.gpu.conclusions import compare_sets, table4_spread
from hcct_lite.runs.reading import load_grid
from hcct_lite.training.engine import summarize


@pytest.fixture(scope="module")
def shipped_against_itself():
    return compare_sets("results", "results")


def test_the_shipped_set_keeps_its_own_conclusions(shipped_against_itself):
    out = shipped_against_itself
    assert set(out) == {
        "schemes-digit",
        "schemes-cifar10",
        "incoming-cifar10",
        "alpha-cifar10",
        "fixed-k-digit",
        "k-vs-n-digit",
    }
    for grid, v in out.items():
        assert v["status"] == "complete", grid
        assert v["claims"] and all(a == b for a, b in v["claims"].values()), grid
    rows = out["schemes-digit"]["table4"]
    assert len(rows) == 18 and all(r["within"] for r in rows)


def _copy(grid, tmp_path, keep=None, shift=None):
    (tmp_path / grid).mkdir()
    for r in load_grid("results", grid):
        if keep is not None and not keep(r):
            continue
        if shift and r["scheme"] == shift[0]:  # the scheme's every client, every epoch moved
            for h in r["history"]:
                h["client_test_error"] = [e + shift[1] for e in h["client_test_error"]]
                h["mean_test_error"] += shift[1]
            r["final"] = summarize(r["history"])
        with open(tmp_path / grid / f"{r['name']}.json", "w") as f:
            json.dump(r, f)


def test_a_scheme_moved_beyond_the_seed_spread_is_outside(tmp_path):
    ref = load_grid("results", "schemes-digit")
    spread = max(r["final"]["mean"] for r in ref if r["scheme"] == "global") - min(
        r["final"]["mean"] for r in ref if r["scheme"] == "global"
    )
    _copy("schemes-digit", tmp_path, shift=("global", spread))  # mean + range: beyond the top
    rows = table4_spread(load_grid(str(tmp_path), "schemes-digit"), ref)
    outside = {(r["scheme"], r["protocol"]) for r in rows if not r["within"]}
    assert outside == {("global", "final"), ("global", "best")}


def test_part_of_a_grid_or_none_of_it_is_judged_on_nothing(tmp_path):
    _copy("fixed-k-digit", tmp_path, keep=lambda r: r["seed"] == 0)
    shutil.copytree("results/incoming-cifar10", tmp_path / "incoming-cifar10")
    out = compare_sets(
        str(tmp_path), "results", ["fixed-k-digit", "incoming-cifar10", "k-vs-n-digit"]
    )
    assert out["fixed-k-digit"] == {"status": "11 of 33 runs"}
    assert out["k-vs-n-digit"] == {"status": "missing"}
    assert out["incoming-cifar10"]["status"] == "complete"


def test_a_reference_folder_without_the_grid_is_an_error_not_a_verdict(tmp_path):
    with pytest.raises(ValueError, match="no runs of grid 'k-vs-n-digit' in the reference"):
        compare_sets("results", str(tmp_path), ["k-vs-n-digit"])

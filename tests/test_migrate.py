"""``hcct-lite migrate-results``: older files gain exactly the settings their code ran with and
their compute version, nothing else; unknown code, garbage and contradictions are left as they
are, named; the shipped results need nothing more."""

import copy
import glob
import json
import os

import pytest

from hcct_lite.cli import main
from hcct_lite.runs.store import KNOWN_CODE, SETTINGS_BEFORE, migrate_folder, migrate_result

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "results")


def _shipped(grid, name):
    with open(os.path.join(RESULTS, grid, name)) as f:
        return json.load(f)


def _as_older(r, drop, fingerprint="2f5b3c8a9ed4", commit="68513e3d4f" + "0" * 30):
    """``r`` as code before compute versions and before the settings ``drop`` wrote it."""
    old = copy.deepcopy(r)
    for key in drop:
        old["config"].pop(key)
    old["provenance"].pop("compute_version", None)
    old["provenance"].pop("migrated", None)
    old["provenance"].update(code_fingerprint=fingerprint, code_commit=commit)
    return old


def _without(r, added):
    out = copy.deepcopy(r)
    for key in added:
        out["config"].pop(key)
    out["provenance"].pop("compute_version")
    out["provenance"].pop("migrated")
    return out


def test_an_older_file_gains_what_its_code_did_and_nothing_else():
    r = _shipped("schemes-fmnist", "hcct-seed0.json")
    drop = list(SETTINGS_BEFORE)  # every setting older code lacked
    old = _as_older(r, drop)
    new, why = migrate_result(old)
    assert why.startswith("migrated: norm_limit, aggregator")
    for key in drop:  # what code before the setting did, not today's default
        assert new["config"][key] == SETTINGS_BEFORE[key][0]
    assert new["config"]["norm_limit"] == 0.0
    assert new["provenance"]["compute_version"] == {
        "engine": 1, "task fmnist": 1, "scheme hcct": 1
    }  # fmt: skip
    assert "no norm rule" in new["provenance"]["migrated"]["settings"]["norm_limit"]
    assert _without(new, drop) == old  # nothing else changed
    assert migrate_result(new) == (None, "complete: states every setting and its compute version")


def test_a_setting_the_file_states_is_kept_even_where_it_differs_from_before():
    r = _shipped("schemes-fmnist", "hcct-seed0.json")
    old = _as_older(r, ["aggregator"])
    old["config"]["norm_limit"] = 20.0  # it ran under the rule: that stays
    new, _ = migrate_result(old)
    assert new["config"]["norm_limit"] == 20.0 and new["config"]["aggregator"] == "mean"
    # the run under the rule also uses the defences' code
    assert new["provenance"]["compute_version"]["defences"] == 1


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda r: r["provenance"].update(code_fingerprint="beef"), "code beef is not known"),
        (lambda r: r["provenance"].update(code_fingerprint=None, code_commit="0123456789ab"),
         "code 0123456789 is not known"),
        (lambda r: r["provenance"].update(code_fingerprint=None, code_commit=None),
         "code unknown is not known"),
        (lambda r: r.pop("provenance"), "it has no provenance"),
        (lambda r: r.update(provenance=[1]), "its provenance is list"),
        (lambda r: r["config"].update(batch_size=0), "not a complete result"),
        (lambda r: r["config"].update(norm_limit=1.0), "not a complete result"),
        (lambda r: r.update(status={"state": "stopped", "epoch": 2, "reason": "x"}),
         "a stopped run"),
        (lambda r: r["final"].update(mean=3.0), "not a complete result"),
    ],
)  # fmt: skip
def test_unknown_code_garbage_and_liars_are_not_migrated(change, words):
    old = _as_older(_shipped("schemes-fmnist", "hcct-seed0.json"), ["aggregator"])
    change(old)
    new, why = migrate_result(old)
    assert new is None and why.startswith("not migrated") and words in why, why


def test_a_folder_is_migrated_in_place_once_and_a_dry_run_writes_nothing(tmp_path):
    r = _shipped("motivating", "hcct-seed0.json")
    grid = tmp_path / "motivating"
    grid.mkdir()
    (grid / "hcct-seed0.json").write_text(json.dumps(_as_older(r, ["aggregator"]), indent=1))
    unknown = _as_older(r, ["aggregator"], fingerprint="beef")
    (grid / "hcct-seed1.json").write_text(json.dumps(unknown, indent=1))
    (grid / "broken.json").write_text("{")
    (grid / "notes.txt").write_text("not a result")
    before = {p.name: p.read_bytes() for p in grid.iterdir()}
    logged = []
    counts = migrate_folder(str(tmp_path), dry_run=True, log=logged.append)
    assert counts == {"migrated": 1, "complete": 0, "not migrated": 2}
    assert {p.name: p.read_bytes() for p in grid.iterdir()} == before
    assert any(m.startswith("motivating/broken.json: not migrated: unreadable") for m in logged)
    assert any("hcct-seed1.json: not migrated: code beef" in m for m in logged)
    migrate_folder(str(tmp_path), log=logged.append)
    after = {p.name: p.read_bytes() for p in grid.iterdir()}
    assert after["hcct-seed1.json"] == before["hcct-seed1.json"]
    assert after["broken.json"] == b"{" and after["notes.txt"] == before["notes.txt"]
    assert json.loads(after["hcct-seed0.json"])["config"]["aggregator"] == "mean"
    again = migrate_folder(str(tmp_path), log=logged.append)
    assert again == {"migrated": 0, "complete": 1, "not migrated": 2}
    assert {p.name: p.read_bytes() for p in grid.iterdir()} == after


def test_the_command_exits_1_while_a_file_is_left_and_names_a_missing_folder(tmp_path, capsys):
    grid = tmp_path / "g"
    grid.mkdir()
    (grid / "x.json").write_text("[]")
    assert main(["migrate-results", "--out", str(tmp_path)]) == 1
    assert "g/x.json: not migrated" in capsys.readouterr().out
    assert main(["migrate-results", "--out", str(tmp_path / "nope")]) == 2


def test_every_shipped_result_states_every_setting_and_its_compute_version():
    # the shipped files were migrated by the command; a dry rerun of it finds nothing to do
    logged = []
    counts = migrate_folder(RESULTS, dry_run=True, log=logged.append)
    assert counts["migrated"] == counts["not migrated"] == 0, logged[:5]
    assert counts["complete"] == len(glob.glob(os.path.join(RESULTS, "*", "*.json")))


def test_known_code_is_named_by_fingerprint_or_commit_prefix():
    assert set(KNOWN_CODE) == {"fingerprint", "commit"}
    assert all(len(fp) == 12 for fp in KNOWN_CODE["fingerprint"])
    assert all(len(c) == 10 for c in KNOWN_CODE["commit"])
    assert set(KNOWN_CODE["fingerprint"].values()) | set(KNOWN_CODE["commit"].values()) == {1}

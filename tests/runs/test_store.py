"""The result store trusts nothing: every malformed, stopped or foreign file is rerun with a
one-line reason; something that is not a regular file stops the grid before any training."""

import copy
import json
import math
import os
import time

import pytest

from hcct_lite.runs import store
from hcct_lite.runs.runner import run_grid
from hcct_lite.runs.store import check_output_path, clean_temp_files, result_problem

KW = dict(progress=False, epochs=2)


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    """A finished one-file grid: (folder, path, result)."""
    out = tmp_path_factory.mktemp("grid")
    (r,) = run_grid("rotated-digits", ["independent"], [0], str(out), log=None, **KW)
    return out, next(out.rglob("*.json")), r


def _rerun_with(out, path, content):
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    logged = []
    (again,) = run_grid("rotated-digits", ["independent"], [0], str(out), log=logged.append, **KW)
    return again, [m for m in logged if m.startswith("run")]


def _broken(r):
    """(what, a damaged copy of r, words of the reason) for each case of the issue."""
    cases = []

    def case(what, words, change):
        bad = copy.deepcopy(r)
        change(bad)
        cases.append((what, bad, words))

    case("NaN mean", "final mean is nan", lambda b: b["final"].update(mean=float("nan")))
    case("mean as a string", "final mean is '36.5'", lambda b: b["final"].update(mean="36.5"))
    case("final null", "its final is NoneType", lambda b: b.update(final=None))
    case("only a config", "no 'task'", lambda b: [b.pop(k) for k in list(b) if k != "config"])
    case("task differs", "task is 'fmnist' but its config", lambda b: b.update(task="fmnist"))
    case("scheme differs", "scheme is 'hcct' but", lambda b: b.update(scheme="hcct"))
    case(
        "stopped",
        "a stopped run (no client answered)",
        lambda b: b.update(status={"state": "stopped", "epoch": 1, "reason": "no client answered"}),
    )
    case("short history", "1 epochs of history", lambda b: b["history"].pop())
    case(
        "another compute version",
        "of another compute version (commit 0123abcd): its engine is version 0, now 1",
        lambda b: [
            b["provenance"]["compute_version"].update(engine=0),
            b["provenance"].update(code_commit="0123abcd" * 5),
        ],
    )
    case(
        "no compute version",
        "of another compute version (commit",
        lambda b: b["provenance"].pop("compute_version"),
    )
    case(
        "a version as a string",
        "its engine is version '1', now 1",
        lambda b: b["provenance"]["compute_version"].update(engine="1"),
    )
    case(
        "a version as a bool",
        "its engine is version True, now 1",
        lambda b: b["provenance"]["compute_version"].update(engine=True),
    )
    case(
        "a version as a float",
        "its engine is version 1.0, now 1",
        lambda b: b["provenance"]["compute_version"].update(engine=1.0),
    )
    case(
        "a version without its scheme",
        "its scheme independent is version None, now 1",
        lambda b: b["provenance"]["compute_version"].pop("scheme independent"),
    )
    case(
        "versions as a list",
        "its provenance records none",
        lambda b: b["provenance"].update(compute_version=[1, 1, 1]),
    )
    case(
        "a setting not stated",
        "its config does not state norm_limit (written before the setting existed)",
        lambda b: b["config"].pop("norm_limit"),
    )
    # files whose parts contradict each other, or name clients that are not there
    case(
        "final not its history's",
        "its final mean is 1.0; its history says",
        lambda b: b["final"].update(mean=1.0),
    )
    case(
        "last epoch edited",
        "its final client errors are not its last epoch's",
        lambda b: b["history"][-1]["client_test_error"].__setitem__(0, 99.0),
    )
    case(
        "NaN in the history",
        "history epoch 0 holds an error that is not a percentage",
        lambda b: b["history"][0]["client_test_error"].__setitem__(1, float("nan")),
    )
    case(
        "a group naming client 99",
        "history epoch 1's groups name clients outside 0..7",
        lambda b: b["history"][1].update(groups=[[99]]),
    )
    case(
        "a client twice",
        "history epoch 0's groups hold a client in more than 1 group",
        lambda b: b["history"][0].update(groups=[[0, 1], [1, 2]]),
    )
    case(
        "final of 3 of 8 clients",
        "its final client errors are not its last epoch's",
        lambda b: b["final"].update(client_test_error=b["final"]["client_test_error"][:3]),
    )
    case(
        "an epoch without errors",
        "history epoch 1 must give 8 client errors",
        lambda b: b["history"][1].pop("client_test_error"),
    )
    case(
        "best epoch garbage",
        "its final best_over_epochs mean is 'x'",
        lambda b: b["final"]["best_over_epochs"].update(mean="x"),
    )
    case("no sizes", "its sizes must list the 8 clients", lambda b: b.pop("sizes"))
    case("no domains", "its domains must list the 8 clients", lambda b: b.pop("domains"))
    case(
        "a config no run accepts",
        "its config is not one a run accepts",
        lambda b: [d.update(batch_size=0) for d in (b["config"],)],
    )
    case(
        "no client ever answered",
        "its history holds no error to summarise",
        lambda b: (
            [h.update(client_test_error=[None] * 8) for h in b["history"]]
            + [b["final"].update(client_test_error=[])]
        ),
    )
    case(
        "provenance a string",
        "its provenance is str, not an object",
        lambda b: b.update(provenance="cpu"),
    )
    return cases


def test_every_malformed_stopped_or_foreign_result_is_rerun_naming_why(done):
    out, path, first = done
    for what, bad, words in _broken(first):
        again, reruns = _rerun_with(out, path, bad)
        assert len(reruns) == 1 and words in reruns[0], (what, reruns)
        assert again["final"] == first["final"], what
        assert json.loads(path.read_text())["final"] == first["final"]


def test_unreadable_files_are_rerun(done):
    out, path, first = done
    for content in ("", "{", "[]", "null", "[" * 100_000 + "]" * 100_000):
        again, reruns = _rerun_with(out, path, content)
        assert len(reruns) == 1 and again["final"] == first["final"], content


def test_another_compute_version_is_reused_only_when_asked_and_then_named(done):
    out, path, first = done
    foreign = copy.deepcopy(first)
    foreign["provenance"]["compute_version"]["scheme independent"] = 0
    foreign["timing"]["seconds"] = 1.25  # a different number shows which file was used
    path.write_text(json.dumps(foreign))
    logged = []
    (reused,) = run_grid(
        "rotated-digits", ["independent"], [0], str(out), log=logged.append, reuse_older=True, **KW
    )
    assert reused["timing"]["seconds"] == 1.25
    assert any(m.startswith("reuse") and "of another compute version" in m for m in logged)
    path.write_text(json.dumps(first))


def test_a_setting_a_file_does_not_state_is_never_filled_from_the_defaults(done):
    # older code ran without the setting: what it did is not today's default (the norm
    # rule was off before it existed), so no gap is filled, even with --reuse-older
    out, path, first = done
    for key in ("norm_limit", "aggregator", "alpha"):
        foreign = copy.deepcopy(first)
        del foreign["config"][key]
        path.write_text(json.dumps(foreign))
        logged = []
        run_grid(
            "rotated-digits",
            ["independent"],
            [0],
            str(out),
            log=logged.append,
            reuse_older=True,
            **KW,
        )
        assert any(m.startswith("run") and f"does not state {key}" in m for m in logged), logged
    path.write_text(json.dumps(first))


def test_an_extension_installed_since_leaves_older_results_reusable_at_its_default(
    done, monkeypatch
):
    import sys
    import types

    from hcct_lite import parts

    out, path, first = done
    mine = types.ModuleType("hcct_test_mine")  # an extension with one setting, installed now
    mine.SETTINGS, mine.check = {"mine_mu": 0.5}, lambda cfg: None
    monkeypatch.setitem(sys.modules, "hcct_test_mine", mine)
    monkeypatch.setattr(parts, "_REGISTRY", copy.deepcopy(parts._REGISTRY))
    parts.register("settings", "mine", "hcct_test_mine:SETTINGS", "mine")
    parts.register("check", "mine", "hcct_test_mine:check", "mine")
    monkeypatch.setattr(parts, "extensions", lambda: {"mine": "hcct-mine 1.0"})

    def reused(**kw) -> list:
        logged = []
        run_grid("rotated-digits", ["independent"], [0], str(out), log=logged.append, **KW, **kw)
        path.write_text(json.dumps(first))  # a rerun overwrote it: back to the older file
        return logged

    logged = reused()
    assert any(m.startswith("reuse") and "mine_mu at its default" in m for m in logged), logged
    # another value than the default: the older run did not run that way
    logged = reused(mine_mu=0.7)
    assert any(m.startswith("run") and "does not state mine_mu" in m for m in logged), logged
    # a result made with the extension installed states its setting, or is rerun
    with_it = copy.deepcopy(first)
    with_it["provenance"]["extensions"] = {"mine": "hcct-mine 1.0"}
    path.write_text(json.dumps(with_it))
    logged = []
    run_grid("rotated-digits", ["independent"], [0], str(out), log=logged.append, **KW)
    assert any(m.startswith("run") and "does not state mine_mu" in m for m in logged), logged
    path.write_text(json.dumps(first))
    # a setting of this package's own parts is never filled in (the norm rule's test above)
    monkeypatch.setattr(parts, "extensions", lambda: {})
    logged = reused()
    assert any(m.startswith("run") and "does not state mine_mu" in m for m in logged), logged


def test_refactors_leave_results_reusable_and_a_bumped_version_does_not(done, monkeypatch):
    from hcct_lite.runs.store import reuse_decision
    from hcct_lite.schemes.baselines import Independent
    from hcct_lite.schemes.hcct import HCCT
    from hcct_lite.training import provenance
    from hcct_lite.training.config import make_config

    out, path, first = done
    cfg = make_config("rotated-digits", "independent", 0, epochs=2)
    # the code's text changes (what a refactor, a new module or a rename does): reused
    monkeypatch.setattr(provenance, "compute_fingerprint", lambda: "0" * 12)
    provenance.source_fingerprint.cache_clear()
    ok, why = reuse_decision(str(path), cfg)
    assert ok and why.startswith(
        "same settings and compute version (engine 1, task rotated-digits 1, scheme independent 1"
    )
    # a version bumped on purpose: every part the run uses counts, no other
    parts = (
        (provenance, "ENGINE_VERSION"),
        (Independent, "compute_version"),
        (provenance, "DEFENCES_VERSION"),
        (provenance, "AGGREGATORS_VERSION"),
        (HCCT, "compute_version"),
    )
    for where, attr in parts:
        old = getattr(where, attr)
        monkeypatch.setattr(where, attr, old + 1)
        ok, why = reuse_decision(str(path), cfg)
        used = {
            "DEFENCES_VERSION": provenance.uses_defences(cfg),
            "AGGREGATORS_VERSION": cfg.option("aggregator") != "mean",
        }.get(attr, where is not HCCT)
        assert ok is not used and (ok or f"is version {old}, now {old + 1}" in why), (attr, why)
        monkeypatch.setattr(where, attr, old)


def test_a_file_nested_too_deeply_is_one_sentence(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="its JSON is nested too deeply to be a result"):
        store.load_result(str(deep))


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_folder_or_fifo_where_a_result_belongs_stops_before_training(tmp_path, kind):
    path = tmp_path / "rotated-digits__independent__seed0.json"
    os.mkdir(path) if kind == "folder" else os.mkfifo(path)
    with pytest.raises(ValueError, match="not a result file; move it away"):
        run_grid("rotated-digits", ["independent"], [0], str(tmp_path), log=None, **KW)
    assert os.path.isdir(path) if kind == "folder" else not os.path.isfile(path)


def test_leftover_temporary_files_of_killed_writes_are_cleaned(tmp_path):
    old, fresh, other = (tmp_path / n for n in (".tmp-a.json", ".tmp-b.json", "keep.json"))
    for p in (old, fresh, other):
        p.write_text("{")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    os.utime(other, (time.time() - 3600, time.time() - 3600))
    assert clean_temp_files(str(tmp_path)) == [".tmp-a.json"]
    assert not old.exists() and fresh.exists() and other.exists()


def test_result_problem_accepts_a_finished_run(done):
    assert result_problem(done[2]) is None
    assert "JSON list" in result_problem([])


@pytest.mark.parametrize(
    "path, words",
    [
        ("", "give a file name"),
        ("   ", "give a file name"),
        ("x" * 300 + ".json", "has 305 characters; file systems allow 255"),
        ("/dev/null", "is a character device, not a regular file"),
    ],
)
def test_bad_output_files_are_named(path, words):
    with pytest.raises(ValueError, match=words):
        check_output_path(path, what="--json")


def test_a_fifo_output_is_refused_and_left_alone(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="is a FIFO, not a regular file"):
        check_output_path(str(fifo))
    with pytest.raises(ValueError, match="give a folder name"):
        check_output_path("", folder=True, what="--out")
    from hcct_lite.runs.results import write_json

    with pytest.raises(ValueError, match="not a regular file"):
        write_json(str(fifo), {})
    assert not os.path.isfile(fifo)


def test_the_fingerprint_ignores_comments_and_docstrings():
    from hcct_lite.training.provenance import COMPUTE_PACKAGES, code_text, compute_fingerprint

    assert set(COMPUTE_PACKAGES) == {"partition", "training", "schemes"}
    assert compute_fingerprint() == compute_fingerprint() and len(compute_fingerprint()) == 12
    src = 'def f(a):\n    """Doc."""\n    s = "# kept"  # dropped\n\n    return a * 2\n'
    reworded = src.replace("Doc.", "Other words,\n    on two lines.").replace("dropped", "x")
    assert code_text(src) == code_text(reworded) == 'def f(a):\n    s = "# kept"\n    return a * 2'
    assert code_text(src) != code_text(src.replace("a * 2", "a * 3"))
    assert store.OTHER_CODE == "of another compute version"


@pytest.fixture(scope="module")
def ruled(tmp_path_factory):
    """A finished one-file grid run under the norm rule (20), which refused no reply."""
    out = tmp_path_factory.mktemp("ruled")
    (r,) = run_grid("rotated-digits", ["global"], [0], str(out), log=None, norm_limit=20.0, **KW)
    assert r["rejected"] == []
    return out, next(out.rglob("*.json")), r


def test_a_run_whose_norm_rule_refused_nothing_is_the_run_without_the_rule(ruled, tmp_path):
    out, path, first = ruled
    logged = []
    (reused,) = run_grid("rotated-digits", ["global"], [0], str(out), log=logged.append, **KW)
    assert reused["config"]["norm_limit"] == 20.0  # the file, as it is
    assert any(m.startswith("reuse") and "its norm rule (20) refused no reply" in m for m in logged)
    # the claim the rule rests on: the same run without the rule computes the same numbers
    (without,) = run_grid("rotated-digits", ["global"], [0], str(tmp_path), log=None, **KW)
    assert without["config"]["norm_limit"] == 0.0
    for key in ("history", "final", "rejected", "sizes", "aggregation"):
        assert without[key] == first[key], key


@pytest.mark.parametrize(
    "change, ask, words",
    [
        # a refusal the history does not show is a forged file, not the run without the rule
        (
            lambda b: b.update(rejected=[{"client": 1, "epoch": 0, "reason": "x"}]),
            {},
            "its rejected says client 1's reply was refused in epoch 0",
        ),
        (lambda b: b.pop("rejected"), {}, "its norm_limit is 20.0"),
        (lambda b: b.update(rejected="[]"), {}, "its rejected is str, not a list"),
        (lambda b: b.update(rejected={}), {}, "its rejected is dict, not a list"),
        (lambda b: None, {"norm_limit": 10.0}, "its norm_limit is 20.0, the run asks for 10.0"),
        (
            lambda b: b["config"].update(norm_limit=0.0),
            {"norm_limit": 20.0},
            "its norm_limit is 0.0, the run asks for 20.0",
        ),
    ],
)
def test_a_refusal_or_another_rule_is_never_read_as_the_run_without_it(ruled, change, ask, words):
    from hcct_lite.runs.store import reuse_decision
    from hcct_lite.training.config import make_config

    out, path, first = ruled
    bad = copy.deepcopy(first)
    change(bad)
    path.write_text(json.dumps(bad))
    try:
        ok, why = reuse_decision(
            str(path), make_config("rotated-digits", "global", 0, epochs=2, **ask)
        )
    finally:
        path.write_text(json.dumps(first))
    assert not ok and words in why, why


RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "results")


def test_every_shipped_file_is_listed_with_its_digest():
    """One digest list of the shipped files, which verify and reuse both check."""
    import glob

    listed = json.loads(store.SHIPPED_DIGESTS.read_text())
    files = sorted(glob.glob(os.path.join(RESULTS, "*", "*.json")))
    names = [os.path.relpath(p, RESULTS).replace(os.sep, "/") for p in files]
    hint = "regenerated results/? run hcct_lite.runs.store.write_shipped_digests()"
    assert sorted(listed) == names, hint
    bad = [
        n
        for n, p in zip(names, files, strict=True)
        if store.digest(json.load(open(p))) != listed[n]
    ]
    assert not bad, f"{hint}; changed: {bad}"


def test_a_shipped_file_is_judged_by_its_values_not_its_layout(tmp_path, monkeypatch):
    """Indents and line ends leave it as shipped; one value one bit away does not."""
    monkeypatch.setenv("HCCT_RESULTS", str(tmp_path))
    r = json.load(open(os.path.join(RESULTS, "schemes-fmnist", "hcct-seed0.json")))
    path = tmp_path / "schemes-fmnist" / "hcct-seed0.json"
    path.parent.mkdir()
    path.write_text(json.dumps(r, indent=4).replace("\n", "\r\n"))
    assert store.shipped_key(str(path)) == "schemes-fmnist/hcct-seed0.json"
    assert store.shipped_problem(str(path), json.loads(path.read_text())) is None
    loss = r["history"][0]["train_loss"]
    loss[0] = math.nextafter(loss[0], 0.0)
    assert store.shipped_problem(str(path), r).startswith("edited since it was shipped")
    elsewhere = tmp_path / "mine.json"
    assert (
        store.shipped_key(str(elsewhere)) is None
        and store.shipped_problem(str(elsewhere), r) is None
    )


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        (0o660, "other users can edit it (mode 0660: alice, of group"),
        (0o646, "(mode 0646: everyone"),
    ],
)
def test_a_result_others_may_edit_in_place_is_rerun(tmp_path, monkeypatch, mode, words):
    """A 0750 folder keeps others from swapping a file, not from editing one they may write."""
    import grp
    import pwd

    from hcct_lite.runs import files
    from hcct_lite.training.config import make_config

    out = tmp_path / "grid"
    (first,) = run_grid("rotated-digits", ["independent"], [0], str(out), log=None, **KW)
    path = next(out.rglob("*.json"))
    cfg = make_config("rotated-digits", "independent", 0, epochs=2)
    assert store.reuse_decision(str(path), cfg)[0]
    gid = path.stat().st_gid
    alice = pwd.struct_passwd(("alice", "x", 5000, gid, "", "/", "/bin/sh"))  # primary group only
    monkeypatch.setattr(files.pwd, "getpwall", lambda: [alice])
    monkeypatch.setattr(files.grp, "getgrgid", lambda g: grp.struct_group(("g", "x", g, [])))
    path.chmod(mode)
    ok, why = store.reuse_decision(str(path), cfg)
    assert not ok and words in why, why
    logged = []
    (again,) = run_grid("rotated-digits", ["independent"], [0], str(out), log=logged.append, **KW)
    assert any(words in m for m in logged) and again["final"] == first["final"]
    path.chmod(0o640)  # group may read, not write: reused
    assert store.reuse_decision(str(path), cfg)[0]

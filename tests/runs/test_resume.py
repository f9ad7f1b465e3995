"""A grid reuses a result file only when it is readable and was made with the same settings."""

import json

from hcct_lite.runs.runner import run_grid


def test_a_grid_reruns_stale_or_corrupt_files_and_says_which(tmp_path):
    logged = []
    kw = dict(progress=False, log=logged.append, epochs=2)
    (first,) = run_grid("rotated-digits", ["independent"], [0], str(tmp_path), **kw)
    path = next(tmp_path.rglob("*.json"))
    logged.clear()
    run_grid("rotated-digits", ["independent"], [0], str(tmp_path), **kw)
    assert any(m.startswith("reuse") and "same settings and compute version" in m for m in logged)
    # other settings into the same folder: recomputed, never silently reused
    logged.clear()
    (second,) = run_grid(
        "rotated-digits",
        ["independent"],
        [0],
        str(tmp_path),
        progress=False,
        log=logged.append,
        epochs=3,
        lr=0.05,
    )
    assert second["config"]["epochs"] == 3 and len(second["history"]) == 3
    assert any(m.startswith("run") and "its epochs is 2" in m for m in logged)
    for content in ("", "{", "{}", json.dumps({"config": None})):
        path.write_text(content)
        logged.clear()
        (again,) = run_grid("rotated-digits", ["independent"], [0], str(tmp_path), **kw)
        assert again["final"] == first["final"]
        reasons = ("unreadable", "not a complete result")
        assert any(m.startswith("run") and any(w in m for w in reasons) for m in logged), logged


def test_bad_output_paths_fail_before_any_training(tmp_path, capsys):
    from hcct_lite.cli import main

    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    base = ["--task", "rotated-digits", "--epochs", "1", "--quiet"]
    cases = [
        (["run", "--scheme", "hcct", "--json", str(tmp_path), *base], "is a folder"),
        (["run", "--scheme", "hcct", "--json", str(a_file / "out.json"), *base], "cannot write"),
        (["run", "--scheme", "hcct", "--json", "/proc/hcct/out.json", *base], "cannot write"),
        (["compare", "--schemes", "hcct", "--out", str(a_file), *base], "is a file"),
        (["compare", "--schemes", "hcct", "--out", "", *base], "give a folder name"),
        (["run", "--scheme", "hcct", "--json", "", *base], "give a file name"),
        (["run", "--scheme", "hcct", "--json", str(tmp_path / ("x" * 300)), *base], "255"),
        (["run", "--scheme", "hcct", "--json", "/dev/null", *base], "character device"),
        (["reproduce", "--grids", "schemes-fmnist", "--out", str(a_file)], "is a file"),
    ]
    for argv, words in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert words in err and len(err.splitlines()) == 1


def test_the_same_command_twice_gives_the_same_json_outside_timing(tmp_path):
    from hcct_lite.cli import main

    for name in ("a.json", "b.json"):
        argv = ["run", "--task", "rotated-digits", "--scheme", "hcct", "--epochs", "2"]
        assert main([*argv, "--quiet", "--json", str(tmp_path / name)]) == 0
    a, b = (json.loads((tmp_path / n).read_text()) for n in ("a.json", "b.json"))
    assert a.pop("timing") != b.pop("timing")  # wall-clock seconds live only there
    assert json.dumps(a) == json.dumps(b)

"""``reproduce``'s settings for every run (``--norm-limit``) are checked before anything else."""

import subprocess
import sys

import pytest

from hcct_lite.cli import main

RULE = "--norm-limit: norm_limit must be 0 (off) or a factor >= 2"


@pytest.mark.parametrize("limit", ["nan", "inf", "-1", "1.5"])
@pytest.mark.parametrize("mode", [["--list"], ["--dry-run"], ["--quiet"]])
def test_a_bad_norm_limit_is_refused_in_one_line_even_with_list(limit, mode, capsys, tmp_path):
    out = tmp_path / "results"
    argv = ["reproduce", "--grids", "fixed-k-rotated", "--out", str(out), *mode]
    assert main([*argv, "--norm-limit", limit]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing listed
    assert captured.err.startswith(f"hcct-lite: error: {RULE}"), captured.err
    assert len(captured.err.splitlines()) == 1 and f"got {float(limit)!r}" in captured.err
    assert not out.exists()


@pytest.mark.parametrize("limit", ["0", "2", "3.5"])
def test_a_good_norm_limit_still_lists_the_grids(limit, capsys):
    assert main(["reproduce", "--grids", "fixed-k-rotated", "--list", "--norm-limit", limit]) == 0
    assert capsys.readouterr().out.startswith("fixed-k-rotated            12 runs")


def test_the_command_itself_exits_non_zero_without_a_traceback():
    done = subprocess.run(
        [sys.executable, "-m", "hcct_lite.cli", "reproduce", "--norm-limit", "nan", "--list"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"hcct-lite: error: {RULE}")

"""What a researcher met at the command line: --dry-run writes nothing, run pins its CPU
kernels, reproduce is quiet on request, and Ray's lines are plain text naming the node."""

import json
import logging
import os
import platform

import pytest

from hcct_lite.cli import main
from hcct_lite.ray.grid import PlainText, plain_ray_logs, ray_environment, where


def test_compare_dry_run_says_what_it_would_run_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "never-made"
    args = [
        "compare",
        "--task",
        "rotated-digits",
        "--schemes",
        "hcct",
        "global",
        "--seeds",
        "0",
        "1",
        "--epochs",
        "1",
        "--out",
        str(out),
        "--dry-run",
        "--quiet",
    ]
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:4] == [
        f"run rotated-digits__{s}__seed{n}.json: missing"
        for s in ("hcct", "global")
        for n in (0, 1)
    ]
    assert lines[-1] == "4 of 4 runs to run, 0 reused (dry run: nothing run or written)"
    assert not out.exists()


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86-64 kernels")
def test_run_pins_its_cpu_kernels_and_one_thread_in_a_fresh_process(tmp_path, capsys):
    path = tmp_path / "r.json"
    args = [
        "run",
        "--task",
        "rotated-digits",
        "--scheme",
        "hcct",
        "--epochs",
        "2",
        "--quiet",
        "--json",
        str(path),
        "--cpu-capability",
        "default",
    ]
    assert main(args) == 0
    prov = json.loads(path.read_text())["provenance"]
    assert prov["cpu_capability"] == "default" and prov["torch_threads"] == 1
    assert prov["cpu_kernel_env"]["ATEN_CPU_CAPABILITY"] == "default"
    assert "final groups" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # a name not among the kernels is refused by the parser
        main(args[:-1] + ["sse9"])


def test_reproduce_takes_quiet(capsys):
    assert main(["reproduce", "--grids", "fixed-k-rotated", "--dry-run", "--quiet"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("0 of 12 runs to run")


@pytest.mark.parametrize(
    "extra, said",
    [
        (["--deadline", "300"], "--deadline needs --device cuda without --ray"),
        (["--run-log", "runs.jsonl"], "--run-log needs --device cuda"),
        (["--memory-gb", "40", "--device", "cuda", "--ray", "local"], "--memory-gb needs --device"),
        (["--deadline", "nan", "--device", "cuda"], "deadline must be a number of seconds > 0"),
        (["--deadline", "-5", "--device", "cuda"], "deadline must be a number of seconds > 0"),
        (["--memory-gb", "inf", "--device", "cuda"], "memory_gb must be a number of GB > 0"),
        (["--run-log", "/proc/no/such.jsonl", "--device", "cuda"], "--run-log"),
    ],
)
def test_the_gpu_queues_options_are_refused_where_no_queue_runs(capsys, tmp_path, extra, said):
    out = tmp_path / "results"
    args = ["reproduce", "--grids", "fixed-k-rotated", "--quiet", "--out", str(out)]
    assert main(args + extra) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()  # refused before any run, or its folder, is made


def test_a_failed_ray_run_names_its_ray_node():
    node = {"host": "gpu-7", "ip": "10.0.0.7", "ray_node_id": "8d1f0c"}
    assert where(node) == "node gpu-7 (10.0.0.7, Ray node 8d1f0c)"


def test_ray_lines_are_plain_text(monkeypatch):
    # Ray logs the dashboard's address between colour codes
    record = logging.LogRecord(
        "ray",
        logging.INFO,
        __file__,
        1,
        "Connected. View the dashboard at %s%s%s %s%s",
        ("\x1b[1m", "\x1b[32m", "http://10.0.0.1:8265", "\x1b[39m", "\x1b[22m"),
        None,
    )
    assert PlainText().filter(record)
    assert record.getMessage() == "Connected. View the dashboard at http://10.0.0.1:8265 "
    handler = logging.StreamHandler()
    ray_logger = logging.getLogger("ray")
    monkeypatch.setattr(ray_logger, "handlers", [handler])
    plain_ray_logs()
    plain_ray_logs()  # once per handler
    assert sum(isinstance(f, PlainText) for f in handler.filters) == 1
    monkeypatch.setattr(
        os, "environ", {k: v for k, v in os.environ.items() if k != "RAY_COLOR_PREFIX"}
    )
    ray_environment()
    assert os.environ["RAY_COLOR_PREFIX"] == "0"


def test_every_common_option_naming_a_setting_is_passed_on_once():
    from hcct_lite.cli.parser import OVERRIDES, build_parser
    from hcct_lite.training.config import setting_names

    settings = set(setting_names())  # the RunConfig's and the optional parts' settings
    assert len(set(OVERRIDES)) == len(OVERRIDES) and set(OVERRIDES) <= settings
    args = build_parser().parse_args(["run", "--task", "fmnist", "--scheme", "hcct"])
    given_apart = {"task", "scheme", "seed", "partition"}  # parsed before the overrides
    assert set(OVERRIDES) == (set(vars(args)) & settings) - given_apart


@pytest.mark.parametrize(
    ("argv", "start"),
    [
        (["--norm-limit", "1.5"], "--norm-limit: norm_limit must be 0 (off)"),
        (["--lr=-1"], "--lr: lr must be a finite number > 0"),
        (["--epochs", "0"], "--epochs: epochs must be in [1, 100000]"),
        (["--cluster-models", "99"], "--cluster-models: cluster_models must be in [1, 8]"),
        (["--clients", "0"], "--clients: n_clients must be in [1, 10000]"),
    ],
)
def test_a_bad_value_is_refused_in_one_line_naming_the_option_typed(argv, start, capsys):
    from hcct_lite.cli import main

    assert main(["run", "--task", "rotated-digits", "--scheme", "hcct", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hcct-lite: error: {start}") and len(err.splitlines()) == 1


def test_a_message_about_a_setting_not_typed_names_no_option():
    from hcct_lite.cli import _naming_the_option

    assert _naming_the_option("lr must be > 0", ["--epochs", "3"]) == "lr must be > 0"
    assert _naming_the_option("", ["--"]) == ""  # nothing to name
    assert _naming_the_option("epochs must be", [b"--epochs", 3]) == "epochs must be"

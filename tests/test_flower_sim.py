"""HCCT on Flower's simulation engine makes the same decisions as `hcct-lite run`."""

import json

import pytest

pytest.importorskip("flwr")

from hcct_lite.cli import main  # noqa: E402
from hcct_lite.training.config import make_config  # noqa: E402
from hcct_lite.training.engine import run_experiment  # noqa: E402


def test_flower_simulation_matches_the_local_engine(tmp_path, capsys):
    out = tmp_path / "flower.json"
    args = ["--task", "rotated-digits", "--scheme", "hcct", "--seed", "0", "--epochs", "12"]
    assert main(["flower-sim", *args, "--json", str(out), "--quiet"]) == 0
    assert "on Flower" in capsys.readouterr().out
    flower = json.loads(out.read_text())
    local = run_experiment(make_config("rotated-digits", "hcct", 0, epochs=12), progress=False)
    assert flower["runtime"] == "flower"
    assert [h["groups"] for h in flower["history"]] == [h["groups"] for h in local["history"]]
    assert flower["history"][-1]["groups"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert abs(flower["final"]["mean"] - local["final"]["mean"]) < 0.01
    assert flower["sizes"] == local["sizes"]
    assert all(h["missing"] == [] for h in flower["history"])


def test_run_config_maps_to_a_run_config():
    from hcct_lite.flower.common import config_from_run_config, config_from_text, config_to_text

    cfg = config_from_run_config(
        {
            "task": "rotated-digits",
            "scheme": "hcct-p",
            "seed": 3,
            "epochs": 5,
            "n-clients": 4,
            "alpha": -1.0,
            "samples": 0,
            "update-includes-buffers": True,
            "json-out": "x.json",
        }
    )
    assert (cfg.scheme, cfg.seed, cfg.epochs, cfg.n_clients) == ("hcct-p", 3, 5, 4)
    assert cfg.alpha == 50.0 and cfg.samples == 224  # <= 0: the task's default
    assert cfg.update_includes_buffers is True
    assert config_from_text(config_to_text(cfg)) == cfg

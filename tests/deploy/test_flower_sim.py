"""HCCT as Flower apps (in one process, or on Flower's Ray engine) decides as `hcct-lite run`."""

import json

import pytest

pytest.importorskip("flwr")

from hcct_lite.cli import main  # noqa: E402
from hcct_lite.training.config import make_config  # noqa: E402
from hcct_lite.training.engine import run_experiment  # noqa: E402


@pytest.mark.parametrize("engine", ["inline", "ray"])
def test_flower_simulation_matches_the_local_engine(tmp_path, capsys, monkeypatch, engine):
    monkeypatch.setenv("RAY_raylet_start_wait_time_s", "180")  # room on a loaded machine
    out = tmp_path / "flower.json"
    args = ["--task", "rotated-digits", "--scheme", "hcct", "--seed", "0", "--epochs", "12"]
    assert main(["flower-sim", *args, "--engine", engine, "--json", str(out), "--quiet"]) == 0
    assert f"on Flower ({engine})" in capsys.readouterr().out
    flower = json.loads(out.read_text())
    local = run_experiment(make_config("rotated-digits", "hcct", 0, epochs=12), progress=False)
    assert flower["runtime"] == "flower" and flower["engine"] == engine
    assert [h["groups"] for h in flower["history"]] == [h["groups"] for h in local["history"]]
    assert flower["history"][-1]["groups"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert abs(flower["final"]["mean"] - local["final"]["mean"]) < 0.01
    assert flower["sizes"] == local["sizes"]
    assert all(h["missing"] == [] for h in flower["history"])


def test_run_config_maps_to_a_run_config():
    from hcct_lite.deploy.flower.common import (
        config_from_run_config,
        config_from_text,
        config_to_text,
    )

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


def test_a_simulation_that_fails_to_start_is_retried_once(tmp_path, monkeypatch, caplog):
    from hcct_lite.deploy.flower import simulation

    out, calls = tmp_path / "r.json", []

    def flaky(cfg, path, backend_name, verbose, address):
        calls.append(path)
        if len(calls) == 1:
            raise RuntimeError("The current node timed out during startup")
        with open(path, "w") as f:
            json.dump({"runtime": "flower"}, f)

    monkeypatch.setattr(simulation, "_simulate", flaky)
    monkeypatch.setenv("RAY_raylet_start_wait_time_s", "60")  # an earlier call's value
    monkeypatch.delenv("RAY_worker_niceness", raising=False)
    cfg = make_config("rotated-digits", "hcct", 0)
    result = simulation.run_flower_simulation(cfg, str(out), startup_wait=150, engine="ray")
    assert result == {"runtime": "flower", "engine": "ray"}
    assert len(calls) == 2 and "retrying once" in caplog.text
    assert simulation.os.environ["RAY_raylet_start_wait_time_s"] == "150"
    assert simulation.os.environ["RAY_worker_niceness"] == "0"  # silos not starved by load
    assert json.loads(out.read_text()) == result and str(out) not in calls
    monkeypatch.setattr(simulation, "_simulate", lambda *a: None)  # never a result
    stale = tmp_path / "stale.json"  # an earlier run's result where this one is to go
    stale.write_text(json.dumps({"runtime": "flower", "engine": "ray"}))
    with pytest.raises(RuntimeError, match="ended without a result"):
        simulation.run_flower_simulation(cfg, str(stale), engine="ray")
    with pytest.raises(ValueError, match="engine must be one of inline, ray; got 'spark'"):
        simulation.run_flower_simulation(cfg, engine="spark")

"""``hcct-lite flower-sim``: the ServerApp and ClientApps in Flower's simulation engine."""

from __future__ import annotations

import json
import os
import tempfile

__all__ = ["run_flower_simulation"]


def run_flower_simulation(cfg, json_path=None, backend_name="ray", verbose=False) -> dict:
    """Run ``cfg`` with one simulated SuperNode per client; return (and write) the result.

    The result has the same layout as :func:`hcct_lite.training.engine.run_experiment`'s, plus
    ``"runtime": "flower"``.
    """
    from flwr.simulation import run_simulation

    from .client import make_client_app
    from .server import make_server_app

    out = json_path or os.path.join(tempfile.mkdtemp(prefix="hcct-flower-"), "result.json")
    backend_config = {
        "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
        "init_args": {
            "num_cpus": os.cpu_count() or 1,
            "include_dashboard": False,
            "log_to_driver": verbose,
        },
    }
    run_simulation(
        server_app=make_server_app(cfg, out),
        client_app=make_client_app(cfg),
        num_supernodes=cfg.n_clients,
        backend_name=backend_name,
        backend_config=backend_config,
        verbose_logging=verbose,
    )
    if not os.path.exists(out):
        raise RuntimeError("the Flower simulation ended without a result (see its log)")
    with open(out) as f:
        return json.load(f)

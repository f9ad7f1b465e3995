"""``hcct-lite flower-sim``: the ServerApp and ClientApps in one process or on Ray.

Two engines run the same apps. ``inline`` (the default, :mod:`hcct_lite.deploy.inline`)
runs the ServerApp and one ClientApp per silo in this process, every message serialised as
a deployment sends it. ``ray`` is Flower's simulation engine, with long-lived Ray workers.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile

from ...ray.grid import RAY_STARTUP_WAIT, check_reachable, ray_environment
from ...runs.results import write_json

__all__ = ["run_flower_simulation", "RAY_STARTUP_WAIT", "ENGINES"]

log = logging.getLogger("hcct_lite")

ENGINES = ("inline", "ray")


def run_flower_simulation(
    cfg,
    json_path=None,
    backend_name="ray",
    verbose=False,
    startup_wait=None,
    engine="inline",
    ray_address=None,
) -> dict:
    """Run ``cfg`` with one simulated SuperNode per client; return (and write) the result.

    The result has the same layout as :func:`hcct_lite.training.engine.run_experiment`'s, plus
    ``"runtime": "flower"`` and ``"engine"``. ``engine``: ``"inline"`` (one process) or
    ``"ray"`` (Flower's simulation engine). With Ray, ``startup_wait`` is the seconds Ray
    waits for its node to start (default ``HCCT_RAY_STARTUP_WAIT`` or
    :data:`RAY_STARTUP_WAIT`), and a simulation that ends without a result (Ray timed out
    during start-up, say) is retried once, with a log line. ``ray_address`` (``auto`` or
    ``host:port``) runs the silos on that running Ray cluster instead of a new local one.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}; got {engine!r}")
    if ray_address is not None and engine != "ray":
        raise ValueError("--ray-address needs --engine ray")
    if engine == "inline":
        result = _run_inline(cfg)
    else:
        result = _run_ray(cfg, backend_name, verbose, startup_wait, ray_address)
    result["engine"] = engine
    if json_path:
        write_json(json_path, result)
    return result


def _run_ray(cfg, backend_name, verbose, startup_wait, address=None) -> dict:
    """Flower's simulation engine; the result, as the ServerApp wrote it, read back.

    The ServerApp writes to a fresh temporary file, so a result file left by an earlier run
    never passes for this run's.
    """
    # the start-up wait, and workers at nice 0: at Ray's nice 15 beside busy processes the
    # silos starve and never enrol
    ray_environment(startup_wait)
    if address not in (None, "auto"):
        check_reachable(address)
    with tempfile.TemporaryDirectory(prefix="hcct-flower-") as folder:
        return _simulate_with_retry(
            cfg, os.path.join(folder, "result.json"), backend_name, verbose, address
        )


def _simulate_with_retry(cfg, out: str, backend_name: str, verbose: bool, address) -> dict:
    """Run the Ray simulation, once more if it fails or ends without writing ``out``."""
    for attempt in (1, 2):
        try:
            _simulate(cfg, out, backend_name, verbose, address)
        except Exception as err:  # noqa: BLE001 - Ray's start-up fails in many ways
            if attempt == 2:
                raise
            log.warning(
                "the Flower simulation failed (%s: %s); retrying once", type(err).__name__, err
            )
            continue
        if os.path.exists(out) or attempt == 2:
            break
        log.warning("the Flower simulation ended without a result; retrying once")
    if not os.path.exists(out):
        raise RuntimeError("the Flower simulation ended without a result (see its log)")
    with open(out) as f:
        return json.load(f)


def _run_inline(cfg) -> dict:
    from ..inline import InlineGrid
    from .client import make_client_app
    from .server import run_on_grid

    # node ids as a SuperLink draws them are arbitrary; client i is node 1000 + i here
    nodes = {
        1000 + i: {"partition-id": i, "num-partitions": cfg.n_clients} for i in range(cfg.n_clients)
    }
    return run_on_grid(InlineGrid(make_client_app(cfg), nodes), {}, cfg)


def _simulate(cfg, out: str, backend_name: str, verbose: bool, address=None) -> None:
    from flwr.simulation import run_simulation

    from .client import make_client_app
    from .server import make_server_app

    # a running cluster brings its own CPUs (Ray refuses num_cpus when joining one); without
    # an address, "local" starts a new Ray even where one already runs on this machine
    where = {"address": "local", "num_cpus": os.cpu_count() or 1}
    if address is not None:
        where = {"address": address}
    backend_config = {
        "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
        "init_args": {**where, "include_dashboard": False, "log_to_driver": verbose},
    }
    run_simulation(
        server_app=make_server_app(cfg, out),
        client_app=make_client_app(cfg),
        num_supernodes=cfg.n_clients,
        backend_name=backend_name,
        backend_config=backend_config,
        verbose_logging=verbose,
    )

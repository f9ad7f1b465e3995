"""What Flower costs per run and per message, against ``hcct-lite run``.

    python benchmarks/bench_flower.py [--task rotated-digits] [--epochs 6] [--clients 8]

Prints one table: the same run in the engine (``hcct-lite run``) and as Flower apps
(``hcct-lite flower-sim``: in one process, then on Flower's Ray engine), then the cost of
one training message in a fresh ClientApp process, as a SuperNode's default (subprocess)
isolation starts one for every message: cold (the silo builds its rehearsal share) and
warm (it loads its share alone, ``hcct_lite/deploy/flower/silo_data.py``), with the import time
alone beside it. ``benchmarks/bench_deployment.py`` times a whole rehearsal deployment.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

# One training message handled by a fresh process, as Flower's subprocess isolation does.
MESSAGE = r"""
import sys, time
t0 = time.perf_counter()
from flwr.app import ConfigRecord, Context, Message, RecordDict
from hcct_lite.deploy.flower_internals import set_run_identity
from hcct_lite.deploy.flower.client import make_client_app
from hcct_lite.deploy.flower.common import silo_config_text, to_record
from hcct_lite.training.config import make_config
from hcct_lite.training.models import build_model
t1 = time.perf_counter()
set_run_identity(1)
cfg = make_config(sys.argv[1], "hcct", 0, n_clients=int(sys.argv[2]))
node = {"partition-id": 0, "cache-dir": sys.argv[3]}
ctx = Context(run_id=1, node_id=1, node_config=node, state=RecordDict(), run_config={})
content = RecordDict({"model": to_record(build_model(cfg.model).state_dict()),
                      "config": ConfigRecord({"lr": 0.1, "epoch": 0, "keep-head": False,
                                              "config-json": silo_config_text(cfg)})})
reply = make_client_app()(Message(content, dst_node_id=1, message_type="train"), ctx)
assert not reply.has_error(), reply.error
print(f"{t1 - t0:.3f}")
"""


def _message_seconds(task: str, clients: int, cache: str) -> tuple:
    """(wall seconds of the whole process, of which imports) for one training message."""
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", MESSAGE, task, str(clients), cache],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    return time.perf_counter() - t0, float(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="rotated-digits")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--clients", type=int, default=8)
    args = p.parse_args(argv)

    import torch

    from hcct_lite.deploy.flower.simulation import ENGINES, run_flower_simulation
    from hcct_lite.training.config import make_config
    from hcct_lite.training.engine import run_experiment

    torch.set_num_threads(1)
    cfg = make_config(args.task, "hcct", 0, epochs=args.epochs, n_clients=args.clients)
    run_experiment(cfg, progress=False)  # untimed: data and torch warmed for every row
    t0 = time.perf_counter()
    run_experiment(cfg, progress=False)
    engine = time.perf_counter() - t0
    sims = {}
    for engine_name in ENGINES:
        t0 = time.perf_counter()
        run_flower_simulation(cfg, engine=engine_name)
        sims[engine_name] = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as cache:
        cold = _message_seconds(args.task, args.clients, cache)
        warm = _message_seconds(args.task, args.clients, cache)
    print(f"{args.task}, {args.clients} clients, {args.epochs} epochs, HCCT")
    print("| what | seconds | vs hcct-lite run |")
    print("|---|---|---|")
    print(f"| hcct-lite run | {engine:.1f} | 1.0 |")
    for name, sim in sims.items():
        print(f"| hcct-lite flower-sim --engine {name} | {sim:.1f} | {sim / engine:.1f} |")
    print(f"| one training message, fresh process, cold share | {cold[0]:.2f} | |")
    print(f"| one training message, fresh process, warm share | {warm[0]:.2f} | |")
    print(f"| of which imports (torch, flwr, hcct_lite) | {warm[1]:.2f} | |")


if __name__ == "__main__":
    main()

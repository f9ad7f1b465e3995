"""What DP-SGD at the silos costs HCCT, and what it leaves of the leaks of one message.

For each noise multiplier (0: off), HCCT on the rotated digits (8 silos of 112 samples, 30
epochs, every silo training with ``hcct_lite.deploy.privacy.private_train``, the ClientApp's own
DP-SGD) over the seeds: the final mean test error, the partition's agreement with the
silos' true rotations (adjusted Rand over the last 10 epochs), each silo's epsilon after
the run (delta 1e-5); and, through the real ClientApp at every guard's default, one
training message at learning rate 1e-4: the training images the imprint model gives back
(within 0.05 per pixel, of 112) and the label histogram read from a zero model's bias (L1
error in samples, of 112).

    python benchmarks/privacy_cost.py [--sigmas 0 1 2 4] [--seeds 0 1 2] [--workers 2]
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))

from leaks import histogram_from_bias, imprint_model, reconstruct, recovered  # noqa: E402

from hcct_lite.deploy.privacy import DPSettings, private_train  # noqa: E402
from hcct_lite.runs.reading import group_labels  # noqa: E402
from hcct_lite.training.config import make_config  # noqa: E402
from hcct_lite.training.engine import LocalBackend, init_model, run_experiment  # noqa: E402
from hcct_lite.training.models import build_model  # noqa: E402
from hcct_lite.training.tasks import build_clients  # noqa: E402


class PrivateBackend(LocalBackend):
    """Every silo trains with DP-SGD (its account kept per silo, as in its context)."""

    def __init__(self, cfg, clients, model, sigma):
        super().__init__(cfg, clients, model, "cpu")
        self.cfg, self.dp, self.spent = cfg, DPSettings(sigma), {}

    def train(self, starts, lr, epoch):
        out = {}
        for i in sorted(starts):
            seed = self.cfg.seed * 1_000_003 + epoch * 10_007 + i
            out[i], self.spent[i], _ = private_train(
                self.model,
                starts[i],
                self.clients[i],
                lr,
                seed,
                self.cfg.local_epochs,
                self.cfg.batch_size,
                self.dp,
                self.spent.get(i, []),
            )
        return out


def run(sigma: float, seed: int) -> tuple:
    """``(final mean error, adjusted Rand with the rotations, max epsilon)`` of one run."""
    from sklearn.metrics import adjusted_rand_score

    from hcct_lite.deploy.privacy import epsilon

    torch.set_num_threads(1)
    logging.getLogger("hcct_lite").setLevel(logging.ERROR)
    cfg = make_config("rotated-digits", "hcct", seed)
    clients, model = build_clients(cfg), init_model(cfg, 0, "cpu")
    backend = PrivateBackend(cfg, clients, model, sigma) if sigma else None
    r = run_experiment(cfg, progress=False, clients=clients, backend=backend)
    truth = [sorted(set(r["domains"])).index(d) for d in r["domains"]]
    ari = np.mean(
        [
            adjusted_rand_score(truth, group_labels(h["groups"], cfg.n_clients))
            for h in r["history"][-10:]
        ]
    )
    eps = max(epsilon(s, 1e-5) for s in backend.spent.values()) if sigma else 0.0
    return r["final"]["mean"], float(ari), eps


def one_message(sigma: float, batch: int) -> tuple:
    """``(images recovered, histogram L1 error)`` from one message to the real ClientApp."""
    from flwr.app import ConfigRecord, Message, RecordDict

    from hcct_lite.deploy.flower.client import make_client_app
    from hcct_lite.deploy.flower.common import from_record, silo_config_text, to_record
    from hcct_lite.deploy.inline import InlineGrid

    cfg = make_config("rotated-digits", "hcct", 0, batch_size=batch)
    clients, model = build_clients(cfg), build_model(cfg.model)
    node = {"partition-id": 0, "dp-noise-multiplier": sigma}

    def send(state):
        grid = InlineGrid(make_client_app(), {100: node})
        config = ConfigRecord(
            {"lr": 1e-4, "epoch": 0, "config-json": silo_config_text(cfg), "keep-head": False}
        )
        content = RecordDict({"model": to_record(state), "config": config})
        (reply,) = grid.send_and_receive([Message(content, dst_node_id=100, message_type="train")])
        return from_record(reply.content["model"])

    imprint = imprint_model(model, clients[2].x_train.reshape(-1, 64).mean(1).numpy())
    images = clients[0].x_train.reshape(len(clients[0].x_train), -1)
    found = recovered(images, reconstruct(imprint, send(imprint)), 0.05)
    zero = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    n = len(clients[0].y_train)
    got = histogram_from_bias(zero, send(zero), 1e-4, n, -(-n // batch))
    truth = np.bincount(clients[0].y_train.numpy(), minlength=10)
    return found, float(np.abs(got - truth).sum())


def _run(job):
    return job, run(*job)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sigmas", nargs="+", type=float, default=[0.0, 1.0, 2.0, 4.0])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--workers", type=int, default=1)
    a = p.parse_args(argv)
    jobs = [(s, seed) for s in a.sigmas for seed in a.seeds]
    with mp.get_context("spawn").Pool(a.workers) as pool:
        done = dict(pool.imap_unordered(_run, jobs))
    print(
        "| noise multiplier | epsilon after 30 epochs | HCCT error (%) | adjusted Rand with the "
        "rotations | images from one message (batch 8 / 64) | histogram L1 error (batch 8) |"
    )
    print("|---|---|---|---|---|---|")
    for s in a.sigmas:
        err, ari, eps = (np.array([done[(s, seed)][k] for seed in a.seeds]) for k in range(3))
        (img8, hist8), (img64, _) = one_message(s, 8), one_message(s, 64)
        print(
            f"| {s:g} | {eps.max():.1f} | {err.mean():.1f} +- {err.std():.1f} | "
            f"{ari.mean():.2f} | {img8} / {img64} | {hist8:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()

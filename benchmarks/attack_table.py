"""One crafted silo against the honest ones: the norm rule on and off.

Runs the rotated digits (8 silos, 30 epochs) with silo 0 replaced by an attacker and
prints the honest silos' mean final test error (%) per scheme, attack and norm rule
setting. The attacks are the ones a real deployment was hit with:

- ``boost``: the update multiplied by 10^6;
- ``flip``: the update's sign flipped;
- ``boost+flip``: both;
- ``1e37``: one reply (epoch 1) whose every weight is 10^37, finite;
- ``count``: 10^6 training samples declared at enrolment (and reported).

    python benchmarks/attack_table.py [--seeds 0 1 2] [--schemes global fedfa ifca hcct]

The attacker is simulated in process (a wrapper around the local backend): the replies
are the ones a Flower silo could send, and they pass through the same reply screen.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging

import numpy as np
import torch

from hcct_lite.training.config import make_config
from hcct_lite.training.engine import LocalBackend, init_model, run_experiment
from hcct_lite.training.local import update_of
from hcct_lite.training.tasks import build_clients

ATTACKER = 0
ATTACKS = ("clean", "boost", "flip", "boost+flip", "1e37", "count")


class AttackBackend:
    """The local backend, with client ``ATTACKER``'s replies replaced by ``attack``'s."""

    def __init__(self, inner: LocalBackend, attack: str, names):
        self.inner, self.attack, self.names = inner, attack, list(names)
        self.sizes = inner.sizes.copy()
        if attack == "count":
            self.sizes[ATTACKER] = 10**6
        self.domains = inner.domains

    def _crafted(self, r, start, lr, epoch):
        scale = {"boost": 1e6, "flip": -1.0, "boost+flip": -1e6}.get(self.attack)
        state = dict(r.state)
        if scale is not None:
            for k in self.names:
                state[k] = start[k] - (start[k] - state[k]) * scale
        elif self.attack == "1e37" and epoch == 1:
            state = {k: torch.full_like(v, 1e37) if v.is_floating_point() else v
                     for k, v in state.items()}  # fmt: skip
        elif self.attack == "count":
            return dataclasses.replace(r, n_samples=10**6)
        else:
            return r
        return dataclasses.replace(r, state=state, update=update_of(start, state, lr, self.names))

    def train(self, starts, lr, epoch):
        out = self.inner.train(starts, lr, epoch)
        if ATTACKER in out:
            out[ATTACKER] = self._crafted(out[ATTACKER], starts[ATTACKER], lr, epoch)
        return out

    def evaluate(self, states):
        return self.inner.evaluate(states)

    def probe(self, i, state):
        return self.inner.probe(i, state)


def honest_error(scheme: str, attack: str, norm_limit: float, seed: int) -> tuple:
    """Honest silos' mean final error (%) and the run's state ("complete" or "stopped")."""
    cfg = make_config("rotated-digits", scheme, seed, norm_limit=norm_limit)
    model = init_model(cfg, 0, "cpu")
    names = [k for k, _ in model.named_parameters()]
    inner = LocalBackend(cfg, build_clients(cfg), model, "cpu")
    r = run_experiment(cfg, progress=False, backend=AttackBackend(inner, attack, names))
    errors = [e for i, e in enumerate(r["final"]["client_test_error"]) if i != ATTACKER]
    honest = [e for e in errors if e is not None]
    return (float(np.mean(honest)) if honest else float("nan")), r["status"]["state"]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    p.add_argument("--schemes", nargs="+", default=["global", "fedfa", "ifca", "hcct"])
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    logging.getLogger("hcct_lite").setLevel(logging.ERROR)  # the table says it all
    print("| scheme | attack | rule off | rule on (norm_limit 20) |")
    print("|---|---|---|---|")
    for scheme in args.schemes:
        for attack in ATTACKS:
            cells = []
            for clip in (0.0, 20.0):
                runs = [honest_error(scheme, attack, clip, s) for s in args.seeds]
                mean = np.mean([e for e, _ in runs])
                stopped = sum(state != "complete" for _, state in runs)
                cells.append(f"{mean:.1f}" + (f" ({stopped} stopped)" if stopped else ""))
            print(f"| {scheme} | {attack} | {cells[0]} | {cells[1]} |", flush=True)


if __name__ == "__main__":
    main()

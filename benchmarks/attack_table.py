"""Crafted silos against the honest ones, under each aggregator.

Runs the rotated digits (8 silos, 30 epochs, unless the attack names another federation)
with silo 0 (and silo 1 where two collude) replaced by an attacker, and prints the honest
silos' mean final test error (%) per scheme, attack and aggregator (silo 0's seat, and
silo 1's under ``collude-2``, left out of every row), the norm rule at its default (20
times the median, as it stands and per local step) throughout. The attacks:

- ``clean``: no attacker; ``absent``: silo 0 never answers (what losing it costs);
- ``boost``: the update multiplied by 10^6; ``flip``: its sign flipped;
- ``flip-0.9``: sign flipped and stretched to 0.9 times what the norm rule lets through
  (18 times the round's median), knowing every honest reply of the round;
- ``collude-2``: silos 0 and 1 both send ``flip-0.9``;
- ``1e37``: one reply (epoch 1) whose every weight is 10^37, finite;
- ``count``: 10^6 training samples declared at enrolment (and reported);
- ``big-honest``: no attacker; silo 0 holds its samples 32 times over (32x the steps);
- ``2-silos-boost``, ``2-silos-flip``, ``3-silos-boost``, ``3-silos-flip-0.9``: a
  federation of 2 or 3 silos, silo 0 the attacker.

    python benchmarks/attack_table.py [--seeds 0 1 2] [--schemes global fedfa ifca hcct]
        [--aggregators mean trimmed-mean median centered-clip multi-krum] [--workers 2]

The attacker is simulated in process (a wrapper around the local backend): the replies
are the ones a Flower silo could send, and they pass through the same reply screen.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import multiprocessing as mp

import numpy as np
import torch

from hcct_lite.schemes.robust import local_steps, norm_reference
from hcct_lite.training.config import make_config
from hcct_lite.training.engine import LocalBackend, init_model, run_experiment
from hcct_lite.training.local import update_of
from hcct_lite.training.replies import update_norm
from hcct_lite.training.tasks import build_clients

ATTACKER = 0
ATTACKS = (
    "clean", "absent", "boost", "flip", "flip-0.9", "collude-2", "1e37", "count", "big-honest",
    "2-silos-boost", "2-silos-flip", "3-silos-boost", "3-silos-flip-0.9",
)  # fmt: skip
AGGREGATORS = ("mean", "clipped-mean", "trimmed-mean", "median", "centered-clip", "multi-krum")


class AttackBackend:
    """The local backend, with the ``attackers``' replies replaced by ``attack``'s."""

    def __init__(self, inner: LocalBackend, attack: str, names, attackers=(ATTACKER,),
                 norm_limit=20.0, steps=None):  # fmt: skip
        self.inner, self.attack, self.names = inner, attack.split("silos-")[-1], list(names)
        self.attackers, self.norm_limit = list(attackers), norm_limit
        self.steps = steps if steps is not None else np.ones(len(inner.sizes))
        self.sizes = inner.sizes.copy()
        if self.attack == "count":
            self.sizes[ATTACKER] = 10**6
        self.domains = inner.domains

    def _crafted(self, r, start, lr, epoch, stretch):
        scale = {"boost": 1e6, "flip": -1.0, "boost+flip": -1e6}.get(self.attack)
        if self.attack in ("flip-0.9", "collude-2"):
            scale = -stretch / max(update_norm(r.update), 1e-30)
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

    def _stretch(self, out, i) -> float:
        """0.9 x the longest update the norm rule lets silo i send, from the round's replies:
        the rule refuses only what is too long both as it stands and per local step."""
        raw = {j: update_norm(r.update) for j, r in out.items()}
        (ref, _), (ref_step, _) = (
            norm_reference(raw),
            norm_reference({j: n / self.steps[j] for j, n in raw.items()}),
        )
        return 0.9 * self.norm_limit * max(ref, ref_step * self.steps[i])

    def train(self, starts, lr, epoch):
        out = self.inner.train(starts, lr, epoch)
        if self.attack == "absent":
            out.pop(ATTACKER, None)
            return out
        stretch = {i: self._stretch(out, i) for i in self.attackers if i in out}
        for i in stretch:
            out[i] = self._crafted(out[i], starts[i], lr, epoch, stretch[i])
        return out

    def evaluate(self, states):
        return self.inner.evaluate(states)

    def probe(self, i, state):
        return self.inner.probe(i, state)


def _setting(attack: str) -> dict:
    if attack.startswith(("2-silos", "3-silos")):
        return {"n_clients": int(attack[0])}
    return {}


def honest_error(scheme: str, attack: str, aggregator: str, seed: int) -> tuple:
    """Honest silos' mean final error (%) and the run's state ("complete" or "stopped")."""
    cfg = make_config("rotated-digits", scheme, seed, aggregator=aggregator, **_setting(attack))
    model = init_model(cfg, 0, "cpu")
    names = [k for k, _ in model.named_parameters()]
    clients = build_clients(cfg)
    if attack == "big-honest":
        c = clients[ATTACKER]
        clients[ATTACKER] = dataclasses.replace(
            c, x_train=c.x_train.repeat(32, 1, 1, 1), y_train=c.y_train.repeat(32)
        )
    inner = LocalBackend(cfg, clients, model, "cpu")
    attackers = [0, 1] if attack == "collude-2" else [ATTACKER]
    steps = local_steps(inner.sizes, cfg.batch_size, cfg.local_epochs)
    backend = AttackBackend(inner, attack, names, attackers, cfg.norm_limit, steps)
    r = run_experiment(cfg, progress=False, backend=backend)
    # the attackers' seats are left out of every row, clean ones too: the same silos compared
    errors = [e for i, e in enumerate(r["final"]["client_test_error"]) if i not in attackers]
    honest = [e for e in errors if e is not None]
    return (float(np.mean(honest)) if honest else float("nan")), r["status"]["state"]


def _one(job):
    torch.set_num_threads(1)
    logging.getLogger("hcct_lite").setLevel(logging.ERROR)  # the table says it all
    return job, honest_error(*job)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    p.add_argument("--schemes", nargs="+", default=["global", "fedfa", "ifca", "hcct"])
    p.add_argument("--attacks", nargs="+", default=list(ATTACKS), choices=ATTACKS)
    p.add_argument("--aggregators", nargs="+", default=list(AGGREGATORS))
    p.add_argument("--workers", type=int, default=1)
    a = p.parse_args(argv)
    jobs = [(s, at, ag, seed) for s in a.schemes for at in a.attacks for ag in a.aggregators
            for seed in a.seeds]  # fmt: skip
    with mp.get_context("spawn").Pool(a.workers) as pool:
        done = dict(pool.imap_unordered(_one, jobs))
    print("| scheme | attack | " + " | ".join(a.aggregators) + " |")
    print("|---|---|" + "---|" * len(a.aggregators))
    for scheme in a.schemes:
        for attack in a.attacks:
            cells = []
            for ag in a.aggregators:
                runs = [done[(scheme, attack, ag, seed)] for seed in a.seeds]
                stopped = sum(state != "complete" for _, state in runs)
                cell = f"{np.mean([e for e, _ in runs]):.1f}"
                cells.append(cell + (f" ({stopped} stopped)" if stopped else ""))
            print(f"| {scheme} | {attack} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()

"""Colluders against the deployment's defence, through the in-process engine.

Three silos of eight send their own update sign-flipped and stretched 10 times (past the
clip's edge, within the norm rule's 20): every robust rule of a round clips them to the
same length, and multi-Krum leaves out two of eight. The model's own history (its last
movement) is what tells three from five.
"""

import collections
import dataclasses

import numpy as np

from hcct_lite.deploy.defences.robust import Aggregator
from hcct_lite.deploy.flower.common import deployment_defence
from hcct_lite.training.config import make_config
from hcct_lite.training.engine import LocalBackend, init_model, run_experiment
from hcct_lite.training.local import update_of
from hcct_lite.training.tasks import build_clients

COLLUDERS = (0, 1, 2)


class Colluders:
    """The local backend, with the colluders' trained models moved ``factor`` x as far."""

    def __init__(self, inner, names, factor=-10.0):
        self.inner, self.names, self.factor = inner, names, factor

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def train(self, starts, lr, epoch):
        out = self.inner.train(starts, lr, epoch)
        for i in COLLUDERS:
            r, s = out[i], starts[i]
            state = {
                k: s[k] + self.factor * (v - s[k]) if v.is_floating_point() else v
                for k, v in r.state.items()
            }
            out[i] = dataclasses.replace(r, state=state, update=update_of(s, state, lr, self.names))
        return out


def _honest_error(scheme, attacked) -> tuple:
    cfg = make_config("rotated-digits", scheme, 1, epochs=30, **deployment_defence())
    model = init_model(cfg, 0, "cpu")
    names = [k for k, _ in model.named_parameters()]
    backend = LocalBackend(cfg, build_clients(cfg), model, "cpu")
    r = run_experiment(
        cfg, progress=False, backend=Colluders(backend, names) if attacked else backend
    )
    errors = r["final"]["client_test_error"]
    return np.mean([e for i, e in enumerate(errors) if i not in COLLUDERS]), r["aggregation"]


def test_three_colluders_of_eight_are_left_out_by_the_models_history(monkeypatch):
    clean, _ = _honest_error("global", attacked=False)
    attacked, record = _honest_error("global", attacked=True)
    groups = [g for e in record["history_left_out"] for g in e["groups"]]
    left = collections.Counter(i for g in groups for i in g)
    assert set(COLLUDERS) <= set(left)
    honest_left = sum(n for i, n in left.items() if i not in COLLUDERS)
    assert honest_left < min(left[i] for i in COLLUDERS), left  # an honest silo now and then
    # without the history, multi-Krum of eight keeps one of them at the clip's edge each round
    monkeypatch.setattr(Aggregator, "_with_history", lambda self, d, *a: list(range(len(d))))
    unguarded, _ = _honest_error("global", attacked=True)
    assert attacked - clean < 2 and unguarded - clean > 4, (clean, attacked, unguarded)

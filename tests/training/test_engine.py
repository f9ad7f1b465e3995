"""The training engine: every scheme, determinism, resuming grids, incoming clients."""

import json
import os

import numpy as np
import pytest

from hcct_lite.runs.runner import run_grid
from hcct_lite.training.config import SCHEMES, make_config
from hcct_lite.training.engine import run_experiment
from hcct_lite.training.tasks import build_clients

PAIRS = [[0, 1], [2, 3], [4, 5], [6, 7]]


def tiny(scheme, seed=0, **kw):
    kw.setdefault("epochs", 2)
    return run_experiment(make_config("rotated-digits", scheme, seed, **kw), progress=False)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_scheme_runs_two_epochs(scheme):
    r = tiny(scheme)
    assert r["task"] == "rotated-digits" and r["scheme"] == scheme and r["seed"] == 0
    assert len(r["history"]) == 2
    for h in r["history"]:
        assert len(h["client_test_error"]) == 8
        assert all(0.0 <= e <= 100.0 for e in h["client_test_error"])
        assert h["mean_test_error"] == pytest.approx(np.mean(h["client_test_error"]))
        members = sorted(i for g in h["groups"] for i in g)
        if scheme == "flsc":  # soft clusters: every client in exactly soft_groups of them
            assert members == sorted(list(range(8)) * 2)
        else:
            assert members == list(range(8))
    f = r["final"]
    assert f["mean"] == pytest.approx(np.mean(f["client_test_error"]))
    assert f["min"] <= f["mean"] <= f["max"]
    assert f["best_over_epochs"]["mean"] <= f["mean"] + 1e-9
    assert "note" in f["best_over_epochs"]
    assert r["config"]["scheme"] == scheme and r["timing"]["seconds"] > 0
    json.dumps(r)  # JSON-ready


def test_epoch_zero_is_singletons_for_hcct_and_fedavg_with_authors_round0():
    assert tiny("hcct")["history"][0]["groups"] == [[i] for i in range(8)]
    r = tiny("hcct", authors_round0=True)
    assert r["history"][0]["groups"] == [list(range(8))]


def test_same_seed_same_json_and_other_seed_differs():
    a, b, c = tiny("hcct", epochs=3), tiny("hcct", epochs=3), tiny("hcct", seed=1, epochs=3)
    for r in (a, b, c):  # identical apart from timings
        r.pop("timing")
    assert json.dumps(a) == json.dumps(b)
    assert a["final"]["client_test_error"] != c["final"]["client_test_error"]


def test_global_and_independent_are_the_two_extremes():
    assert tiny("global")["history"][-1]["groups"] == [list(range(8))]
    assert tiny("independent")["history"][-1]["groups"] == [[i] for i in range(8)]


def test_hcct_finds_the_rotation_pairs_and_beats_both_extremes():
    means = {s: [] for s in ("hcct", "independent", "global")}
    for seed in (0, 1, 2):
        for s in means:
            r = run_experiment(make_config("rotated-digits", s, seed), progress=False)
            means[s].append(r["final"]["mean"])
            if s == "hcct":
                assert r["history"][-1]["groups"] == PAIRS
    m = {s: np.mean(v) for s, v in means.items()}
    assert m["hcct"] <= min(m["independent"], m["global"])


def test_incoming_clients_join_every_ten_epochs():
    r = tiny("hcct", epochs=21, initial_clients=4, new_clients=2)
    counts = [len(h["client_test_error"]) for h in r["history"]]
    assert counts[:10] == [4] * 10 and counts[10:20] == [6] * 10 and counts[20] == 8
    # a newcomer has no update yet: it trains alone in its first epoch
    assert [4] in r["history"][10]["groups"] and [5] in r["history"][10]["groups"]


def test_record_cosines():
    r = tiny("independent", record_cosines=True)
    c = np.array(r["history"][0]["update_cosines"])
    assert c.shape == (8, 8)
    np.testing.assert_allclose(np.diag(c), 1.0)
    same = np.mean([c[0, 1], c[2, 3], c[4, 5], c[6, 7]])
    other = np.mean([c[0, 2], c[0, 6], c[2, 4], c[4, 6]])
    assert same > other + 0.2


class Killed(Exception):
    pass


def test_grid_resumes_after_a_kill(tmp_path):
    def kill_after_first(msg):
        if msg.startswith("done"):
            raise Killed(msg)

    with pytest.raises(Killed):
        run_grid(
            "rotated-digits",
            ["global", "hcct"],
            [0, 1],
            str(tmp_path),
            progress=False,
            log=kill_after_first,
            epochs=2,
        )
    files = sorted(os.listdir(tmp_path))
    assert files == ["rotated-digits__global__seed0.json"]  # no half-written file
    first = (tmp_path / files[0]).read_text()
    logged = []
    results = run_grid(
        "rotated-digits",
        ["global", "hcct"],
        [0, 1],
        str(tmp_path),
        progress=False,
        log=logged.append,
        epochs=2,
    )
    assert logged[0].startswith("reuse rotated-digits__global__seed0.json")
    assert sum(m.startswith("done") for m in logged) == 3
    assert (tmp_path / files[0]).read_text() == first
    assert [(r["scheme"], r["seed"]) for r in results] == [
        ("global", 0),
        ("global", 1),
        ("hcct", 0),
        ("hcct", 1),
    ]


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"task": "nope"}, "unknown task 'nope'"),
        ({"scheme": "fedprox"}, "unknown scheme 'fedprox'"),
        ({"alpha": -1.0}, "alpha must be >= 0"),
        ({"epochs": 0}, "epochs must be in \\[1, 100000\\]"),
        ({"train_ratio": 1.0}, "train_ratio must be in"),
        ({"soft_groups": 9}, "soft_groups must be in"),
    ],
)
def test_bad_settings(kw, match):
    task = kw.pop("task", "rotated-digits")
    scheme = kw.pop("scheme", "hcct")
    with pytest.raises(ValueError, match=match):
        make_config(task, scheme, 0, **kw)


def test_a_client_too_small_to_split_is_named():
    cfg = make_config("rotated-digits", "hcct", 0, samples=1)
    with pytest.raises(ValueError, match="client 0: only 1 samples, too few to split"):
        run_experiment(cfg, progress=False)


class DroppingBackend:
    """A LocalBackend whose client ``drop`` does not answer in epoch ``epoch``."""

    def __init__(self, inner, drop, epoch):
        self.inner, self.drop, self.epoch = inner, drop, epoch
        self.sizes, self.domains = inner.sizes, inner.domains
        self.now = None

    def train(self, starts, lr, epoch):
        self.now = epoch
        out = self.inner.train(starts, lr, epoch)
        if epoch == self.epoch:
            out.pop(self.drop, None)
        return out

    def evaluate(self, states):
        return self.inner.evaluate(states)

    def probe(self, i, state):
        if self.now == self.epoch - 1 and i == self.drop:
            return None  # silent while the next epoch is planned, too
        return self.inner.probe(i, state)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_scheme_survives_a_client_missing_for_one_epoch(scheme):
    from hcct_lite.training.engine import Backend, LocalBackend, init_model

    cfg = make_config("rotated-digits", scheme, 0, epochs=4)
    inner = LocalBackend(cfg, build_clients(cfg), init_model(cfg, 0, "cpu"), "cpu")
    backend = DroppingBackend(inner, drop=3, epoch=2)
    assert isinstance(backend, Backend)
    r = run_experiment(cfg, progress=False, backend=backend)
    h = r["history"]
    assert h[2]["missing"] == [3] and h[2]["client_test_error"][3] is None
    assert all(3 not in g for g in h[2]["groups"])
    assert h[3]["missing"] == [] and h[3]["client_test_error"][3] is not None
    assert np.isfinite(r["final"]["mean"])


def test_final_errors_are_keyed_by_client_so_a_missing_one_shows():
    from hcct_lite.training.engine import LocalBackend, init_model

    cfg = make_config("rotated-digits", "hcct", 0, epochs=3)
    inner = LocalBackend(cfg, build_clients(cfg), init_model(cfg, 0, "cpu"), "cpu")
    r = run_experiment(cfg, progress=False, backend=DroppingBackend(inner, drop=5, epoch=2))
    f = r["final"]
    assert len(f["client_test_error"]) == 8 and f["client_test_error"][5] is None
    assert f["missing"] == [5]
    answered = [e for i, e in enumerate(f["client_test_error"]) if i != 5]
    assert f["mean"] == pytest.approx(np.mean(answered))
    # each client's best epoch is its own, whatever epoch it missed
    assert f["best_over_epochs"]["client_test_error"][5] is not None
    assert f["best_over_epochs"]["missing"] == []


class GarbledProbeBackend(DroppingBackend):
    """A LocalBackend whose client ``drop`` garbles its probe answers while epoch ``epoch``
    is planned (after training epoch ``epoch - 1``)."""

    def probe(self, i, state):
        if self.now == self.epoch - 1 and i == self.drop:
            return (float("nan"), 0.5)
        return self.inner.probe(i, state)


def test_a_probe_refused_while_an_epoch_is_planned_is_recorded_at_that_epoch():
    from hcct_lite.training.engine import LocalBackend, init_model

    cfg = make_config("rotated-digits", "ifca", 0, epochs=4)
    inner = LocalBackend(cfg, build_clients(cfg), init_model(cfg, 0, "cpu"), "cpu")
    r = run_experiment(cfg, progress=False, backend=GarbledProbeBackend(inner, 1, 2))
    refused = {(x["client"], x["epoch"]) for x in r["rejected"]}
    assert refused == {(1, 2)} and "out of range" in r["rejected"][0]["reason"]
    assert r["history"][2]["missing"] == [1] and r["history"][3]["missing"] == []

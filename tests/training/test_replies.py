"""A silo's reply is input: bad replies are rejected, recorded, and never crash or aggregate."""

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from hcct_lite.deploy.defences.layer import NormRule
from hcct_lite.training.config import SCHEMES, make_config
from hcct_lite.training.engine import LocalBackend, init_model, run_experiment
from hcct_lite.training.local import LocalResult
from hcct_lite.training.replies import Rejected, ReplyScreen, train_problem
from hcct_lite.training.tasks import build_clients

START = {"w": torch.zeros(2, 3), "b": torch.zeros(3), "n": torch.tensor(4)}


def _good(**kw):
    state = {"w": torch.ones(2, 3), "b": torch.ones(3), "n": torch.tensor(5)}
    base = LocalResult(state, {"w": torch.ones(2, 3), "b": torch.ones(3)}, 40, 0.5, 0.9)
    return dataclasses.replace(base, **kw)


BAD = {
    "nan weights": _good(state={**_good().state, "w": torch.full((2, 3), math.nan)}),
    "huge weights": _good(state={**_good().state, "b": torch.full((3,), math.inf)}),
    "wrong shape": _good(state={**_good().state, "w": torch.ones(1)}),
    "wrong dtype": _good(state={**_good().state, "n": torch.tensor(5.0)}),
    "missing key": _good(state={"w": torch.ones(2, 3), "n": torch.tensor(5)}),
    "extra key": _good(state={**_good().state, "x": torch.ones(1)}),
    "no model": _good(state=None),
    "not a tensor": _good(state={**_good().state, "b": [1.0, 1.0, 1.0]}),
    "nan update": _good(update={"w": torch.full((2, 3), math.nan)}),
    "10^12 samples": _good(n_samples=10**12),
    "zero samples": _good(n_samples=0),
    "negative samples": _good(n_samples=-5),
    "fractional samples": _good(n_samples=2.5),
    "text samples": _good(n_samples="many"),
    "nan loss": _good(train_loss=math.nan),
    "negative loss": _good(train_loss=-1.0),
    "accuracy 1.5": _good(train_acc=1.5),
    "unreadable": Rejected("unreadable training reply: KeyError: 'model'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_training_reply_is_rejected_with_a_reason(case):
    screen = ReplyScreen(sizes=[50, 50])
    ok = screen.accepted_training({0: _good(), 1: BAD[case]}, {0: START, 1: START}, 3)
    assert list(ok) == [0]
    ((rej,),) = [screen.rejected]
    assert rej["client"] == 1 and rej["epoch"] == 3 and rej["reason"]
    assert train_problem(_good(), START, 50) is None


def test_a_reply_nobody_asked_for_is_rejected():
    screen = ReplyScreen(sizes=[50, 50])
    assert screen.accepted_training({1: _good()}, {0: START}, 0) == {}
    assert "not sent" in screen.rejected[0]["reason"]


def test_errors_and_probes_out_of_range_are_rejected():
    screen = ReplyScreen(sizes=[10] * 6)
    tested = {0: 12.5, 1: -50.0, 2: 150.0, 3: math.nan, 4: "x", 5: Rejected("garbled")}
    assert screen.accepted_errors(tested, 0) == {0: 12.5}
    assert [r["client"] for r in screen.rejected] == [1, 2, 3, 4, 5]
    answers = {
        0: (0.3, 0.9),
        1: (math.nan, 0.5),
        2: (0.3, 0.0 - 1),
        3: None,
        4: "?",
        5: Rejected("x"),
    }
    probe = screen.checked_probe(lambda i, state: answers[i], 0)
    assert probe(0, None) == (0.3, 0.9)
    assert [probe(i, None) for i in (1, 2, 3, 4, 5)] == [None] * 5
    assert len(screen.rejected) == 5 + 4  # a silent client (None) is not a rejection


def test_each_refusal_is_recorded_at_the_epoch_the_screen_is_given():
    screen = ReplyScreen([50, 50, 50], NormRule(2.0))
    # a norm-rule refusal (client 2's update, 1e4 times the others') in epoch 7
    replies = {i: _good() for i in range(3)}
    replies[2] = _good(update={"w": torch.full((3,), 1e4)})
    assert sorted(screen.accepted_training(replies, dict.fromkeys(replies, START), 7)) == [0, 1]
    screen.accepted_training({0: BAD["nan loss"]}, {0: START}, 2)  # a bad reply, epoch 2
    screen.accepted_errors({1: 150.0, 2: 10.0}, 5)
    probe_9, probe_4 = (screen.checked_probe(lambda i, s: (-1.0, 0.5), t) for t in (9, 4))
    assert probe_9(0, START) is None and probe_4(1, START) is None
    assert [(r["client"], r["epoch"]) for r in screen.rejected] == [
        (2, 7),
        (0, 2),
        (1, 5),
        (0, 9),
        (1, 4),
    ]
    assert "norm rule" in screen.rejected[0]["reason"]
    # a screen holds no epoch of its own: each call says which
    assert "epoch" not in vars(screen)
    with pytest.raises(TypeError, match="epoch"):
        screen.accepted_errors({0: 10.0})


def test_an_overflowing_model_is_the_worst_on_a_probe_not_the_best():
    """A model of 1e37 weights: its logits overflow, and float32 could read its loss as 0."""
    from torch import nn

    from hcct_lite.training.local import evaluate

    model = nn.Linear(4, 3)
    x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))
    huge = {k: torch.full_like(v, 1e37) for k, v in model.state_dict().items()}
    assert evaluate(model, huge, x, y)[0] == math.inf
    big = {k: v * 1e33 for k, v in model.state_dict().items()}  # finite logits beyond 1e30
    assert evaluate(model, big, x, y)[0] == math.inf
    loss, error = evaluate(model, {k: v * 0 for k, v in huge.items()}, x, y)
    assert loss == pytest.approx(math.log(3)) and 0 <= error <= 100
    screen = ReplyScreen(sizes=[10, 10])
    probe = screen.checked_probe(lambda i, s: (math.inf, 0.3) if i == 0 else (-math.inf, 0.3), 0)
    assert probe(0, None) == (math.inf, 0.3) and probe(1, None) is None
    assert [r["client"] for r in screen.rejected] == [1]


class PoisonBackend:
    """A LocalBackend whose client 2 sends NaN weights in epoch 1 and client 3 a -50 % error."""

    def __init__(self, inner):
        self.inner, self.sizes, self.domains = inner, inner.sizes, inner.domains
        self.nan_sent = False  # did a NaN ever reach a client, to train or to test?

    def _watch(self, states):
        self.nan_sent |= any(
            not bool(torch.isfinite(v).all())
            for st in states.values()
            for v in st.values()
            if v.is_floating_point()
        )

    def train(self, starts, lr, epoch):
        self._watch(starts)
        out = self.inner.train(starts, lr, epoch)
        if epoch == 1 and 2 in out:
            bad = {
                k: torch.full_like(v, math.nan) if v.is_floating_point() else v
                for k, v in out[2].state.items()
            }
            out[2] = dataclasses.replace(out[2], state=bad)
        return out

    def evaluate(self, states):
        self._watch(states)
        out = self.inner.evaluate(states)
        if 3 in out:
            out[3] = -50.0
        return out

    def probe(self, i, state):
        return self.inner.probe(i, state)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_poisoned_replies_never_crash_a_run_nor_enter_an_aggregate(scheme):
    cfg = make_config("rotated-digits", scheme, 0, epochs=3)
    inner = LocalBackend(cfg, build_clients(cfg), init_model(cfg, 0, "cpu"), "cpu")
    backend = PoisonBackend(inner)
    r = run_experiment(cfg, progress=False, backend=backend)
    assert r["status"] == {"state": "complete"} and not backend.nan_sent
    reasons = {(x["client"], x["epoch"]): x["reason"] for x in r["rejected"]}
    assert "non-finite" in reasons[(2, 1)]
    assert all("test error -50.0" in reasons[(3, t)] for t in range(3))
    assert 2 in r["history"][1]["missing"] and all(3 in h["missing"] for h in r["history"])
    errors = [e for e in r["history"][-1]["client_test_error"] if e is not None]
    assert len(errors) == cfg.n_clients - 1  # client 3's error is never believed


class SilentBackend(PoisonBackend):
    def train(self, starts, lr, epoch):
        return {} if epoch == 1 else self.inner.train(starts, lr, epoch)

    def evaluate(self, states):
        return self.inner.evaluate(states)


def test_a_run_with_nobody_answering_stops_with_a_status_and_keeps_its_history():
    from hcct_lite.cli.commands import report_run as _report_run

    cfg = make_config("rotated-digits", "hcct", 0, epochs=4)
    inner = LocalBackend(cfg, build_clients(cfg), init_model(cfg, 0, "cpu"), "cpu")
    r = run_experiment(cfg, progress=False, backend=SilentBackend(inner))
    assert r["status"] == {"state": "stopped", "epoch": 1, "reason": "no client answered"}
    assert len(r["history"]) == 2 and np.isfinite(r["final"]["mean"])  # from epoch 0
    assert _report_run("rotated-digits", r) == 1


def test_a_stopped_run_points_at_its_json_only_where_one_was_written(capsys):
    from hcct_lite.cli.commands import report_run

    stopped = {"status": {"state": "stopped", "epoch": 0, "reason": "no client answered"}}
    assert report_run("x", stopped) == 1
    assert "(add --json PATH to keep the partial result)" in capsys.readouterr().err
    assert report_run("x", stopped, "out/run.json") == 1
    assert "(the partial result is in out/run.json)" in capsys.readouterr().err


class LiarBackend(SilentBackend):
    def train(self, starts, lr, epoch):
        out = self.inner.train(starts, lr, epoch)
        if epoch == 1:  # every client claims more samples than it enrolled with
            out = {i: dataclasses.replace(r, n_samples=10**12) for i, r in out.items()}
        return out


def test_a_run_whose_replies_are_all_rejected_says_so():
    cfg = make_config("rotated-digits", "hcct", 0, epochs=3)
    inner = LocalBackend(cfg, build_clients(cfg), init_model(cfg, 0, "cpu"), "cpu")
    r = run_experiment(cfg, progress=False, backend=LiarBackend(inner))
    reason = f"no client answered acceptably ({cfg.n_clients} replies rejected)"
    assert r["status"] == {"state": "stopped", "epoch": 1, "reason": reason}


def _reply(**content):
    return SimpleNamespace(content=content)


def test_the_flower_backend_turns_unreadable_replies_into_rejections():
    pytest.importorskip("flwr")
    from hcct_lite.deploy.flower.common import to_record
    from hcct_lite.deploy.flower.server import FlowerBackend, _enrolment

    assert _enrolment(_reply(info={"partition-id": 1, "num-examples": 40}), 4) == (1, 40)
    for info in (
        {"partition-id": 1, "num-examples": 0},
        {"partition-id": 1, "num-examples": -5},
        {"partition-id": 9, "num-examples": 40},
        {"partition-id": 1},
        {},
    ):
        assert _enrolment(_reply(info=info), 4)[0] is None
    backend = object.__new__(FlowerBackend)  # no Grid: its rounds are stubbed below
    backend.client_of, backend.update_names = {10: 0, 11: 1, 12: 2, 13: 3}, ["w", "b"]
    backend.node_of = {i: n for n, i in backend.client_of.items()}
    start = {"w": torch.zeros(2, 3), "b": torch.zeros(3), "n": torch.tensor(4)}
    good = {"num-examples": 40, "train-loss": 0.5, "train-acc": 0.9}
    replies = {
        10: _reply(model=to_record(_good().state), metrics=good),
        11: _reply(metrics=good),  # no model
        12: _reply(model=to_record({**_good().state, "w": torch.ones(7)}), metrics=good),
        13: _reply(model=to_record(_good().state), metrics={"num-examples": "lots"}),
    }
    backend._round = lambda contents, kind, group="": replies
    out = backend.train({i: start for i in range(4)}, 0.1, 0)
    assert isinstance(out[0], LocalResult)
    assert all(isinstance(out[i], Rejected) for i in (1, 2, 3))
    screen = ReplyScreen(sizes=[50] * 4)
    assert list(screen.accepted_training(out, {i: start for i in range(4)}, 0)) == [0]
    assert len(screen.rejected) == 3


def test_corrupt_data_files_are_named_with_the_data_set(tmp_path, monkeypatch):
    from hcct_lite.training.data import load_dataset

    monkeypatch.setenv("HCCT_DATA_DIR", str(tmp_path))
    for content, words in ((b"garbage", "not an .npz archive"), (b"PK\x03\x04trunc", "corrupt")):
        (tmp_path / "mnist.npz").write_bytes(content)
        with pytest.raises(ValueError, match=f"mnist.npz: the mnist data file is {words}"):
            load_dataset("mnist", download=False)


@pytest.mark.parametrize(
    "args, words",
    [
        (["--lr", "inf"], "lr must be a finite"),
        (["--lr", "nan"], "lr must be a finite"),
        (["--seed", str(2**70)], "seed must be an int in"),
        (["--seed", "-1"], "seed must be"),
    ],
)
def test_bad_cli_numbers_exit_2_with_one_line(args, words, capsys):
    from hcct_lite.cli import main

    argv = ["run", "--task", "rotated-digits", "--scheme", "hcct", "--epochs", "1", "--quiet"]
    assert main([*argv, *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0] and "Traceback" not in err[0]


def test_silos_are_known_by_their_authenticated_node_id():
    pytest.importorskip("flwr")
    from hcct_lite.deploy.flower.server import _silo_nodes, assign_silos

    def enrol(i, n=40):
        return _reply(info={"partition-id": i, "num-examples": n})

    # without silo-nodes: placed by the declared id; two claimants of one id are both refused
    assert assign_silos({7: enrol(0), 8: enrol(1)}, 2) == ({0: 7, 1: 8}, {0: 40, 1: 40}, {})
    node_of, _, unenrolled = assign_silos({7: enrol(0), 9: enrol(0), 8: enrol(1)}, 2)
    assert node_of == {1: 8} and "nodes 7 and 9 both claim partition 0" in unenrolled[0]
    # with silo-nodes: an intruder claiming id 0 is left out, the silos are enrolled
    node_of, _, unenrolled = assign_silos({7: enrol(0), 9: enrol(0), 8: enrol(1)}, 2, [7, 8])
    assert node_of == {0: 7, 1: 8} and unenrolled == {}
    # a listed node declaring another id is refused: that client is missing, and why is said
    node_of, _, unenrolled = assign_silos({7: enrol(0), 8: enrol(0)}, 2, [7, 8])
    assert node_of == {0: 7}
    assert unenrolled == {
        1: "node 8 refused: declares partition-id 0, but silo-nodes makes it client 1"
    }
    _, _, unenrolled = assign_silos({7: enrol(0), 8: enrol(1, n=0)}, 2, [7, 8])
    assert "node 8 refused: num-examples 0 is not a whole number" in unenrolled[1]
    _, _, unenrolled = assign_silos({7: enrol(0)}, 2, connected=3)
    assert unenrolled == {1: "no node enrolled as client 1 (3 node(s) connected)"}
    with pytest.raises(ValueError, match="silo-nodes lists 1 node"):
        assign_silos({7: enrol(0)}, 2, [7])
    assert _silo_nodes("") is None and _silo_nodes("12, 34 56") == [12, 34, 56]
    with pytest.raises(ValueError, match="silo-nodes must list integer node ids"):
        _silo_nodes("12 abc")

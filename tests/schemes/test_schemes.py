"""Server-side aggregation rules of the schemes, on hand-made states."""

import dataclasses

import numpy as np
import pytest
import torch

from hcct_lite.schemes.base import Plan, ServerView, weighted_average
from hcct_lite.schemes.baselines import IFCA, MAXFL, FedFA
from hcct_lite.schemes.hcct import HCCT, HCCTE, HCCTP
from hcct_lite.training.local import LocalResult


def state(v, head, count=0):
    return {
        "body.weight": torch.full((2,), float(v)),
        "fc.weight": torch.full((2,), float(head)),
        "bn.num_batches_tracked": torch.tensor(count),
    }


def result(st, acc=0.5):
    return LocalResult(st, {}, 10, 0.0, acc)


def view(n, sizes, states=None, probe=None, updates=None, train=None):
    """The read-only view a scheme gets: ``states`` and ``updates`` are the caller's dicts,
    seen through it (the engine's, in a run)."""
    return ServerView(
        sizes=np.asarray(sizes),
        init_state=state(0, 0),
        head=["fc.weight"],
        trainable=["body.weight", "fc.weight"],
        probe=probe,
        fresh_state=lambda k: state(k, k),
        train=train,
        active=list(range(n)),
        states={} if states is None else states,
        updates={} if updates is None else updates,
    )


def test_the_view_a_scheme_gets_cannot_be_written():
    held_states, held_updates = {0: state(1, 1)}, {}
    server = view(2, [3, 4], states=held_states, updates=held_updates)
    for name, value in (
        ("active", [0]),
        ("states", {}),
        ("updates", {}),
        ("probe", None),
        ("sizes", np.zeros(2)),
        ("train", None),
    ):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(server, name, value)
    for mapping in (server.states, server.updates, server.init_state):
        with pytest.raises(TypeError):
            mapping[1] = state(9, 9)
    with pytest.raises(TypeError):
        del server.states[0]
    with pytest.raises(ValueError, match="read-only"):
        server.sizes[0] = 10**6  # a scheme cannot inflate a client's weight
    with pytest.raises(AttributeError):
        server.active.append(5)  # a tuple
    with pytest.raises(AttributeError):
        server.new.add(5)  # a frozenset
    assert isinstance(server.absent, frozenset) and server.active == (0, 1)
    # the holder's writes show through: the engine records, the scheme reads
    held_states[1], held_updates[0] = state(2, 2), {"body.weight": torch.ones(2)}
    assert server.states[1]["body.weight"].tolist() == [2.0, 2.0] and 0 in server.updates
    # and the holder's array is its own to write
    sizes = np.array([3, 4])
    view(2, sizes).sizes  # noqa: B018 - building the view must not freeze the caller's array
    sizes[0] = 5
    assert sizes.tolist() == [5, 4]


def test_weighted_average_floats_and_counters():
    avg = weighted_average([state(0, 0, 2), state(4, 8, 5)], [3, 1])
    assert avg["body.weight"].tolist() == [1.0, 1.0]
    assert avg["fc.weight"].tolist() == [2.0, 2.0]
    assert avg["bn.num_batches_tracked"].item() == 3  # round(0.75 * 2 + 0.25 * 5)
    assert avg["bn.num_batches_tracked"].dtype == torch.int64
    with pytest.raises(ValueError, match="weights"):
        weighted_average([state(0, 0)], [-1])
    with pytest.raises(ValueError, match="sum to 0"):
        weighted_average([state(0, 0), state(1, 1)], [0, 0])
    # one state is its own average, whatever its weight (a silo that never enrolled has 0)
    assert weighted_average([state(4, 8, 5)], [0])["fc.weight"].tolist() == [8.0, 8.0]


def test_hcct_p_averages_the_body_and_keeps_each_head():
    server = view(2, [1, 1])
    out = HCCTP(alpha=1.0).aggregate(
        1, server, Plan({}, [[0, 1]]), {0: result(state(0, 10)), 1: result(state(2, 20))}
    )
    assert out[0]["body.weight"].tolist() == out[1]["body.weight"].tolist() == [1.0, 1.0]
    assert out[0]["fc.weight"].tolist() == [10.0, 10.0]
    assert out[1]["fc.weight"].tolist() == [20.0, 20.0]


@pytest.mark.parametrize("scheme", [HCCT, HCCTE])
def test_a_client_whose_model_did_not_move_stays_alone_and_is_named(scheme):
    same = {"body.weight": torch.tensor([1.0, 2.0]), "fc.weight": torch.tensor([1.0, 0.5])}
    updates = {0: same, 1: dict(same), 2: {k: torch.zeros(2) for k in same}}
    server = view(3, [10, 10, 10], updates=updates)
    hcct = scheme(alpha=5.0)  # enough for the two identical clients to pair
    assert hcct.groups(1, server) == [[0, 1], [2]]
    assert hcct.info["unchanged"] == [2] and "total_utility" in hcct.info
    still = view(3, [10, 10, 10], updates={i: updates[2] for i in range(3)})
    assert scheme(alpha=5.0).groups(1, still) == [[0], [1], [2]]


def test_fedfa_weighs_by_minus_log2_accuracy():
    server = view(2, [1, 100])
    out = FedFA().aggregate(
        1,
        server,
        Plan({}, [[0, 1]]),
        {0: result(state(0, 0), acc=0.5), 1: result(state(3, 0), acc=0.25)},
    )
    # weights -log2(.5) = 1 and -log2(.25) = 2: sizes do not matter
    assert out[0]["body.weight"].tolist() == pytest.approx([2.0, 2.0])


def _maxfl_server(global_loss):
    """Two clients; a model whose body is 5 is a reference (loss 0.5 on both clients), any
    other is the global model, with loss ``global_loss[i]`` on client i."""
    calls = []

    def train(starts, lr, epoch):
        calls.append(epoch)
        return {i: result(state(5, 5)) for i in starts}

    def probe(i, st):
        return (0.5 if float(st["body.weight"][0]) == 5 else global_loss[i]), 0.0

    held = {0: state(1, 1), 1: state(2, 2)}  # what the engine holds, the test here
    return view(2, [1, 1], states=held, probe=probe, train=train), held, calls


def test_maxfl_participation_is_stable_while_the_global_model_stays_appealing():
    server, held, calls = _maxfl_server([0.1, 0.9])
    scheme = MAXFL(lr=0.1, local_epochs=1, reference_epochs=3, threshold="reference-loss")
    scheme.setup(server)
    plan = scheme.plan(0, server)
    assert calls == [-1, -2, -3]  # the reference: 3 local epochs, once, on its own streams
    assert scheme.threshold == {0: 0.5, 1: 0.5}
    assert plan.groups == [[0], [1]]
    states = scheme.aggregate(0, server, plan, {i: result(state(1, 1)) for i in plan.start})
    joined = []
    for t in range(1, 6):
        held.update(states)  # the engine's write, seen through the view
        plan = scheme.plan(t, server)
        joined.append(plan.info["participants"])
        trained = {i: result(state(7 if i in joined[-1] else 5, 0)) for i in plan.start}
        states = scheme.aggregate(t, server, plan, trained)
        assert states[0] is scheme.global_state  # members hold the global model
    # client 0 finds the global model appealing every epoch (0.1 < 0.5) and stays, even
    # though the model it holds is that same global model; client 1 never joins
    assert joined == [[0]] * 5
    assert calls == [-1, -2, -3]  # references are never retrained


def test_maxfl_distance_threshold_is_the_papers():
    server, _, _ = _maxfl_server([0.1, 0.1])
    scheme = MAXFL(lr=0.1, local_epochs=1, reference_epochs=1)
    scheme.setup(server)
    scheme.plan(0, server)
    scheme.global_state = state(5, 5)  # equal to the reference: distance 0, not appealing
    assert not scheme.appealing(server, 0)
    scheme.global_state = state(6, 5)  # distance 2 * 1^2 = 2 > loss 0.1
    assert scheme.appealing(server, 0)


def test_ifca_picks_the_cluster_model_with_the_lowest_loss():
    def probe(i, st):
        return abs(float(st["body.weight"][0]) - 2 * i), 0.0

    scheme = IFCA(k=3)
    server = view(3, [1, 1, 1], probe=probe)
    scheme.setup(server)  # cluster models 0, 1, 2 (bodies 0, 1, 2)
    plan = scheme.plan(0, server)
    assert plan.per_client == {0: [0], 1: [2], 2: [2]}
    assert plan.groups == [[0], [1, 2]]


def test_the_authors_fmnist_network_has_dropout_and_a_softmax():
    import torch

    from hcct_lite.training.models import build_model

    x = torch.randn(16, 1, 28, 28)
    torch.random.default_generator.manual_seed(0)
    ours, authors = build_model("fmnist_mlp"), build_model("fmnist_mlp_authors")
    authors.eval()
    probs = authors(x)
    assert torch.allclose(probs.sum(1), torch.ones(16)) and (probs >= 0).all()
    assert not torch.allclose(ours(x).sum(1), torch.ones(16))  # logits
    authors.train()  # dropout 0.5: two passes differ in training mode, not in eval mode
    assert not torch.equal(authors(x), authors(x))
    authors.eval()
    assert torch.equal(authors(x), authors(x))
    assert sorted(authors.state_dict()) == sorted(ours.state_dict())

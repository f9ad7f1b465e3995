"""The in-process Flower grid: messages cross as bytes, a raising silo is an error reply."""

import pytest
import torch

pytest.importorskip("flwr")

from flwr.app import ArrayRecord, ConfigRecord, Message, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402

from hcct_lite.deploy.flower.server import send_and_receive  # noqa: E402
from hcct_lite.deploy.inline import InlineGrid, over_the_wire  # noqa: E402


def _echo_app() -> ClientApp:
    """Doubles the array it receives, counts its calls in its Context, fails on lr < 0."""
    app = ClientApp()

    @app.train()
    def train(msg, context):
        if msg.content["config"]["lr"] < 0:
            raise ValueError("negative learning rate")
        w = torch.from_numpy(msg.content["model"]["w"].numpy()) * 2
        calls = int(context.state["calls"]["n"]) + 1 if "calls" in context.state else 1
        context.state["calls"] = ConfigRecord({"n": calls})
        return Message(
            RecordDict({"model": ArrayRecord({"w": w}), "calls": ConfigRecord({"n": calls})}),
            reply_to=msg,
        )

    return app


def _message(node: int, lr: float = 0.1) -> Message:
    content = RecordDict(
        {"model": ArrayRecord({"w": torch.arange(3.0)}), "config": ConfigRecord({"lr": lr})}
    )
    return Message(content, dst_node_id=node, message_type="train")


def test_a_message_crosses_as_bytes_into_an_independent_copy():
    grid = InlineGrid(_echo_app(), {7: {"partition-id": 0}})
    msg = _message(7)
    copy = over_the_wire(msg)
    assert copy is not msg and copy.content["model"]["w"] is not msg.content["model"]["w"]
    assert copy.object_id == msg.object_id and copy.metadata.dst_node_id == 7
    (reply,) = send_and_receive(grid, [msg], timeout=1.0)
    assert reply.content["model"]["w"].numpy().tolist() == [0.0, 2.0, 4.0]
    assert msg.content["model"]["w"].numpy().tolist() == [0.0, 1.0, 2.0]  # untouched
    assert reply.metadata.reply_to_message_id == msg.metadata.message_id


def test_each_node_keeps_its_context_and_a_raising_silo_replies_with_an_error():
    grid = InlineGrid(_echo_app(), {7: {"partition-id": 0}, 8: {"partition-id": 1}})
    for _ in range(2):
        replies = send_and_receive(grid, [_message(7), _message(8)], timeout=1.0)
    assert [int(r.content["calls"]["n"]) for r in replies] == [2, 2]
    (failed,) = send_and_receive(grid, [_message(8, lr=-1.0)], timeout=1.0)
    assert failed.has_error() and "ValueError: negative learning rate" in failed.error.reason
    assert grid.pull_messages([failed.metadata.reply_to_message_id]) == []  # pulled once
    with pytest.raises(ValueError, match="names no node: 9"):
        grid.push_messages([_message(9)])


@pytest.mark.parametrize(
    "version, inside",
    [
        ("1.42.0", True),
        ("1.42.7.post1", True),
        ("1.43.0.dev20261026", False),  # the nightly of the next release
        ("1.43.0", False),
        ("1.41.9", False),
        ("2.42.0", False),
        ("1.4", False),  # not 1.40-something: a minor read whole
        ("nightly", False),
        ("", False),
        (None, None),  # the installed one
    ],
)
def test_a_flower_outside_the_tested_range_is_named(version, inside):
    import flwr

    from hcct_lite.deploy.flower_internals import FLOWER_REQUIREMENT, version_problem

    problem = version_problem(version)
    if inside is None:
        inside, version = problem is None, flwr.__version__
    assert (problem is None) == inside
    if not inside:
        assert f"Flower {version} is outside" in problem and FLOWER_REQUIREMENT in problem


def test_another_flower_is_warned_about(monkeypatch):
    import flwr

    from hcct_lite.deploy import flower_internals

    monkeypatch.setattr(flwr, "__version__", "1.43.0.dev20261026")
    with pytest.warns(UserWarning, match="1.43.0.dev20261026 is outside"):
        flower_internals.check_flower_version()

"""Flower's Message API in one process: a Grid whose nodes are ClientApps called in place.

``hcct-lite flower-sim``'s default engine. The ServerApp's work
(:func:`~hcct_lite.deploy.flower.server.run_on_grid`) and the ClientApp are a deployment's.
Every message travels as the bytes a SuperLink stores, so neither side touches the other's
objects. Only the transport is replaced: no SuperLink, no Ray, no process per message.
"""

from __future__ import annotations

from flwr.app import Context, RecordDict

from .flower_internals import error_reply, over_the_wire, set_message_id, set_run_identity

__all__ = ["InlineGrid", "over_the_wire"]


class InlineGrid:
    """A Flower ``Grid`` of in-process silos: ``node id -> node config``, all on ``client_app``.

    Parameters
    ----------
    client_app : flwr.clientapp.ClientApp
    node_configs : dict node id -> the node's config (``partition-id``, ``data-path``, ...)
    run_id : the run's id, as the messages carry it

    A ClientApp that raises gives an error reply carrying the exception's message, as a
    SuperNode sends one (the server counts that silo as missing). Each node keeps its
    Flower ``Context`` (its ``state``) from one message to the next.
    """

    def __init__(self, client_app, node_configs: dict, run_id: int = 1):
        set_run_identity(run_id)  # a Message built outside a Flower process needs it
        self.app, self.waiting = client_app, {}
        self.contexts = {
            n: Context(
                run_id=run_id, node_id=n, node_config=dict(c), state=RecordDict(), run_config={}
            )
            for n, c in node_configs.items()
        }

    def get_node_ids(self) -> list:
        """The silos' node ids."""
        return list(self.contexts)

    def push_messages(self, messages) -> list:
        """Deliver each message to its node's ClientApp now; keep the reply for a pull."""
        ids = []
        for msg in messages:
            set_message_id(msg, msg.object_id)  # as a SuperLink sets it
            node = msg.metadata.dst_node_id
            if node not in self.contexts:
                raise ValueError(f"message {msg.metadata.message_id} names no node: {node}")
            received = over_the_wire(msg)
            try:
                reply = self.app(received, self.contexts[node])
            except Exception as err:  # noqa: BLE001 - any failure of the silo's handler
                reply = error_reply(received, f"{type(err).__name__}: {err}")
            set_message_id(reply, reply.object_id)
            self.waiting[msg.metadata.message_id] = over_the_wire(reply)
            ids.append(msg.metadata.message_id)
        return ids

    def pull_messages(self, message_ids) -> list:
        """The replies to ``message_ids`` not pulled yet."""
        return [self.waiting.pop(i) for i in list(message_ids) if i in self.waiting]

    def send_and_receive(self, messages, timeout=None) -> list:
        """Every reply at once (an in-process silo always answers)."""
        return self.pull_messages(self.push_messages(messages))

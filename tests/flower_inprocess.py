"""A Flower Grid whose nodes are ClientApps called in this process (no SuperLink, no Ray).

The server's message handling and the ClientApp's (its mods included) are the real ones;
only the transport is replaced, so a whole federation runs in a second.
"""

from flwr.app import Context, Error, Message, RecordDict
from flwr.supercore.task_identity import TaskIdentity


class InProcessGrid:
    """``node id -> node config`` of the silos; every node runs ``client_app``.

    A ClientApp that raises gives an error reply carrying the exception's message, as a
    SuperNode sends one (the server counts that silo as missing).
    """

    def __init__(self, client_app, node_configs: dict):
        # a Message built outside a Flower process needs the run's identity
        TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
        self.app = client_app
        self.contexts = {
            n: Context(run_id=1, node_id=n, node_config=dict(c), state=RecordDict(), run_config={})
            for n, c in node_configs.items()
        }

    def get_node_ids(self):
        return list(self.contexts)

    def send_and_receive(self, messages, timeout=None):
        replies = []
        for msg in messages:
            try:
                replies.append(self.app(msg, self.contexts[msg.metadata.dst_node_id]))
            except Exception as err:  # noqa: BLE001 - any failure of the silo's handler
                replies.append(Message(Error(code=1, reason=f"{type(err).__name__}: {err}"),
                                       reply_to=msg))  # fmt: skip
        return replies

"""A test-only Flower App: hcct-lite's ServerApp, and its ClientApp with a poisoning mod.

A node whose node config has ``poison="nan"`` replaces every float of the model it sends
back after training with NaN; ``poison="count"`` claims 10^12 training samples. Every
other node behaves as hcct-lite's own ClientApp.
"""

import math

import torch

from hcct_lite.flower.client import make_client_app
from hcct_lite.flower.common import from_record, to_record
from hcct_lite.flower.server import app as server_app


def poison(msg, context, call_next):
    reply = call_next(msg, context)
    kind = str(context.node_config.get("poison", ""))
    if not kind or msg.metadata.message_type != "train" or reply.has_error():
        return reply
    if kind == "nan":
        state = from_record(reply.content["model"])
        bad = {k: torch.full_like(v, math.nan) if v.is_floating_point() else v
               for k, v in state.items()}  # fmt: skip
        reply.content["model"] = to_record(bad)
    elif kind == "count":
        reply.content["metrics"]["num-examples"] = 10**12
    return reply


client_app = make_client_app(mods=[poison])

__all__ = ["client_app", "server_app"]

"""A test-only Flower App: hcct-lite's ServerApp, and its ClientApp with a poisoning mod.

A node whose node config names a ``poison`` corrupts its replies; every other node behaves
as hcct-lite's own ClientApp. Kinds:

- ``nan``: every float of the model sent back after training is NaN;
- ``count``: training replies claim 10^12 samples;
- ``boost``: the training update multiplied by 10^6 (finite);
- ``flip``: the training update multiplied by -10 (within the norm rule's 20 when the
  honest updates are about as long as this silo's own);
- ``free-ride``: training replies send back the model received;
- ``no-model``: training replies lack their model record;
- ``no-metrics``: evaluation replies lack their metrics record;
- ``enrol-zero`` / ``enrol-huge``: the enrolment declares 0 / 9.3e18 samples;
- ``enrol-as-K``: the enrolment declares partition id K;
- ``hang-at-K``: the training message of epoch K hangs (sleeps an hour) before training, as
  a ClientApp stuck on a dead disk or a lock would; every other message is answered;
- ``enrol-million``: the enrolment declares 10^6 samples and training replies report them;
- ``x-28125``: the training update multiplied by -28,125 (no knowledge of any other silo).

Kinds join with ``+`` (``enrol-million+x-28125``: the claim and the flip together).
"""

import math
import time

import torch
from flwr.app import MetricRecord

from hcct_lite.deploy.flower.client import make_client_app
from hcct_lite.deploy.flower.common import from_record, to_record
from hcct_lite.deploy.flower.server import app as server_app


def _train(kind, msg, reply):
    content = reply.content
    if kind == "nan":
        state = from_record(content["model"])
        bad = {
            k: torch.full_like(v, math.nan) if v.is_floating_point() else v
            for k, v in state.items()
        }
        content["model"] = to_record(bad)
    elif kind == "count":
        content["metrics"]["num-examples"] = 10**12
    elif kind == "enrol-million":
        content["metrics"]["num-examples"] = 10**6
    elif kind in ("boost", "flip", "x-28125"):
        scale = {"boost": 1e6, "flip": -10.0, "x-28125": -28125.0}[kind]
        start, end = from_record(msg.content["model"]), from_record(content["model"])
        crafted = {
            k: start[k] - (start[k] - v) * scale if v.is_floating_point() else v
            for k, v in end.items()
        }
        content["model"] = to_record(crafted)
    elif kind == "free-ride":
        content["model"] = msg.content["model"]
    elif kind == "no-model":
        del content["model"]


def _query(kind, reply):
    info = dict(reply.content["info"])
    if kind == "enrol-zero":
        info["num-examples"] = 0
    elif kind == "enrol-huge":
        info["num-examples"] = 9.3e18
    elif kind == "enrol-million":
        info["num-examples"] = 10**6
    elif kind.startswith("enrol-as-"):
        info["partition-id"] = int(kind.removeprefix("enrol-as-"))
    reply.content["info"] = MetricRecord(info)


def poison(msg, context, call_next):
    kind = str(context.node_config.get("poison", ""))
    if kind.startswith("hang-at-") and msg.metadata.message_type == "train":
        if int(msg.content["config"]["epoch"]) == int(kind.removeprefix("hang-at-")):
            time.sleep(3600)
    reply = call_next(msg, context)
    if not kind or reply.has_error():
        return reply
    message_type = msg.metadata.message_type
    for one in kind.split("+"):
        if message_type == "train":
            _train(one, msg, reply)
        elif message_type == "query":
            _query(one, reply)
        elif message_type == "evaluate" and one == "no-metrics":
            del reply.content["metrics"]
    return reply


client_app = make_client_app(mods=[poison])

__all__ = ["client_app", "server_app", "poison"]

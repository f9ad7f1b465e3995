"""The ServerApp: the library's training loop, with Flower ClientApps as its clients.

:class:`FlowerBackend` is a client backend for :func:`hcct_lite.training.engine.run_experiment`.
It sends each client its group's model with the Message API and turns the replies into the
engine's ``LocalResult``. The partition, the aggregation and the schemes are the library's own.
"""

from __future__ import annotations

import logging
import time

import numpy as np
from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.serverapp import Grid, ServerApp
from typing_extensions import override

from ...runs.results import write_json
from ...schemes.registry import SCHEME_CLASSES
from ...training.engine import run_experiment
from ...training.replies import Rejected
from ...training.tasks import task_model
from .common import config_from_run_config, silo_config_text, to_record
from .reading import enrolment, metric, training_result

__all__ = [
    "FlowerBackend",
    "assign_silos",
    "run_on_grid",
    "make_server_app",
    "app",
    "REPORTED_BY_SILOS",
]

# The result's numbers that only the silos can measure: the server records them as sent.
REPORTED_BY_SILOS = [
    "sizes",
    "history[].client_test_error",
    "history[].mean_test_error",
    "history[].train_loss",
    "final",
]

log = logging.getLogger("hcct_lite")

# Seconds between two looks for a round's replies (each look is one request to the SuperLink)
POLL_SECONDS = 0.1


class FlowerBackend:
    """Clients reached through a Flower ``Grid`` (simulation or SuperLink).

    A client that does not answer within ``round_timeout`` is left out of that epoch: it
    keeps its last model and sits out the next partition.

    Parameters
    ----------
    grid : flwr.serverapp.Grid
    cfg : RunConfig shared with the clients (sent with every message)
    round_timeout : seconds to wait for the replies of one round
    wait_nodes : seconds to wait for ``cfg.n_clients`` nodes to connect
    discovery_timeout : seconds to wait for the enrolment replies; each node's first reply
        starts its ClientApp (imports, data loading), so it has its own, generous timeout
    silo_nodes : optional list of N node ids, client i = ``silo_nodes[i]``: silos are then
        known by the identity the SuperLink authenticated, not by the partition id they
        declare (see :func:`assign_silos`)

    Attributes
    ----------
    unenrolled : dict client -> why it has no node (refused or silent enrolment); such a
        client is missing from every round, it does not stop the run
    """

    def __init__(
        self,
        grid: Grid,
        cfg,
        round_timeout: float = 120.0,
        wait_nodes: float = 120.0,
        discovery_timeout: float = 300.0,
        silo_nodes=None,
    ):
        self.grid, self.cfg, self.timeout = grid, cfg, round_timeout
        self.silo_nodes = silo_nodes
        self.discovery_timeout = discovery_timeout
        self.config_text = silo_config_text(cfg)  # only what a silo needs
        # the silo runs no scheme: whether it keeps its own classifier (HCCT-P) is said here
        self.keep_head = bool(SCHEME_CLASSES[cfg.scheme].keep_head)
        model = task_model(cfg)
        self.update_names = (
            list(model.state_dict())
            if cfg.update_includes_buffers
            else [k for k, _ in model.named_parameters()]
        )
        self.node_of, sizes, self.unenrolled = self._discover(wait_nodes)
        self.client_of = {n: i for i, n in self.node_of.items()}
        # a silo that never enrolled declares nothing (0) and is missing from every round
        self.sizes = np.array([sizes.get(i, 0) for i in range(cfg.n_clients)], dtype=np.int64)
        self.domains = [
            f"node {self.node_of[i]}" if i in self.node_of else "not enrolled"
            for i in range(cfg.n_clients)
        ]

    def _discover(self, wait: float):
        deadline = time.monotonic() + wait
        while True:
            nodes = list(self.grid.get_node_ids())
            # with silo-nodes, the listed silos themselves, whatever else has connected
            ready = (
                set(self.silo_nodes) <= set(nodes)
                if self.silo_nodes is not None
                else len(nodes) >= self.cfg.n_clients
            )
            if ready or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        replies = self._round(
            {n: RecordDict() for n in nodes}, "query", timeout=self.discovery_timeout
        )
        return assign_silos(replies, self.cfg.n_clients, self.silo_nodes, len(nodes))

    def _round(self, contents: dict, message_type: str, group: str = "", timeout=None) -> dict:
        """Send ``contents[node]`` to each node; return ``node -> reply`` of those answering.

        Nodes the SuperLink no longer lists as connected are skipped at once, so a client
        that died costs the round timeout once, not every epoch.
        """
        online = set(self.grid.get_node_ids())
        messages = []
        for node, content in contents.items():
            if node not in online:
                continue
            content["config"] = ConfigRecord(
                {
                    **dict(content.get("config", {})),
                    "config-json": self.config_text,
                    "keep-head": self.keep_head,
                }
            )
            messages.append(
                Message(content, dst_node_id=node, message_type=message_type, group_id=group)
            )
        replies = send_and_receive(self.grid, messages, timeout or self.timeout)
        return {r.metadata.src_node_id: r for r in replies if not r.has_error()}

    @override
    def train(self, starts: dict, lr: float, epoch: int) -> dict:
        contents = {
            self.node_of[i]: RecordDict(
                {"model": to_record(st), "config": ConfigRecord({"lr": lr, "epoch": epoch})}
            )
            for i, st in starts.items()
            if i in self.node_of
        }
        replies = self._round(contents, "train", f"epoch-{epoch}")
        out = {}
        for node, reply in replies.items():
            i = self.client_of.get(node)
            if i not in starts:
                continue  # not asked: ignore
            try:  # a silo's reply is input: read field by field, then the engine screens it
                out[i] = training_result(reply.content, starts[i], self.update_names, lr)
            except ValueError as err:
                out[i] = Rejected(f"unreadable training reply: {err}")
        return out

    def _evaluate(self, states: dict, split: str) -> dict:
        """Client -> the records of its evaluation reply (read by the caller)."""
        contents = {
            self.node_of[i]: RecordDict(
                {"model": to_record(st), "config": ConfigRecord({"split": split})}
            )
            for i, st in states.items()
            if i in self.node_of
        }
        replies = self._round(contents, "evaluate")
        return {self.client_of[n]: r.content for n, r in replies.items() if n in self.client_of}

    @override
    def evaluate(self, states: dict) -> dict:
        out = {}
        for i, content in self._evaluate(states, "test").items():
            try:
                out[i] = metric(content, "error")
            except ValueError as err:
                out[i] = Rejected(f"unreadable evaluation reply: {err}")
        return out

    def probe(self, i: int, state: dict):
        """Evaluate ``state`` on client i's training data: ``(loss, accuracy in [0, 1])``.

        ``None`` when the client does not answer (the scheme leaves it out of the epoch);
        a :class:`Rejected` when its answer cannot be read.
        """
        content = self._evaluate({i: state}, "train").get(i)
        if content is None:
            return None
        try:
            return metric(content, "loss"), 1.0 - metric(content, "error") / 100.0
        except ValueError as err:
            return Rejected(f"unreadable probe reply: {err}")


def send_and_receive(grid: Grid, messages: list, timeout: float, poll=POLL_SECONDS) -> list:
    """Push ``messages``; return the replies that arrive within ``timeout`` seconds.

    ``Grid.send_and_receive`` with a short poll: Flower's deployment grid waits 3 s between
    two looks for replies, which made every round of a rehearsal at least that long.
    """
    waiting = set(grid.push_messages(messages))
    deadline = time.monotonic() + timeout
    replies = []
    while waiting:
        got = list(grid.pull_messages(waiting))
        replies += got
        waiting -= {m.metadata.reply_to_message_id for m in got}
        if not waiting or time.monotonic() >= deadline:
            break
        time.sleep(poll)
    return replies


def assign_silos(replies: dict, n_clients: int, silo_nodes=None, connected=None) -> tuple:
    """Map the nodes that answered the enrolment query to clients 0..N-1.

    Parameters
    ----------
    replies : dict node id -> enrolment reply
    n_clients : N
    silo_nodes : optional list of N node ids. With SuperNode authentication a node id is
        bound to a registered key, so client i is node ``silo_nodes[i]``; any other node is
        left out, and a listed node that declares another partition id is refused (its data
        would not be client i's). Without it, nodes are placed by the partition id they
        declare, and two nodes claiming one id are both refused (the server does not guess
        which one is the silo).
    connected : number of nodes connected, for the reasons

    Returns
    -------
    node_of : dict client -> node id, for the clients enrolled
    sizes : dict client -> declared training samples, for the clients enrolled
    unenrolled : dict client -> why it is not enrolled. A client without a node is
        missing from every round; the run goes on without it.
    """
    if silo_nodes is not None and len(silo_nodes) != n_clients:
        raise ValueError(f"silo-nodes lists {len(silo_nodes)} node(s); n-clients is {n_clients}")
    claims, refused = {}, {}
    for node, reply in replies.items():
        i, size = _enrolment(reply, n_clients)
        if i is not None and silo_nodes is not None:
            i, size = _identity(node, i, size, silo_nodes)
        if i is None:
            log.warning("node %s not enrolled: %s", node, size)
            refused[node] = size
            continue
        claims.setdefault(i, []).append((node, size))
    node_of, sizes, unenrolled = {}, {}, {}
    for i, nodes in claims.items():
        if len(nodes) > 1:
            who = " and ".join(str(n) for n, _ in nodes)
            unenrolled[i] = f"nodes {who} both claim partition {i}: neither is enrolled"
        else:
            ((node_of[i], sizes[i]),) = nodes
    seen = f"{connected if connected is not None else len(replies)} node(s) connected"
    if refused and silo_nodes is None:  # which client a refused node meant is unknown
        seen += "; refused: " + "; ".join(f"node {n}: {why}" for n, why in refused.items())
    for i in range(n_clients):
        if i in node_of or i in unenrolled:
            continue
        node = silo_nodes[i] if silo_nodes is not None else None
        unenrolled[i] = (
            f"node {node} refused: {refused[node]}"
            if node in refused
            else f"no node enrolled as client {i} ({seen})"
        )
    for i, why in sorted(unenrolled.items()):
        log.warning("client %d is missing from this run: %s", i, why)
    return node_of, sizes, unenrolled


def _identity(node, i: int, size: int, silo_nodes) -> tuple:
    """``(client, samples)`` of an enrolled node under ``silo-nodes``, or ``(None, why)``."""
    if node not in silo_nodes:
        return None, "not a silo of this run (not in silo-nodes)"
    client = silo_nodes.index(node)
    if client != i:
        return None, f"declares partition-id {i}, but silo-nodes makes it client {client}"
    return i, size


def _enrolment(reply, n_clients: int) -> tuple:
    """``(partition id, samples)`` a node declares, or ``(None, why not)``."""
    return enrolment(reply.content, n_clients)


def _silo_nodes(text: str):
    """The run config's ``silo-nodes`` ("id0 id1 ...", commas allowed) as ints, or None."""
    words = str(text).replace(",", " ").split()
    try:
        return [int(w) for w in words] or None
    except ValueError:
        raise ValueError(f"silo-nodes must list integer node ids; got {text!r}") from None


def run_on_grid(grid: Grid, run_config: dict, cfg=None, round_timeout=None) -> dict:
    """The ServerApp's work: enrol the silos on ``grid``, run the experiment, return the result.

    ``run_config`` is the Flower run config (``round-timeout``, ``discovery-timeout``,
    ``silo-nodes`` and, without ``cfg``, the experiment's settings). A silo that does not
    enrol is missing from every round (the result's ``unenrolled`` says why); the numbers
    only the silos can measure are listed in ``reported_by_silos``.
    """
    rc = dict(run_config)
    c = cfg if cfg is not None else config_from_run_config(rc)
    backend = FlowerBackend(
        grid,
        c,
        round_timeout=round_timeout or float(rc.get("round-timeout", 120.0)),
        discovery_timeout=float(rc.get("discovery-timeout", 300.0)),
        silo_nodes=_silo_nodes(rc.get("silo-nodes", "")),
    )
    result = run_experiment(c, progress=False, backend=backend)
    result["runtime"] = "flower"
    result["unenrolled"] = {str(i): why for i, why in sorted(backend.unenrolled.items())}
    # what the server cannot check: each silo's word, as docs/deploy.md explains
    result["reported_by_silos"] = REPORTED_BY_SILOS
    return result


def make_server_app(cfg=None, json_path=None, round_timeout=None, fail_when_stopped=False):
    """Build a ServerApp running ``cfg`` (or the run config's experiment).

    The result JSON goes to ``json_path`` (or the run config's ``json-out``) and to the
    app's ``last_result``. With ``fail_when_stopped`` (the deployed app) a run that stopped
    early (no silo answered acceptably in an epoch) ends the ServerApp with an error after
    its result is written, so that Flower, ``flwr ls`` and ``hcct-lite flower-run`` report
    it failed rather than completed.
    """
    app = ServerApp()
    app.last_result = None

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        result = run_on_grid(grid, context.run_config, cfg, round_timeout)
        path = json_path or dict(context.run_config).get("json-out")
        if path:
            write_json(str(path), result)
        app.last_result = result
        status = result["status"]
        if fail_when_stopped and status["state"] != "complete":
            kept = f"; the partial result is in {path}" if path else ""
            raise RuntimeError(
                f"the experiment stopped in epoch {status['epoch']}: {status['reason']}{kept}"
            )

    return app


app = make_server_app(fail_when_stopped=True)

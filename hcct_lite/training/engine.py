"""The training loop (the paper's Algorithm 1), shared by every scheme.

Each epoch t: the learning rate is ``lr * lr_decay**t`` (the paper's
``0.1 * 0.995^(t-1)`` with epochs counted from 1); the scheme plans who trains from which
model; every active client runs local SGD; the scheme aggregates; every client is
evaluated on its own test split.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

import numpy as np
import torch
from typing_extensions import override

from ..partition.updates import cosine_matrix
from ..schemes.base import Scheme, ServerView
from ..schemes.registry import make_scheme
from .config import RunConfig, arrival_epochs
from .local import clone_state, evaluate, make_trainer, seed_global_stream
from .models import head_names
from .provenance import provenance
from .replies import ScreenedBackend, defence_for
from .tasks import build_clients, check_clients, task_model

__all__ = ["Backend", "LocalBackend", "run_experiment", "resolve_device", "init_model"]


def resolve_device(name: str) -> torch.device:
    """``auto`` -> cuda when available, else cpu; ``cuda`` without a GPU is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("device 'cuda' requested but no CUDA GPU is available")
    return torch.device(name)


def init_model(cfg: RunConfig, seed_offset: int, device):
    """The model of ``cfg`` with its seeded initial weights (seed offset 0: the common one)."""
    # Weights are drawn on the CPU: seeding the CPU stream is enough (and cheap).
    seed_global_stream(cfg.seed * 7919 + seed_offset, "cpu")
    return task_model(cfg).to(device)


def _summary(errors) -> dict:
    """Statistics over the clients that answered; ``errors`` lists client i at index i."""
    e = np.asarray([x for x in errors if x is not None], dtype=np.float64)
    return {
        "client_test_error": list(errors),
        "missing": [i for i, x in enumerate(errors) if x is None],
        "mean": float(e.mean()),
        "std": float(e.std()),
        "min": float(e.min()),
        "max": float(e.max()),
    }


@runtime_checkable
class Backend(Protocol):
    """How the engine reaches the clients; the same units in every backend.

    Attributes
    ----------
    sizes : numpy.ndarray of shape (n_clients,), int64
        D_i, each client's number of training samples.
    domains : list of n_clients str
        Where each client's data come from (for the record).

    A client that does not answer is absent from the dict a method returns (or ``probe``
    returns ``None``); a backend never makes up a value for it.
    """

    sizes: np.ndarray
    domains: list

    def train(self, starts: dict, lr: float, epoch: int) -> dict:
        """Train every client in ``starts`` (index -> state dict) at learning rate ``lr``.

        ``epoch`` seeds the shuffling. Returns index -> LocalResult.
        """
        ...

    def evaluate(self, states: dict) -> dict:
        """Test error in % of ``states[i]`` on client i's test split, index -> float."""
        ...

    def probe(self, i: int, state: dict):
        """``(loss, accuracy in [0, 1])`` of ``state`` on client i's training data, or None."""
        ...


class LocalBackend:
    """A :class:`Backend` with every client in this process: data, local SGD, evaluation.

    ``cfg`` a RunConfig; ``clients`` its n_clients ClientData, each with a training and a test
    sample at least (else ``ValueError``); ``model`` the network they train, on ``device``.
    :mod:`hcct_lite.deploy.flower` provides a backend whose clients are Flower ClientApps.
    """

    def __init__(self, cfg: RunConfig, clients, model, device):
        check_clients(cfg, clients, model)  # each fits the task's network, or one line says
        for i, c in enumerate(clients):  # an empty split would divide by zero, or read 0 %
            if c.y_train.shape[0] < 1 or c.y_test.shape[0] < 1:
                raise ValueError(
                    f"client {i} has {c.y_train.shape[0]} training and {c.y_test.shape[0]} test "
                    "samples; every client needs at least one of each"
                )
        self.clients = clients
        self.model = model
        self.trainer = make_trainer(cfg, model, device)
        self.sizes = np.array([c.size for c in clients], dtype=np.int64)
        self.domains = [c.domain for c in clients]

    @override
    def train(self, starts: dict, lr: float, epoch: int) -> dict:
        return self.trainer.train(starts, {i: self.clients[i] for i in starts}, lr, epoch)

    @override
    def evaluate(self, states: dict) -> dict:
        return self.trainer.evaluate_clients(states, self.clients)

    @override
    def probe(self, i: int, state: dict) -> tuple:
        loss, error = evaluate(self.model, state, self.clients[i].x_train, self.clients[i].y_train)
        return loss, 1.0 - error / 100.0


def run_experiment(cfg: RunConfig, progress: bool = True, clients=None, backend=None) -> dict:
    """Run one experiment and return its JSON-ready result.

    Parameters
    ----------
    cfg : RunConfig
        Every setting (see :func:`~hcct_lite.training.config.make_config`).
    progress : bool, default=True
        Show a tqdm progress bar (only where the output is a terminal).
    clients : list of n_clients ClientData, default=None
        Prebuilt clients; ``None`` builds them with ``build_clients(cfg)``.
    backend : Backend, default=None
        How to reach the clients; ``None`` is a :class:`LocalBackend` over ``clients``.

    Returns
    -------
    dict
        ``task``, ``scheme``, ``seed``, ``config``, ``sizes`` (n_clients,), ``domains``;
        ``history``, per epoch: ``epoch``, ``lr``, ``groups``, ``client_test_error`` in %
        (null for a client that did not answer), ``mean_test_error``, ``train_loss``,
        ``missing``, the scheme's ``plan.info``; ``final``, the last epoch's
        ``client_test_error`` (n_clients,), ``missing``, ``mean``, ``std``, ``min``, ``max``
        (over those that answered) and ``best_over_epochs`` (each client's lowest error over
        all epochs, selected on the test split as the authors' code reports it); ``status``
        (``{"state": "complete"}``, or ``"stopped"`` with ``epoch`` and ``reason``);
        ``rejected`` (replies refused, the norm rule's too: ``{client, epoch, reason}``);
        ``aggregation`` (the aggregator, and groups too small for its rule: ``record()``);
        ``provenance`` (code, versions, device, threads, CPU kernels) and ``timing``
        (``seconds``, ``epoch_seconds``: the only wall-clock values, nothing else varies).

    Raises
    ------
    ValueError
        If there is no GPU for ``cfg.device``, ``clients`` are not ``cfg.n_clients`` or one
        has an empty split, or a ``backend`` comes with ``cuda_graphs`` or ``batched_clients``.
    """
    t0 = time.perf_counter()
    device = resolve_device(cfg.device)
    model = init_model(cfg, 0, device)
    backend = _backend(cfg, clients, backend, model, device)
    scheme = make_scheme(cfg.scheme, cfg)
    defence = defence_for(cfg)  # None for the paper's runs: FedAvg, no rule, no bound
    if defence is not None:
        defence.arm(scheme)
    guarded = ScreenedBackend(backend, cfg, scheme, defence)
    fixed = ServerView(
        sizes=guarded.sizes,
        init_state=clone_state(model.state_dict()),
        head=head_names(model),
        trainable=[k for k, _ in model.named_parameters()],
        fresh_state=lambda k: clone_state(init_model(cfg, k, device).state_dict()),
    )  # no probe, no training: each epoch's view has its own, screened at its epoch
    run = EngineState(cfg, scheme, guarded, arrival_epochs(cfg), fixed)
    scheme.setup(run.view(0))
    history, status, epoch_seconds = [], {"state": "complete"}, []
    bar = _progress_bar(cfg) if progress else None
    for t in range(cfg.epochs):
        t_epoch = time.perf_counter()
        entry = run_epoch(t, run)
        epoch_seconds.append(time.perf_counter() - t_epoch)
        history.append(entry)
        if entry["mean_test_error"] is None:  # nobody answered: stop, keep what we have
            status = {"state": "stopped", "epoch": t, "reason": guarded.no_answer(t)}
            break
        if bar is not None:
            bar.update(1)
            bar.set_postfix(error=f"{entry['mean_test_error']:.2f}%", groups=entry["n_groups"])
    if bar is not None:
        bar.close()
    return {
        "task": cfg.task,
        "scheme": cfg.scheme,
        "seed": cfg.seed,
        "config": cfg.to_dict(),
        "sizes": np.asarray(backend.sizes, dtype=np.int64).tolist(),
        "domains": list(backend.domains),
        "history": history,
        "final": summarize(history),
        "status": status,
        "rejected": guarded.screen.rejected,
        "aggregation": guarded.record(scheme.aggregator),
        "provenance": provenance(str(device), cfg),
        # wall-clock times apart: two runs of one command differ only inside "timing"
        "timing": {"seconds": time.perf_counter() - t0, "epoch_seconds": epoch_seconds},
    }


def _backend(cfg, clients, backend, model, device):
    """``backend``, or a :class:`LocalBackend` over ``clients`` (built from ``cfg`` if None)."""
    if backend is None:
        return LocalBackend(cfg, build_clients(cfg) if clients is None else clients, model, device)
    for name in ("cuda_graphs", "batched_clients"):  # a backend's clients train themselves
        if cfg.option(name, False):
            raise ValueError(
                f"{name} applies to clients trained in this process; {type(backend).__name__} "
                f"trains its own: turn {name} off"
            )
    return backend


def _progress_bar(cfg):
    from tqdm.auto import tqdm

    # disable=None: no bar when output is not a terminal (logs, CI)
    desc = f"{cfg.task}/{cfg.scheme}/seed {cfg.seed}"
    return tqdm(total=cfg.epochs, desc=desc, leave=False, disable=None)


@dataclass(eq=False)
class EngineState:
    """What the engine holds through a run; a scheme sees it only through :meth:`view`.

    Attributes
    ----------
    cfg, scheme : RunConfig, Scheme
    clients : ScreenedBackend
        The backend behind the reply screen: every reply the loop gets has passed it.
    arrive : numpy.ndarray (N,) int, the epoch each client arrives in
    fixed : ServerView
        The view's parts fixed for the run: ``sizes`` (D_i; a count bound may cut them),
        ``init_state``, ``head``, ``trainable``, ``fresh_state``.
    states, updates : dict client -> state dict
        Each client's current model and last accepted update: the engine alone writes them.
    missing : set of int
        Clients that did not answer acceptably last epoch.
    """

    cfg: RunConfig
    scheme: Scheme
    clients: ScreenedBackend
    arrive: np.ndarray
    fixed: ServerView
    states: dict = field(default_factory=dict)
    updates: dict = field(default_factory=dict)
    missing: set = field(default_factory=set)

    def view(self, t: int, active=(), new=()) -> ServerView:
        """The read-only view of epoch ``t`` (``setup``'s: epoch 0, nobody active yet)."""
        return replace(
            self.fixed,
            probe=self.clients.probe_at(t),
            train=self.clients.train_at(t),
            active=active,
            new=new,
            absent=self.missing,
            states=self.states,
            updates=self.updates,
        )


def run_epoch(t: int, run: EngineState) -> dict:
    """One epoch of Algorithm 1: partition, local training, aggregation, evaluation.

    Clients missing last epoch (``run.missing``) sit out the partition. A client that does
    not answer now, whose reply the screen refuses, or that the plan left out (MAXFL, on a
    probe) is missing: it is dropped from the plan and keeps its model. Updates ``run``'s
    states, updates and missing clients, and returns the epoch's history entry.
    """
    cfg, scheme, clients = run.cfg, run.scheme, run.clients
    active = [i for i in range(cfg.n_clients) if run.arrive[i] <= t]
    new = {i for i in active if run.arrive[i] == t}
    for i in new:
        run.states[i] = run.fixed.init_state
    server = run.view(t, active, new)
    lr = cfg.lr * cfg.lr_decay**t
    # the partition: who trains with whom, and from which model
    plan = scheme.plan(t, server)
    # local training of every planned client
    results = clients.train(plan, lr, t)
    missing = set(active) - set(results)
    plan = plan.without(missing)
    run.updates.update({i: r.update for i, r in results.items()})
    # aggregation: each group's model, which its members hold
    run.states.update(scheme.aggregate(t, server, plan, results))
    tested = clients.evaluate({i: run.states[i] for i in active if i not in missing}, t)
    run.missing = missing
    entry = history_entry(t, lr, active, plan, results, tested, missing)
    if cfg.record_cosines:  # pairwise cosines of this epoch's updates, clients sorted
        ids = sorted(results)
        entry["update_cosines"] = cosine_matrix([results[i].update for i in ids]).tolist()
        entry["update_clients"] = ids
    return entry


def history_entry(t, lr, active, plan, results, tested, missing) -> dict:
    """The JSON record of one epoch (errors in %, None for a client that did not answer)."""
    errors = [tested.get(i) for i in active]
    answered = [e for e in errors if e is not None]
    entry = {
        "epoch": t,
        "lr": lr,
        "groups": [list(map(int, g)) for g in plan.groups],
        "n_groups": len(plan.groups),
        "client_test_error": errors,
        "mean_test_error": float(np.mean(answered)) if answered else None,
        "train_loss": [results[i].train_loss if i in results else None for i in active],
        "missing": sorted(missing | (set(active) - set(tested))),
    }
    entry.update(plan.info)
    return entry


def summarize(history) -> dict:
    """Build the ``final`` block of a result from its history.

    The last epoch's errors, and each client's best epoch (selected on its test split, as
    the authors' code reports). ``client_test_error`` lists client i at index i, ``None``
    for a client that did not answer (also listed in ``missing``); the statistics are over
    the clients that answered.
    """
    answered = [h for h in history if any(e is not None for e in h["client_test_error"])]
    if not answered:
        return {"client_test_error": [], "mean": None, "std": None, "min": None, "max": None}
    # the last epoch in which anyone answered (a stopped run's last epoch may have none)
    final = _summary(answered[-1]["client_test_error"])
    best = []
    for i in range(len(history[-1]["client_test_error"])):
        seen = [
            h["client_test_error"][i]
            for h in history
            if i < len(h["client_test_error"]) and h["client_test_error"][i] is not None
        ]
        best.append(min(seen) if seen else None)
    final["best_over_epochs"] = {
        "note": "each client's lowest test error over all epochs "
        "(selected on the test split, as the authors' code)",
        **_summary(best),
    }
    return final

"""The ClientApp: hcct-lite's local training on this node's own data.

A node is a silo; its node config picks its data: ``partition-id`` (a client of the task's
federation) or ``data-path`` (an ``.npz`` with ``x_train``, ``y_train``, ``x_test`` and
``y_test``). The reply carries the trained model and the sample count, never data. The
silo's guards (``max-evaluations``, ``lr-range``, ``dp-*``, ...) are listed in docs/deploy.md.
"""

from __future__ import annotations

import math

from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from ...training.local import SGDTrainer, evaluate, local_objective
from ...training.models import head_names
from ...training.tasks import task_model
from ..privacy import dp_settings, ledger, private_train
from .common import config_from_run_config, config_from_text, from_record, to_record
from .silo_data import silo_data

__all__ = ["make_client_app", "app"]


def _count_evaluation(context: Context) -> None:
    """Refuse an evaluation beyond the node's ``max-evaluations`` in this training epoch."""
    cap = _whole(context, "max-evaluations", 0)
    done = int(context.state["evaluations"]["n"]) if "evaluations" in context.state else 0
    if cap > 0 and done >= cap:
        raise PermissionError(
            f"this silo answers at most {cap} evaluation(s) per training epoch "
            "(node config max-evaluations)"
        )
    context.state["evaluations"] = MetricRecord({"n": done + 1})


def _whole(context: Context, key: str, default: int) -> int:
    """The node config's ``key`` as a whole number >= 0; a malformed value is named."""
    value = context.node_config.get(key, default)
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit():
        raise ValueError(f"node config {key} must be a whole number >= 0; got {value!r}")
    return int(text)


def _range(context: Context, key: str, default: str) -> tuple:
    """The node config's ``key`` as ``(low, high)``; a malformed value is named, not guessed."""
    text = str(context.node_config.get(key, default))
    try:
        low, high = (float(v) for v in text.split())
    except ValueError:
        low = high = math.nan
    if not low <= high:  # also NaN, a malformed value
        raise ValueError(
            f'node config {key} must be two numbers "low high" with low <= high; got {text!r}'
        )
    return low, high


def _check_training(cfg, lr: float, epoch: int, context: Context) -> None:
    """Refuse a training request outside the silo's bounds, or for an epoch already trained.

    Training for a new, later epoch of the run starts a new evaluation budget; MAXFL's
    reference rounds (negative epochs) and repeated epochs do not, and an epoch number at
    or past the run's ``epochs`` is refused. A refusal is an error reply: the server counts
    the silo as missing for that round.
    """
    low, high = _range(context, "lr-range", "1e-4 1")
    if not low <= lr <= high:
        raise PermissionError(
            f"learning rate {lr:g} is outside this silo's lr-range [{low:g}, {high:g}]"
        )
    low, high = _range(context, "batch-size-range", "8 1024")
    if not low <= cfg.batch_size <= high:
        raise PermissionError(
            f"batch size {cfg.batch_size} is outside this silo's batch-size-range "
            f"[{low:g}, {high:g}]"
        )
    most = _whole(context, "max-local-epochs", 20)
    if cfg.local_epochs > most:
        raise PermissionError(f"{cfg.local_epochs} local epochs; this silo runs at most {most}")
    if epoch >= cfg.epochs:  # a fresh number beyond the run would refill the budget
        raise PermissionError(
            f"epoch {epoch} is beyond this run's {cfg.epochs} epochs (0..{cfg.epochs - 1})"
        )
    seen = (
        [int(e) for e in context.state["trained"]["epochs"]] if "trained" in context.state else []
    )
    if epoch in seen:  # ten requests at learning rate 0 would read the accuracy ten times
        raise PermissionError(f"epoch {epoch} was already trained; one training per epoch")
    if epoch > max(seen, default=-1):
        context.state["evaluations"] = MetricRecord({"n": 0})
    context.state["trained"] = MetricRecord({"epochs": [*seen, epoch]})


def _keeps_head(msg: Message) -> bool:
    """Whether the server's scheme keeps each client's classifier local (HCCT-P).

    The silo runs no scheme: the server says so in every training and evaluation message
    (``keep-head``, true or false).
    """
    value = msg.content["config"].get("keep-head")
    if not isinstance(value, bool):
        raise ValueError(f"the server's keep-head must be true or false; got {value!r}")
    return value


def _keep_head(msg: Message, model, state: dict, context: Context) -> dict:
    """HCCT-P: train and evaluate with this node's own head, kept in its context."""
    if not _keeps_head(msg) or "head" not in context.state:
        return state
    own = from_record(context.state["head"])
    return {**state, **{k: own[k] for k in head_names(model)}}


def make_client_app(cfg=None, mods=None) -> ClientApp:
    """A ClientApp; with ``cfg`` fixed (simulation), else read from the run config.

    ``mods``: Flower mods wrapped around every handler (``mod(msg, context, call_next)``),
    e.g. for logging or for clipping what the silo sends.
    """
    app = ClientApp(mods=mods)

    @app.query()
    def query(msg: Message, context: Context) -> Message:
        return _answer_query(cfg, msg, context)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        return _answer_train(cfg, msg, context)

    @app.evaluate()
    def evaluate_(msg: Message, context: Context) -> Message:
        return _answer_evaluate(cfg, msg, context)

    return app


def _setup(cfg, msg: Message, context: Context) -> tuple:
    """``(config, model, silo index, silo data)`` for one message.

    ``cfg`` None: the config the message carries, else the run config's.
    """
    c = cfg
    if c is None:
        text = msg.content["config"].get("config-json") if "config" in msg.content else None
        c = config_from_text(text) if text else config_from_run_config(context.run_config)
    model = task_model(c)
    return c, model, *silo_data(c, context.node_config)


def _answer_query(cfg, msg: Message, context: Context) -> Message:
    """The silo's index and its number of training samples."""
    _, _, i, data = _setup(cfg, msg, context)
    return Message(
        RecordDict({"info": MetricRecord({"partition-id": i, "num-examples": data.size})}),
        reply_to=msg,
    )


def _answer_train(cfg, msg: Message, context: Context) -> Message:
    """Local SGD from the sent model, after the silo-side guards on the rate and the epoch.

    The silo's own head is kept where the scheme keeps one.
    """
    c, model, i, data = _setup(cfg, msg, context)
    conf = msg.content["config"]
    lr, epoch = float(conf["lr"]), int(conf["epoch"])
    _check_training(c, lr, epoch, context)
    start = _keep_head(msg, model, from_record(msg.content["model"]), context)
    dp = dp_settings(context.node_config)
    if dp is None:
        trainer = SGDTrainer(
            model, c.local_epochs, c.batch_size, seed=c.seed, objective=local_objective(c)
        )
        res = trainer.train_one(start, data, lr, epoch, i)
    elif local_objective(c) is not None:
        raise ValueError(f"the scheme {c.scheme!r} adds to the clients' step, which DP-SGD lacks")
    else:
        res, eps = _train_privately(c, model, start, data, lr, epoch, i, dp, context)
    if _keeps_head(msg):
        context.state["head"] = ArrayRecord(
            {k: res.state[k].detach().clone() for k in head_names(model)}
        )
    metrics = MetricRecord(
        {"num-examples": res.n_samples, "train-loss": res.train_loss, "train-acc": res.train_acc}
    )
    if dp is not None:
        metrics["dp-epsilon"] = eps
    return Message(RecordDict({"model": to_record(res.state), "metrics": metrics}), reply_to=msg)


def _train_privately(c, model, start, data, lr, epoch, i, dp, context) -> tuple:
    """DP-SGD (:mod:`hcct_lite.deploy.privacy`), counted in the silo's ledger if it has one.

    With ``dp-ledger-dir``, the silo's spending over every run it served is read from its
    ledger, and the new entry is written there before the first step: no reply goes out
    uncounted. Without one (allowed only with no budget), this run's spending is kept in
    its Flower context.
    """
    seed = c.seed * 1_000_003 + epoch * 10_007 + i
    args = (model, start, data, lr, seed, c.local_epochs, c.batch_size, dp)
    if dp.ledger:
        with ledger(dp.ledger) as (history, record):
            res, _, eps = private_train(*args, history, record)
        return res, eps
    spent = context.state["dp"] if "dp" in context.state else None
    keys = ("sigma", "rate", "steps")
    history = [] if spent is None else list(zip(*(spent[k] for k in keys), strict=True))
    res, history, eps = private_train(*args, history)
    sigma, rate, steps = (list(v) for v in zip(*history, strict=True))
    context.state["dp"] = MetricRecord(
        {
            "sigma": [float(x) for x in sigma],
            "rate": [float(x) for x in rate],
            "steps": [int(x) for x in steps],
        }
    )
    return res, eps


def _answer_evaluate(cfg, msg: Message, context: Context) -> Message:
    """Loss and error of the sent model on the silo's test (or train) split.

    Counted against the silo's evaluation budget.
    """
    c, model, _, data = _setup(cfg, msg, context)
    _count_evaluation(context)
    state = _keep_head(msg, model, from_record(msg.content["model"]), context)
    on_train = msg.content["config"].get("split", "test") == "train"
    x, y = (data.x_train, data.y_train) if on_train else (data.x_test, data.y_test)
    loss, error = evaluate(model, state, x, y)
    metrics = MetricRecord({"loss": loss, "error": error, "num-examples": int(y.shape[0])})
    return Message(RecordDict({"metrics": metrics}), reply_to=msg)


app = make_client_app()

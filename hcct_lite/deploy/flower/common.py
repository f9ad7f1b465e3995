"""What server and clients share: the run configuration and state <-> record conversion."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import torch
from flwr.app import ArrayRecord

from ...training.config import RunConfig, make_config, setting_names
from .. import SETTINGS

__all__ = [
    "SILO_FIELDS",
    "silo_config_text",
    "config_to_text",
    "config_from_text",
    "config_from_run_config",
    "to_record",
    "from_record",
]


_DEFAULT_IF_NOT_POSITIVE = {
    "epochs",
    "n_clients",
    "samples",
    "alpha",
    "local_epochs",
    "batch_size",
    "lr",
    "train_ratio",
    "cluster_models",
}


# What a silo needs to train and evaluate: the model, its data's place in the federation
# (simulation silos rebuild it from these), the local training, the scheme's name (HCCT-P
# keeps its head) and the run's length (a silo trains no epoch beyond it). The server's
# own settings (alpha, its data location, ...) stay with the server.
SILO_FIELDS = (
    "task",
    "scheme",
    "seed",
    "model",
    "dataset",
    "domains",
    "n_clients",
    "samples",
    "train_ratio",
    "batch_size",
    "local_epochs",
    "epochs",
)


def silo_config_text(cfg: RunConfig) -> str:
    """The part of ``cfg`` a silo needs (:data:`SILO_FIELDS`), as JSON text."""
    d = cfg.to_dict()
    return json.dumps({k: d[k] for k in SILO_FIELDS}, sort_keys=True)


def config_to_text(cfg: RunConfig) -> str:
    """Serialise ``cfg`` as JSON text (what a Flower message carries)."""
    return json.dumps(cfg.to_dict(), sort_keys=True)


def config_from_text(text: str) -> RunConfig:
    """The RunConfig serialised by :func:`config_to_text`, validated."""
    d = json.loads(text)
    task, scheme, seed = d.pop("task"), d.pop("scheme"), d.pop("seed")
    return make_config(task, scheme, seed, **d)


def config_from_run_config(run_config) -> RunConfig:
    """Build a RunConfig from a Flower run config.

    The run config holds ``task``, ``scheme``, ``seed`` and any other RunConfig field (e.g.
    ``epochs``, ``alpha``), or ``config-json`` with all of them.
    """
    rc = dict(run_config)
    if "config-json" in rc and rc["config-json"]:
        return config_from_text(str(rc["config-json"]))
    names = {k.replace("-", "_"): v for k, v in rc.items()}
    task = names.pop("task", "rotated-digits")
    scheme = names.pop("scheme", "hcct")
    seed = int(names.pop("seed", 0))
    known = set(setting_names())
    # 0 (or a negative alpha) in the app's pyproject means "the task's default"
    overrides = {
        k: v
        for k, v in names.items()
        if k in known
        and not (
            isinstance(v, (int, float))
            and not isinstance(v, bool)
            and v <= 0
            and k in _DEFAULT_IF_NOT_POSITIVE
        )
    }
    if isinstance(overrides.get("domains"), str):
        overrides["domains"] = overrides["domains"].split()
    return make_config(task, scheme, seed, **overrides)


# The settings of a deployment's defence (the deployment part's settings of a run)
DEFENCE_SETTINGS = tuple(SETTINGS)


def deployment_defence() -> dict:
    """The defence a deployment runs by default: the Flower app's own run config.

    Returns
    -------
    dict
        :data:`DEFENCE_SETTINGS` -> their values in ``hcct_lite/deploy/flower/app/pyproject.toml``
        (as :func:`config_from_run_config` reads them), for ``make_config``.
    """
    app = Path(__file__).parent / "app" / "pyproject.toml"
    cfg = config_from_run_config(tomllib.loads(app.read_text())["tool"]["flwr"]["app"]["config"])
    return {k: cfg.option(k) for k in DEFENCE_SETTINGS}


def to_record(state: dict) -> ArrayRecord:
    """A model state (name -> tensor) as a Flower ArrayRecord."""
    return ArrayRecord({k: v.detach().cpu().contiguous() for k, v in state.items()})


def from_record(record: ArrayRecord) -> dict:
    """An ArrayRecord back to a state dict of tensors."""
    return {k: torch.as_tensor(v) for k, v in record.to_torch_state_dict().items()}

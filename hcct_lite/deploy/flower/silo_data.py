"""A silo's own data, loaded once: its ``.npz``, or its share of a rehearsal federation.

Flower runs each message in a fresh ClientApp process, so a cache in memory lasts one
message. A rehearsal silo (``partition-id`` without ``data-path``) therefore builds the
federation once and keeps its own share on disk (node config ``cache-dir``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile

import numpy as np
import torch

from ...training.data import find_npz
from ...training.splits import ClientData
from ...training.tasks import build_clients

__all__ = ["silo_data", "share_path"]

log = logging.getLogger("hcct_lite")

_MEMORY: dict = {}  # within one process: one load per file, share or federation
_FIELDS = ("task", "dataset", "model", "seed", "n_clients", "samples", "train_ratio", "domains")


def silo_data(cfg, node_config) -> tuple:
    """``(client index, ClientData)`` of this node: its own file, or its rehearsal share."""
    path = str(node_config.get("data-path", "") or "")
    if path:
        if path not in _MEMORY:
            _MEMORY[path] = _from_npz(path)
        return int(node_config.get("partition-id", 0)), _MEMORY[path]
    if "partition-id" not in node_config:
        raise ValueError("node config needs partition-id (or data-path for a real silo)")
    i = int(node_config["partition-id"])
    share = share_path(cfg, i, node_config.get("cache-dir"))
    if share not in _MEMORY:
        _MEMORY[share] = _load_share(share) or _build_share(cfg, i, share)
    return i, _MEMORY[share]


def _from_npz(path: str) -> ClientData:
    with np.load(path) as d:
        return ClientData(
            torch.as_tensor(d["x_train"], dtype=torch.float32),
            torch.as_tensor(d["y_train"], dtype=torch.int64),
            torch.as_tensor(d["x_test"], dtype=torch.float32),
            torch.as_tensor(d["y_test"], dtype=torch.int64),
            path,
        )


def share_path(cfg, i: int, cache_dir=None) -> str:
    """Where client ``i``'s share of ``cfg``'s rehearsal federation is kept.

    The name hashes the data settings and the data files' size and modification time, so a
    changed setting or file never reuses a stale share.
    """
    settings = {k: getattr(cfg, k) for k in _FIELDS}
    sources = []
    for name in cfg.domains or [cfg.dataset]:
        found = find_npz(name, cfg.data_root)
        stat = os.stat(found) if found else None
        sources.append([name, found, stat and stat.st_size, stat and stat.st_mtime_ns])
    text = json.dumps([settings, sources], sort_keys=True, default=str)
    key = hashlib.sha256(text.encode()).hexdigest()[:20]
    folder = cache_dir or os.path.join(os.path.expanduser("~"), ".cache", "hcct_lite", "silos")
    return os.path.join(str(folder), f"{cfg.task}-{key}-client{i}.pt")


def _load_share(path: str):
    if not os.path.isfile(path):
        return None
    try:
        d = torch.load(path, weights_only=True)
        return ClientData(d["x_train"], d["y_train"], d["x_test"], d["y_test"], d["domain"])
    except Exception as err:  # noqa: BLE001 - a damaged share is rebuilt, never trusted
        log.warning("%s cannot be read (%s); rebuilding this silo's data", path, err)
        return None


def _build_share(cfg, i: int, path: str) -> ClientData:
    # one build per process serves every partition a process hosts (simulation)
    key = tuple(json.dumps(getattr(cfg, k), default=str) for k in _FIELDS)
    if key not in _MEMORY:
        _MEMORY[key] = build_clients(cfg)
    data = _MEMORY[key][i]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    os.close(fd)
    fields = {
        "x_train": data.x_train,
        "y_train": data.y_train,
        "x_test": data.x_test,
        "y_test": data.y_test,
        "domain": data.domain,
    }
    torch.save(fields, tmp)
    os.replace(tmp, path)  # a share is whole or absent, whatever process reads it
    return data

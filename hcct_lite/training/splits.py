"""Splitting a data set over clients (seeded), and each client's own train/test split.

Every partitioner returns a list of index arrays into an :class:`~hcct_lite.training.data.ImageSet`
(one per client); :func:`make_clients` turns them into float tensors and cuts each
client's samples into its own random train and test split.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from .data import ImageSet

__all__ = [
    "ClientData",
    "halfnormal_counts",
    "iid_halfnormal",
    "shards_halfnormal",
    "domain_split",
    "motivating_split",
    "even_split",
    "to_float",
    "make_clients",
]


@dataclass
class ClientData:
    """One client's data: its training and test samples, and their labels.

    The paper's tasks give images normalised to [-1, 1]. Any other task's samples have
    the shape its network takes (:func:`~hcct_lite.training.models.input_shape`).

    Attributes
    ----------
    x_train : ``(D_i, *S)`` float32, S the network's input, (C, H, W) for images
    y_train : (D_i,) int64, labels in [0, classes) of the task
    x_test, y_test : ``(T_i, *S)`` float32 and (T_i,) int64, alike
    domain : str, where the samples come from (data set name, rotation, ...)
    """

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    domain: str = ""

    @property
    def size(self) -> int:
        """D_i, the number of training samples."""
        return int(self.y_train.shape[0])


def halfnormal_counts(n_clients: int, total: int, rng, minimum: int = 1) -> np.ndarray:
    """Client counts proportional to half-normal H(1) draws, each >= ``minimum``, sum <= total."""
    r = np.abs(rng.standard_normal(n_clients))
    counts = np.maximum(np.floor(total * r / r.sum()).astype(np.int64), minimum)
    while counts.sum() > total:  # the minimum may overshoot: take from the largest
        counts[np.argmax(counts)] -= 1
    if counts.min() < minimum:
        raise ValueError(f"cannot give {n_clients} clients at least {minimum} of {total} items")
    return counts


def iid_halfnormal(n_items: int, n_clients: int, total: int, rng, minimum: int = 2) -> list:
    """IID samples with half-normal client sizes (the paper's FMNIST task)."""
    total = min(total, n_items)
    counts = halfnormal_counts(n_clients, total, rng, minimum)
    perm = rng.permutation(n_items)
    edges = np.concatenate([[0], np.cumsum(counts)])
    return [perm[edges[i] : edges[i + 1]] for i in range(n_clients)]


def shards_halfnormal(y, n_clients: int, total: int, rng, n_shards: int = 100) -> list:
    """Single-class shards handed out in half-normal proportions (the paper's CIFAR-10 task).

    ``total`` samples (at most the data set, balanced over classes) are cut into
    ``n_shards`` shards of one class each; client i gets ``max(1, floor(n_shards r_i /
    sum r))`` random shards; shards left over are dropped.
    """
    y = np.asarray(y)
    classes = np.unique(y)
    if n_shards % len(classes):
        raise ValueError(f"n_shards={n_shards} must be a multiple of the {len(classes)} classes")
    per_class = min(total // len(classes), min(int((y == c).sum()) for c in classes))
    shards_per_class = n_shards // len(classes)
    if per_class < shards_per_class:
        raise ValueError(f"{total} samples are too few for {n_shards} shards")
    shards = []
    for c in classes:
        idx = rng.permutation(np.flatnonzero(y == c))[:per_class]
        shards.extend(np.array_split(idx, shards_per_class))
    counts = halfnormal_counts(n_clients, n_shards, rng, minimum=1)
    order = rng.permutation(n_shards)
    edges = np.concatenate([[0], np.cumsum(counts)])
    return [
        np.concatenate([shards[s] for s in order[edges[i] : edges[i + 1]]])
        for i in range(n_clients)
    ]


def even_split(n_items: int, n_clients: int, per_client: int, rng) -> list:
    """``n_clients`` disjoint random subsets of ``per_client`` items each."""
    if n_clients * per_client > n_items:
        raise ValueError(
            f"{n_clients} clients x {per_client} samples need {n_clients * per_client} "
            f"samples; only {n_items} available"
        )
    perm = rng.permutation(n_items)
    return [perm[i * per_client : (i + 1) * per_client] for i in range(n_clients)]


def domain_split(domain_sizes: dict, n_clients: int, per_client: int, rng) -> list:
    """Clients spread evenly (and consecutively) over domains, IID within a domain.

    Returns a list of ``(domain, indices)``: client i belongs to domain
    ``i * n_domains // n_clients`` (the paper's Digit task).
    """
    names = list(domain_sizes)
    owners = [i * len(names) // n_clients for i in range(n_clients)]
    out = []
    for d, name in enumerate(names):
        members = [i for i in range(n_clients) if owners[i] == d]
        if not members:
            continue
        try:
            parts = even_split(domain_sizes[name], len(members), per_client, rng)
        except ValueError as err:
            raise ValueError(f"domain {name!r}: {err}") from None
        out.extend((name, p) for p in parts)
    return out


def motivating_split(y, rng, fraction: float = 1.0) -> list:
    """Split for the paper's three-client example (Table II).

    Clients 1 and 2 hold 20% and 80% of classes 0-4, client 3 all of classes 5-9.
    ``fraction`` < 1 uses that share of each class.
    """
    y = np.asarray(y)
    low, high = [], []
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        idx = idx[: max(2, int(round(fraction * idx.size)))]
        (low if c < 5 else high).append(idx)
    low = rng.permutation(np.concatenate(low))
    cut = int(round(0.2 * low.size))
    return [low[:cut], low[cut:], rng.permutation(np.concatenate(high))]


def to_float(x: torch.Tensor, size: int | None = None, channels: int | None = None):
    """uint8 (N, C, H, W) -> float32 in [-1, 1], optionally resized and with C channels."""
    out = x.float().div_(255.0)
    if channels is not None and out.shape[1] != channels:
        if out.shape[1] != 1:
            raise ValueError(f"cannot turn {out.shape[1]} channels into {channels}")
        out = out.expand(-1, channels, -1, -1)
    if size is not None and out.shape[-1] != size:
        out = F.interpolate(
            out, size=(size, size), mode="bilinear", antialias=True, align_corners=False
        )
    return out.sub(0.5).div(0.5).contiguous()


def make_clients(
    dataset: ImageSet,
    parts,
    train_ratio: float,
    rng,
    size=None,
    channels=None,
    domains=None,
    transform=None,
) -> list:
    """Turn index arrays into :class:`ClientData`, each with its own random train/test split.

    Parameters
    ----------
    parts : list of index arrays into ``dataset``
    train_ratio : float in (0, 1), share of each client's samples used for training
    transform : optional callable (client index, float images) -> images (e.g. a rotation)

    Raises
    ------
    ValueError
        If a client has too few samples to give both splits at least one.
    """
    if not 0.0 < train_ratio < 1.0:
        raise ValueError(f"train_ratio must be in (0, 1); got {train_ratio}")
    clients = []
    for i, idx in enumerate(parts):
        idx = np.asarray(idx)
        n_train = int(round(train_ratio * idx.size))
        if n_train < 1 or idx.size - n_train < 1:
            raise ValueError(
                f"client {i}: only {idx.size} samples, too few to split into train and test "
                f"at train_ratio {train_ratio}"
            )
        idx = rng.permutation(idx)
        x = to_float(dataset.x[torch.from_numpy(idx)], size, channels)
        if transform is not None:
            x = transform(i, x)
        y = dataset.y[torch.from_numpy(idx)]
        name = domains[i] if domains is not None else dataset.name
        clients.append(ClientData(x[:n_train], y[:n_train], x[n_train:], y[n_train:], name))
    return clients

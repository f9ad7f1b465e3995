"""The federation designer's logic, without widgets (:func:`hcct_lite.federation_designer`).

A student describes 3 to 8 silos of scikit-learn's 8x8 digits (sample count, label mix,
rotation). :class:`Designer` trains each one epoch from a common model and returns what the
designer draws: label histograms, update cosines, HCCT's partition and Theorem 1's terms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Silo",
    "PRESETS",
    "parse_classes",
    "check_silos",
    "check_alpha",
    "label_counts",
    "bound_terms",
    "Designer",
]

CLASSES = 10
MIN_SILOS, MAX_SILOS = 3, 8
MAX_SAMPLES = 400
ROTATIONS = (0, 90, 180, 270)


@dataclass(frozen=True)
class Silo:
    """One silo's design.

    Attributes
    ----------
    samples : int, images drawn for the silo (half train, half test), 2..400
    concentration : float > 0, Dirichlet concentration of its label mix over ``classes``
        (small: a few classes dominate; large: an even mix)
    classes : tuple of int, the digits it may hold (0..9), not empty
    rotation : int, 0, 90, 180 or 270 degrees applied to every image (a feature shift)
    """

    samples: int = 100
    concentration: float = 100.0
    classes: tuple = tuple(range(CLASSES))
    rotation: int = 0


def _rotated_pairs(n, samples, alpha):
    return [Silo(samples, rotation=ROTATIONS[(i * 4) // n]) for i in range(n)], alpha


# name -> (silos, alpha): the paper's example, the right groups known, notebook 05's modes
PRESETS = {
    "rotated pairs": _rotated_pairs(8, 200, 50.0),
    "motivating example": (
        [
            Silo(80, classes=(0, 1, 2, 3, 4)),
            Silo(320, classes=(0, 1, 2, 3, 4)),
            Silo(400, classes=(5, 6, 7, 8, 9)),
        ],
        100.0,
    ),
    "small clients": _rotated_pairs(8, 40, 9.0),
    "IID clients": ([Silo(150) for _ in range(6)], 50.0),
    "alpha's scale": (
        [Silo(400, classes=c) for c in [(0, 1, 2, 3, 4)] * 2 + [(5, 6, 7, 8, 9)] * 2],
        1.0,
    ),
    "label skew": ([Silo(200, concentration=0.1) for _ in range(6)], 50.0),
}


def parse_classes(text: str) -> tuple:
    """``"0-4"``, ``"0,2,5"`` or ``"0-2, 7"`` -> sorted tuple of digits; ``""`` -> ``()``.

    Raises ValueError naming the part that is not a digit 0..9 or a range of them.
    """
    out = set()
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi or lo)
        except ValueError:
            raise ValueError(f"classes: {part!r} is not a digit or a range like 0-4") from None
        if not 0 <= a <= b < CLASSES:
            raise ValueError(f"classes: {part!r} must lie within 0-9, low to high")
        out.update(range(a, b + 1))
    return tuple(sorted(out))


def _whole(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def check_silos(silos) -> None:
    """Raise ValueError naming the first silo (1-based) and setting that is invalid."""
    if not MIN_SILOS <= len(silos) <= MAX_SILOS:
        raise ValueError(f"a federation has {MIN_SILOS} to {MAX_SILOS} silos; got {len(silos)}")
    for k, s in enumerate(silos, 1):
        if not isinstance(s, Silo):
            raise ValueError(f"silo {k} is a {type(s).__name__}, not a Silo")
        if not _whole(s.samples) or not 2 <= s.samples <= MAX_SAMPLES:
            raise ValueError(f"silo {k} has {s.samples} samples: it needs 2 to {MAX_SAMPLES}")
        _check_classes(k, s.classes)
        c = s.concentration
        if (
            not isinstance(c, (int, float))
            or isinstance(c, bool)
            or not (math.isfinite(c) and c > 0)
        ):
            raise ValueError(f"silo {k}'s label-mix concentration must be > 0; got {c!r}")
        if not _whole(s.rotation) or s.rotation not in ROTATIONS:
            raise ValueError(f"silo {k}'s rotation must be one of {ROTATIONS}; got {s.rotation!r}")


def _check_classes(k: int, classes) -> None:
    """Silo ``k``'s classes: a non-empty tuple of distinct digits 0-9."""
    if not isinstance(classes, tuple):
        raise ValueError(
            f"silo {k}'s classes must be a tuple of digits such as (0, 1, 2); got {classes!r}"
        )
    if not classes:
        raise ValueError(f"silo {k}'s label mix is all zero: allow at least one class")
    if any(not _whole(c) or not 0 <= c < CLASSES for c in classes):
        raise ValueError(f"silo {k}'s classes must be digits within 0-9; got {list(classes)}")
    if len(set(classes)) < len(classes):
        twice = sorted({c for c in classes if classes.count(c) > 1})
        raise ValueError(f"silo {k}'s classes name {twice} more than once")


def check_alpha(alpha) -> float:
    """``alpha`` as a float > 0, or ValueError."""
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise ValueError(f"alpha must be a number > 0; got {alpha!r}") from None
    if not (math.isfinite(a) and a > 0):
        raise ValueError(f"alpha must be a number > 0; got {alpha!r}")
    return a


def label_counts(silo: Silo, seed: int, index: int) -> np.ndarray:
    """(10,) how many images of each digit the silo draws, summing to ``silo.samples``.

    The label mix is a Dirichlet draw (concentration ``silo.concentration``) over the
    silo's classes, seeded by ``(seed, index)``; counts by largest remainder.
    """
    rng = np.random.default_rng([seed, index, 11])
    p = np.zeros(CLASSES)
    p[list(silo.classes)] = rng.dirichlet(np.full(len(silo.classes), silo.concentration))
    raw = p * silo.samples
    counts = np.floor(raw).astype(int)
    short = silo.samples - counts.sum()
    counts[np.argsort(counts - raw, kind="stable")[:short]] += 1
    return counts


class Designer:
    """Builds silos, caches their first updates, and answers what the designer draws.

    A silo's data and update depend on its own settings only, so they are cached per silo:
    moving one control retrains one silo, and moving alpha retrains none. Silos draw their
    samples independently, so two silos may share a digit image.

    Parameters
    ----------
    seed : int, the common initial model, the silos' label mixes and draws
    lr, batch_size : local SGD of the first epoch (one local epoch)
    """

    def __init__(self, seed: int = 0, lr: float = 0.1, batch_size: int = 16):
        from ..training.config import make_config
        from ..training.data import load_dataset
        from ..training.engine import init_model
        from ..training.local import clone_state

        self.seed = int(seed)
        self._cfg = dict(seed=self.seed, lr=lr, batch_size=batch_size, device="cpu")
        self._data = load_dataset("digits")
        labels = self._data.y.numpy()
        self._pools = [np.flatnonzero(labels == c) for c in range(CLASSES)]
        # one silo's first epoch: the same settings for every silo
        self._silo_cfg = make_config("rotated-digits", "independent", n_clients=1, **self._cfg)
        self._model = init_model(self._silo_cfg, 0, "cpu")
        self._init = clone_state(self._model.state_dict())
        self._clients, self._updates = {}, {}

    def client(self, silo: Silo, index: int):
        """The silo's :class:`~hcct_lite.training.splits.ClientData` (cached)."""
        key = (silo, index)
        if key not in self._clients:
            self._clients[key] = self._build(silo, index)
        return self._clients[key]

    def _build(self, silo, index):
        import torch

        from ..training.models import MODEL_INPUT
        from ..training.splits import make_clients

        rng = np.random.default_rng([self.seed, index, 13])
        parts = []
        for c, n in enumerate(label_counts(silo, self.seed, index)):
            if n > self._pools[c].size:
                raise ValueError(
                    f"silo {index + 1} needs {n} images of digit {c}; the data has "
                    f"{self._pools[c].size}: lower its samples or widen its mix"
                )
            parts.append(rng.choice(self._pools[c], size=n, replace=False))
        k = silo.rotation // 90
        (client,) = make_clients(
            self._data,
            [np.concatenate(parts)],
            0.5,
            rng,
            *MODEL_INPUT["small_digits"],
            [f"rot{silo.rotation}"],
            transform=lambda i, x: torch.rot90(x, k, dims=(2, 3)),
        )
        return client

    def update(self, silo: Silo, index: int):
        """The silo's update after one local epoch from the common model (cached)."""
        key = (silo, index)
        if key not in self._updates:
            from ..training.engine import LocalBackend

            cfg = self._silo_cfg
            backend = LocalBackend(cfg, [self.client(silo, index)], self._model, "cpu")
            self._updates[key] = backend.train({0: self._init}, cfg.lr, 0)[0].update
        return self._updates[key]

    def picture(self, silos, alpha, chosen: int = 0) -> dict:
        """Everything the designer draws for ``silos`` at ``alpha``.

        Returns
        -------
        dict with ``hist`` (N, 10) training-label shares, ``cosines`` (N, N), ``partition``
        (:class:`~hcct_lite.partition.Partition`), ``sizes`` (N,) training samples,
        ``terms`` (Theorem 1 for client ``chosen``, :func:`bound_terms`) and ``text`` (one
        line naming the groups, 1-based).
        """
        from ..partition import client_partition
        from ..partition.updates import cosine_matrix

        check_silos(silos)
        a = check_alpha(alpha)
        if not _whole(chosen) or not 0 <= chosen < len(silos):
            raise ValueError(f"client {chosen + 1} is not one of the {len(silos)} silos")
        clients = [self.client(s, i) for i, s in enumerate(silos)]
        updates = [self.update(s, i) for i, s in enumerate(silos)]
        sizes = np.array([c.size for c in clients])
        hist = np.array(
            [np.bincount(c.y_train.numpy(), minlength=CLASSES) / c.size for c in clients]
        )
        p = client_partition(updates, sizes, alpha=a)
        groups = [[i + 1 for i in g] for g in p.groups]
        return dict(
            hist=hist,
            cosines=cosine_matrix(updates),
            partition=p,
            sizes=sizes,
            terms=bound_terms(hist, sizes, p.groups, chosen),
            text=f"alpha = {a:.3g}: {p.n_groups} group(s) {groups}",
        )

    def train(self, silos, alpha, epochs: int = 5) -> dict:
        """Each silo's final test error (%) under HCCT's pattern, Independent and Global.

        HCCT's pattern is the partition at ``alpha`` from the first updates, kept fixed for
        ``epochs`` epochs. Returns ``{"HCCT's pattern": [...], "independent": [...],
        "global": [...]}``, one error per silo.
        """
        from ..training.config import make_config
        from ..training.engine import run_experiment

        groups = self.picture(silos, alpha)["partition"].groups
        clients = [self.client(s, i) for i, s in enumerate(silos)]
        out = {}
        for name, scheme, part in (
            ("HCCT's pattern", "fixed", groups),
            ("independent", "independent", None),
            ("global", "global", None),
        ):
            cfg = make_config(
                "rotated-digits",
                scheme,
                n_clients=len(silos),
                epochs=epochs,
                partition=part,
                **self._cfg,
            )
            out[name] = run_experiment(cfg, progress=False, clients=clients)["final"][
                "client_test_error"
            ]
        return out


def bound_terms(hist, sizes, groups, chosen: int, delta: float = 0.1) -> dict:
    """Theorem 1's two terms for client ``chosen``, alone and in its group.

    The sample term is ``4 L^2 / (delta mu D)`` with ``L = mu = 1``; the divergence stands
    in as the total-variation distance between the client's training labels and its group's
    (sample-weighted) label mix. It sees label shifts only, not feature shifts such as a
    rotation, so it is a rough proxy for the theorem's H-divergence.

    Returns
    -------
    dict ``alone`` and ``group``, each ``(sample term, divergence)``, and ``members``
    (the group, 0-based)
    """
    hist, sizes = np.asarray(hist, dtype=float), np.asarray(sizes, dtype=float)
    members = next(g for g in groups if chosen in g)
    mix = sizes[members] @ hist[members] / sizes[members].sum()
    tv = 0.5 * float(np.abs(mix - hist[chosen]).sum())
    return dict(
        alone=(4 / (delta * sizes[chosen]), 0.0),
        group=(4 / (delta * sizes[members].sum()), tv),
        members=list(members),
    )

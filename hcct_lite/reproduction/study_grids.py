"""Grids beyond the paper (notebook 05), on the rotated digits whose right groups are known.

They vary the batch-norm buffers, the clients' size, the scale of alpha and a fixed K.
"""

from __future__ import annotations

from ..runs.jobs import Job

__all__ = ["STUDY_GRIDS", "STUDY_PARTS", "SMALL_CLIENTS", "STUDY_ALPHAS", "STUDY_KS"]

SEEDS = (0, 1, 2)
# small-clients-rotated: 16 clients of 20 training samples (four per rotation); HCCT against
# Independent, IFCA and Global, each with 1 and 3 local epochs (the remedy tried). alpha 9
# keeps the default task's balance: alpha times a pair's data part is 9 / 20 ~ 50 / 112, as
# at the default 112 samples and alpha 50.
SMALL_CLIENTS = dict(n_clients=16, samples=40, alpha=9.0, epochs=20, cluster_models=4)
SMALL_SCHEMES = ("hcct", "independent", "ifca", "global")
# alpha-scale-rotated: HCCT at alpha from Table III's 1 to 1000, the mean sample count included.
STUDY_ALPHAS = (1.0, 10.0, 50.0, 112.0, 1000.0)
# fixed-k-rotated: HCCT forced to K groups (4 is the truth).
STUDY_KS = (1, 2, 4, 8)
# buffers-rotated: a batch-norm CNN, its updates over parameters (the paper) or with the
# buffers (the authors' code); epoch cosines recorded.
BUFFERS = dict(model="digit_cnn_small", record_cosines=True, epochs=15)


def _buffers(seeds):
    return [
        Job(
            "buffers-rotated",
            f"{label}-seed{seed}",
            "rotated-digits",
            "hcct",
            seed,
            dict(BUFFERS, update_includes_buffers=flag),
        )
        for seed in seeds
        for label, flag in (("parameters", False), ("buffers", True))
    ]


def _small_clients(seeds):
    return [
        Job(
            "small-clients-rotated",
            f"{scheme}-local{local}-seed{seed}",
            "rotated-digits",
            scheme,
            seed,
            dict(SMALL_CLIENTS, local_epochs=local),
        )
        for seed in seeds
        for local in (1, 3)
        for scheme in SMALL_SCHEMES
    ]


def _hcct_sweep(grid: str, setting: str, values, label: str):
    """The builder of a grid running HCCT at each of ``values`` of one ``setting``."""

    def build(seeds):
        return [
            Job(grid, f"{label}{v:g}-seed{seed}", "rotated-digits", "hcct", seed, {setting: v})
            for seed in seeds
            for v in values
        ]

    return build


# name -> (builder of its jobs from seeds, default seeds), as paper_grids.GRIDS
STUDY_GRIDS = {
    "buffers-rotated": (_buffers, SEEDS),
    "small-clients-rotated": (_small_clients, SEEDS),
    "alpha-scale-rotated": (
        _hcct_sweep("alpha-scale-rotated", "alpha", STUDY_ALPHAS, "alpha"),
        SEEDS,
    ),
    "fixed-k-rotated": (_hcct_sweep("fixed-k-rotated", "fixed_groups", STUDY_KS, "k"), SEEDS),
}
STUDY_PARTS = {
    "buffers-rotated": "beyond the paper: batch-norm buffers in the update (notebook 05)",
    "small-clients-rotated": "beyond the paper: clients with tens of samples (notebook 05)",
    "alpha-scale-rotated": "beyond the paper: the scale of alpha (notebook 05)",
    "fixed-k-rotated": "beyond the paper: utility against error at a fixed K (notebook 05)",
}

"""hcct-lite: collaboration patterns in cross-silo federated learning.

Implements HCCT (Sun, Kountouris and Zhang, arXiv 2401.13236) and its baselines. The names
below are the public API, used by the notebooks, the docs and the README; they stay stable.
The package is laid out by the paper's concepts: :mod:`~hcct_lite.partition` (Algorithm 2
and problem P1), :mod:`~hcct_lite.theory` (Theorem 1), :mod:`~hcct_lite.training` (data,
models, local SGD and Algorithm 1's loop), :mod:`~hcct_lite.schemes` (HCCT and the
baselines), :mod:`~hcct_lite.experiments` (the paper's tables and figures),
:mod:`~hcct_lite.viz` and :mod:`~hcct_lite.flower`.
"""

from .experiments.runner import run_grid
from .partition import Partition, client_partition, optimal_partition, select_layer
from .schemes import make_scheme
from .training import (
    Backend,
    LocalBackend,
    RunConfig,
    build_clients,
    build_model,
    make_config,
    run_experiment,
)

__all__ = [
    "client_partition",
    "optimal_partition",
    "Partition",
    "select_layer",
    "make_config",
    "RunConfig",
    "build_clients",
    "build_model",
    "run_experiment",
    "LocalBackend",
    "Backend",
    "make_scheme",
    "run_grid",
]
__version__ = "0.1.0"

"""Training: configuration, tasks, data, models, local SGD and Algorithm 1's loop.

The one loop serves every scheme through a client :class:`Backend`.
"""

from .config import SCHEMES, RunConfig, make_config
from .engine import Backend, LocalBackend, run_experiment
from .local import LocalObjective
from .models import build_model, register_model
from .splits import ClientData
from .tasks import TASKS, build_clients, register_task

__all__ = [
    "SCHEMES",
    "TASKS",
    "RunConfig",
    "make_config",
    "build_clients",
    "build_model",
    "register_task",
    "register_model",
    "ClientData",
    "LocalObjective",
    "Backend",
    "LocalBackend",
    "run_experiment",
]

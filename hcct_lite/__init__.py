"""hcct-lite: collaboration patterns in cross-silo federated learning.

Implements HCCT (Sun, Kountouris and Zhang, arXiv 2401.13236) and its baselines.
"""

from .partition import Partition, client_partition, optimal_partition, select_layer

__all__ = ["Partition", "client_partition", "optimal_partition", "select_layer"]
__version__ = "0.1.0"

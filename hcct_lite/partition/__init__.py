"""Algorithm 2 (the greedy client partition) and problem P1 (its exact optimum).

``updates`` turns client updates into a Gram matrix, ``utility`` computes group utilities
from it, ``greedy`` merges groups (:func:`client_partition`), ``exact`` solves P1 for small
N (:func:`optimal_partition`), ``layer_selection`` picks HCCT-E's layer, ``merge_steps``
records each merge for teaching, ``reference`` is the paper's algorithm written directly
(for tests and benchmarks), ``synthetic`` makes clustered updates.
"""

from .exact import optimal_partition
from .greedy import client_partition
from .layer_selection import select_layer
from .merge_steps import merge_steps, pair_benefits
from .updates import cosine_matrix, gram_matrix
from .utility import Merge, Partition

__all__ = [
    "client_partition",
    "optimal_partition",
    "select_layer",
    "merge_steps",
    "pair_benefits",
    "gram_matrix",
    "cosine_matrix",
    "Merge",
    "Partition",
]

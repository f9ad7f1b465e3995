"""Algorithm 2 (the greedy client partition) and problem P1 (its exact optimum).

- ``updates``: client updates to a Gram matrix; ``utility``: group utilities from it;
- ``greedy``: the greedy merge (:func:`client_partition`); ``exact``: P1 for small N
  (:func:`optimal_partition`); ``layer_selection``: HCCT-E's layer;
- ``merge_steps``: each merge, for teaching; ``reference``: the paper's algorithm written
  directly, for tests; ``synthetic``: clustered updates.
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

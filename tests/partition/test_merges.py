"""Step-by-step replay of the greedy merge."""

import numpy as np

from hcct_lite.partition.greedy import client_partition
from hcct_lite.partition.merge_steps import merge_steps, pair_benefits
from hcct_lite.partition.synthetic import clustered_updates


def test_each_step_chooses_the_largest_benefit_and_stops_at_zero():
    u, d, _ = clustered_updates([3, 2, 2], dim=300, noise=0.5, seed=4)
    steps = merge_steps(u, d, alpha=100.0)
    p = client_partition(u, d, alpha=100.0)
    assert len(steps) == len(p.merges) + 1
    for step, merge in zip(steps, p.merges, strict=False):
        a, b = step.chosen
        assert step.benefit == merge.benefit
        np.testing.assert_allclose(step.benefits[a, b], merge.benefit, rtol=1e-9)
        assert np.nanmax(step.benefits) == step.benefits[a, b]
        np.testing.assert_allclose(step.benefits, step.benefits.T)
    last = steps[-1]
    assert last.chosen is None and last.groups == p.groups
    assert np.nanmax(last.benefits) <= 0


def test_pair_benefits_of_singletons():
    u = np.array([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0]])
    b = pair_benefits(u, [10, 10, 10], alpha=5.0)
    assert np.isnan(np.diag(b)).all()
    # clients 0 and 1 nearly agree: merging gains alpha/D - alpha/2D per client
    assert b[0, 1] > 0 > b[0, 2]
    assert b[0, 1] == b[1, 0]

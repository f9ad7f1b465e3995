"""Property tests: the fast Gram-matrix partition against the paper's algorithm as written."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hcct_lite.partition.exact import optimal_partition
from hcct_lite.partition.greedy import client_partition
from hcct_lite.partition.reference import group_utility, naive_partition
from hcct_lite.partition.synthetic import clustered_updates

ALPHAS = [0.0, 1.0, 10.0, 100.0, 1000.0, "size"]


@st.composite
def federations(draw, max_clients=14):
    """Random clustered instances: (updates (N, M), sizes (N,), alpha)."""
    n_clusters = draw(st.integers(1, 4))
    cluster_sizes = draw(st.lists(st.integers(1, 4), min_size=n_clusters, max_size=n_clusters))
    cluster_sizes[0] = min(cluster_sizes[0], max_clients)
    while sum(cluster_sizes) > max_clients:
        cluster_sizes.pop()
    dim = draw(st.sampled_from([3, 10, 50]))
    noise = draw(st.sampled_from([0.1, 0.5, 1.0, 2.0]))
    low = draw(st.integers(1, 100))
    seed = draw(st.integers(0, 2**32 - 1))
    updates, sizes, _ = clustered_updates(cluster_sizes, dim, noise, (low, low + 200), seed)
    alpha = draw(st.sampled_from(ALPHAS))
    return updates, sizes, alpha


def per_client_alpha(alpha, sizes):
    return sizes.astype(float) if alpha == "size" else np.full(len(sizes), float(alpha))


def recompute_utilities(updates, sizes, alpha, groups):
    util = np.empty(len(sizes))
    for g in groups:
        for i in g:
            d_group = sizes[g].sum()
            if len(g) == 1:
                util[i] = 1.0 - alpha[i] / d_group
            else:
                mean = (sizes[g, None] * updates[g]).sum(0) / d_group
                cos = updates[i] @ mean / (np.linalg.norm(updates[i]) * np.linalg.norm(mean))
                util[i] = -alpha[i] / d_group + cos
    return util


@settings(max_examples=150, deadline=None)
@given(federations(), st.one_of(st.none(), st.integers(1, 14)))
def test_fast_path_matches_the_paper_algorithm(fed, k):
    updates, sizes, alpha = fed
    n = len(sizes)
    k = None if k is None else min(k, n)
    p = client_partition(updates, sizes, alpha, num_groups=k)
    a = per_client_alpha(alpha, sizes)
    groups, benefits = naive_partition(updates, sizes, a, num_groups=k)
    assert p.groups == groups
    np.testing.assert_allclose([m.benefit for m in p.merges], benefits, rtol=1e-9, atol=1e-12)


@settings(max_examples=100, deadline=None)
@given(federations())
def test_result_is_a_valid_partition_with_positive_merges(fed):
    updates, sizes, alpha = fed
    p = client_partition(updates, sizes, alpha)
    n = len(sizes)
    flat = sorted(i for g in p.groups for i in g)
    assert flat == list(range(n))
    assert all(g == sorted(g) for g in p.groups)
    assert [g[0] for g in p.groups] == sorted(g[0] for g in p.groups)
    assert all(p.groups[p.labels[i]].count(i) == 1 for i in range(n))
    assert all(m.benefit > 0 for m in p.merges)
    assert len(p.merges) == n - p.n_groups


@settings(max_examples=100, deadline=None)
@given(federations())
def test_reported_utilities_equal_a_recomputation(fed):
    updates, sizes, alpha = fed
    p = client_partition(updates, sizes, alpha)
    a = per_client_alpha(alpha, sizes)
    expected = recompute_utilities(updates, sizes, a, p.groups)
    np.testing.assert_allclose(p.utilities, expected, rtol=1e-9, atol=1e-12)
    total = sum(group_utility(list(updates), list(sizes), a, g) for g in p.groups)
    assert abs(p.total_utility - total) < 1e-9
    if p.merges:
        assert abs(p.merges[-1].total_utility - total) < 1e-9


@settings(max_examples=40, deadline=None)
@given(federations(max_clients=8))
def test_optimum_is_at_least_the_greedy_total(fed):
    updates, sizes, alpha = fed
    greedy = client_partition(updates, sizes, alpha)
    best = optimal_partition(updates, sizes, alpha)
    assert best.total_utility >= greedy.total_utility - 1e-9
    a = per_client_alpha(alpha, sizes)
    total = sum(group_utility(list(updates), list(sizes), a, g) for g in best.groups)
    assert abs(best.total_utility - total) < 1e-9

"""Hand-made cases for HCCT's client partition (Algorithm 2) and its bad-input errors."""

import numpy as np
import pytest
import torch
from scipy.cluster.hierarchy import is_monotonic, is_valid_linkage

from hcct_lite.partition.exact import optimal_partition
from hcct_lite.partition.greedy import client_partition


def fig2_story():
    """Two tight pairs and a lone client, as in the paper's Fig. 2."""
    e = np.eye(3)
    updates = np.stack(
        [
            e[0] + 0.05 * e[1],
            e[0] - 0.05 * e[1],  # pair A
            e[1] + 0.05 * e[2],
            e[1] - 0.05 * e[2],  # pair B
            e[2],  # the lone client
        ]
    )
    return updates, np.array([100, 100, 100, 100, 100])


def test_fig2_two_pairs_and_a_loner():
    updates, sizes = fig2_story()
    p = client_partition(updates, sizes, alpha=10.0)
    assert p.groups == [[0, 1], [2, 3], [4]]
    assert p.labels.tolist() == [0, 0, 1, 1, 2]
    assert len(p.merges) == 2
    assert all(m.benefit > 0 for m in p.merges)
    # the loner keeps the singleton utility 1 - alpha / D
    assert p.utilities[4] == pytest.approx(1 - 10.0 / 100)
    # a pair member: -alpha / 200 + cos(g_i, mean of the pair)
    cos = 1 / np.sqrt(1 + 0.05**2)
    assert p.utilities[0] == pytest.approx(-10.0 / 200 + cos)


def test_merge_records_and_totals():
    updates, sizes = fig2_story()
    p = client_partition(updates, sizes, alpha=10.0)
    before = 5 * (1 - 10.0 / 100)
    assert p.merges[0].total_utility == pytest.approx(before + p.merges[0].benefit)
    assert p.merges[-1].total_utility == pytest.approx(p.total_utility)
    assert {p.merges[0].left + p.merges[0].right, p.merges[1].left + p.merges[1].right} == {
        (0, 1),
        (2, 3),
    }


def test_near_identical_updates_and_tiny_data_give_one_group():
    rng = np.random.default_rng(1)
    base = rng.standard_normal(50)
    updates = base + 1e-3 * rng.standard_normal((8, 50))
    p = client_partition(updates, np.full(8, 5), alpha=1.0)
    assert p.groups == [list(range(8))]


def test_orthogonal_updates_and_plentiful_data_give_singletons():
    updates = np.eye(6) * 3.0
    p = client_partition(updates, np.full(6, 10_000), alpha=1.0)
    assert p.groups == [[i] for i in range(6)]
    assert p.merges == []
    np.testing.assert_allclose(p.utilities, 1 - 1.0 / 10_000)


def test_alpha_zero_never_merges_distinct_directions():
    rng = np.random.default_rng(2)
    p = client_partition(rng.standard_normal((5, 20)), np.full(5, 3), alpha=0.0)
    assert p.n_groups == 5  # any merge lowers a cosine below 1 with nothing to gain


def test_alpha_size_means_alpha_equals_d():
    updates, sizes = fig2_story()
    sizes = np.array([10, 20, 30, 40, 50])
    a = client_partition(updates, sizes, alpha="size")
    b = client_partition(updates, sizes, alpha=sizes.astype(float))
    assert a.groups == b.groups
    np.testing.assert_array_equal(a.utilities, b.utilities)


def test_num_groups_forces_exactly_k():
    updates, sizes = fig2_story()
    for k in range(1, 6):
        p = client_partition(updates, sizes, alpha=10.0, num_groups=k)
        assert p.n_groups == k
    p1 = client_partition(updates, sizes, alpha=10.0, num_groups=1)
    assert p1.merges[-1].benefit < 0  # merged past the stopping rule


def test_ties_go_to_the_pair_with_smaller_members():
    # four identical clients: every pair has the same benefit
    updates = np.ones((4, 3))
    p = client_partition(updates, np.full(4, 10), alpha=1.0, num_groups=3)
    assert p.groups == [[0, 1], [2], [3]]


def test_torch_and_mapping_inputs_match_numpy():
    updates, sizes = fig2_story()
    ref = client_partition(updates, sizes, alpha=10.0)
    t = client_partition(torch.tensor(updates, dtype=torch.float32), sizes, alpha=10.0)
    maps = [{"w": torch.tensor(u[:2]).reshape(1, 2), "b": torch.tensor(u[2:])} for u in updates]
    m = client_partition(maps, sizes, alpha=10.0)
    assert t.groups == ref.groups == m.groups
    np.testing.assert_allclose(m.utilities, ref.utilities, rtol=1e-12)
    np.testing.assert_allclose(t.utilities, ref.utilities, rtol=1e-6)


def test_float32_gram_accumulates_in_float64():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 200_000)).astype(np.float32)
    from hcct_lite.partition.updates import gram_matrix

    exact = x.astype(np.float64) @ x.astype(np.float64).T
    np.testing.assert_allclose(gram_matrix(x), exact, rtol=1e-13)


def test_single_client_is_one_group():
    p = client_partition(np.ones((1, 4)), [7], alpha=2.0)
    assert p.groups == [[0]]
    assert p.utilities.tolist() == [1 - 2.0 / 7]
    assert p.linkage().shape == (0, 4)


def test_linkage_is_valid_with_virtual_rows_above_the_stop():
    updates, sizes = fig2_story()
    p = client_partition(updates, sizes, alpha=10.0)
    z = p.linkage()
    assert z.shape == (4, 4)
    assert is_valid_linkage(z) and is_monotonic(z)
    assert p.virtual_rows.tolist() == [2, 3]
    assert (z[:2, 2] < p.stop_height()).all()
    assert (z[2:, 2] >= p.stop_height()).all()
    assert z[-1, 3] == 5


def test_optimal_matches_greedy_on_the_story_and_beats_a_bad_split():
    updates, sizes = fig2_story()
    best = optimal_partition(updates, sizes, alpha=10.0)
    assert best.groups == [[0, 1], [2, 3], [4]]
    assert best.merges == []
    forced = client_partition(updates, sizes, alpha=10.0, num_groups=1)
    assert best.total_utility > forced.total_utility
    with pytest.raises(ValueError, match="no merge history"):
        best.linkage()


def test_optimal_rejects_large_n():
    with pytest.raises(ValueError, match="N <= 10"):
        optimal_partition(np.eye(11), np.ones(11, dtype=int))


@pytest.mark.parametrize(
    ("updates", "sizes", "kwargs", "match"),
    [
        (np.array([[1.0, np.nan], [1.0, 0.0]]), [1, 1], {}, "client 0: update contains NaN"),
        (np.array([[1.0, 0.0], [np.inf, 0.0]]), [1, 1], {}, "client 1: update contains NaN or Inf"),
        (np.array([[1.0, 0.0], [0.0, 0.0]]), [1, 1], {}, "client 1: update is all zeros"),
        (np.array([[1.0e200, 0.0], [1.0, 0.0]]), [1, 1], {}, "client 1: update is too small next"),
        (np.eye(2), [1, 0], {}, "client 1: size 0 must be > 0"),
        (np.eye(2), [1, -3], {}, "client 1: size -3 must be > 0"),
        (np.eye(2), [1.5, 2], {}, "client 0: size 1.5 is not an integer"),
        (np.eye(2), [1, 2, 3], {}, r"sizes must have shape \(2,\)"),
        (np.eye(2), [1, 1], {"alpha": -1.0}, "alpha must be a finite number >= 0"),
        (np.eye(2), [1, 1], {"alpha": [1.0, -2.0]}, "client 1: alpha -2.0"),
        (np.eye(2), [1, 1], {"alpha": [1.0]}, r"alpha array must have shape \(2,\)"),
        (np.eye(2), [1, 1], {"alpha": "big"}, "alpha must be a number"),
        (np.eye(2), [1, 1], {"num_groups": 0}, r"num_groups must be in \[1, N=2\]"),
        (np.eye(2), [1, 1], {"num_groups": 3}, r"num_groups must be in \[1, N=2\]"),
        (np.zeros((0, 3)), [], {}, "at least one client"),
        ([], [], {}, "at least one client"),
        (np.ones(3), [1], {}, "2-D array"),
        (np.ones((2, 0)), [1, 1], {}, "M = 0"),
    ],
)
def test_bad_input_is_named(updates, sizes, kwargs, match):
    with pytest.raises(ValueError, match=match):
        client_partition(updates, sizes, **kwargs)


def test_bad_types():
    with pytest.raises(TypeError, match="num_groups"):
        client_partition(np.eye(2), [1, 1], num_groups=1.5)
    with pytest.raises(TypeError, match="sizes"):
        client_partition(np.eye(2), [True, True])
    with pytest.raises(TypeError, match="real numbers"):
        client_partition(np.array([["a", "b"], ["c", "d"]]), [1, 1])


def test_mismatched_mappings_name_the_client():
    a = {"w": np.ones(3), "b": np.ones(1)}
    with pytest.raises(ValueError, match="client 1: update keys"):
        client_partition([a, {"w": np.ones(3)}], [1, 1])
    with pytest.raises(ValueError, match="client 2: entry 'w' has shape"):
        client_partition([a, a, {"w": np.ones(4), "b": np.ones(1)}], [1, 1, 1])
    with pytest.raises(ValueError, match="client 1: update contains NaN"):
        client_partition([a, {"w": np.array([1, np.nan, 1]), "b": np.ones(1)}], [1, 1])


def test_the_gram_matrix_does_not_depend_on_the_thread_count():
    # a near-tie merge must not flip with the number of threads the partition runs on
    from threadpoolctl import threadpool_limits

    from hcct_lite.partition.updates import gram_matrix

    x = np.random.default_rng(0).standard_normal((12, 300_000)).astype(np.float32)
    grams = []
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            with threadpool_limits(threads):
                grams += [gram_matrix(x), gram_matrix(torch.from_numpy(x))]
    finally:
        torch.set_num_threads(before)
    assert all(np.array_equal(grams[0], g) for g in grams[1:])
    half = torch.from_numpy(x[:, :1000]).to(torch.bfloat16)
    assert np.array_equal(gram_matrix(half), gram_matrix(half.float().numpy()))


@pytest.mark.parametrize("scale", [1e-200, 1e-160, 1e150, 1e200])
def test_tiny_or_huge_updates_partition_as_their_unit_scale_copies(scale):
    rng = np.random.default_rng(3)
    base = np.repeat(rng.normal(size=(3, 20)), 2, axis=0) + 0.1 * rng.normal(size=(6, 20))
    sizes = [5, 7, 5, 7, 5, 7]
    want = client_partition(base, sizes, alpha=2.0)
    got = client_partition(base * scale, sizes, alpha=2.0)
    assert got.groups == want.groups and len(want.groups) == 3
    np.testing.assert_allclose(got.utilities, want.utilities, rtol=1e-12)


def test_alpha_of_the_wrong_type_names_the_type():
    with pytest.raises(TypeError, match="got None"):
        client_partition(np.eye(2), [1, 1], alpha=None)
    with pytest.raises(TypeError, match="got dict"):
        client_partition(np.eye(2), [1, 1], alpha={"a": 1})


def test_a_benefit_within_float_noise_of_zero_is_no_gain():
    from hcct_lite.partition.reference import naive_partition
    from hcct_lite.partition.utility import no_gain

    # identical clients at alpha = 0: the true benefit of every merge is exactly 0
    same = np.tile(np.random.default_rng(0).normal(size=(1, 50)), (4, 1))
    assert client_partition(same, [3, 5, 7, 9], alpha=0.0).n_groups == 4
    assert len(naive_partition(same, [3, 5, 7, 9], np.zeros(4))[0]) == 4
    assert no_gain(4.4e-16, 1.0, 1.0, 2) and not no_gain(1e-9, 1.0, 1.0, 2)
    # a real gain, however small next to 1 (here about 1e-7), is still taken
    assert client_partition(same, [3, 5, 7, 9], alpha=1e-6).n_groups == 1

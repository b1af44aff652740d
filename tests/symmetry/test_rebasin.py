"""NoT and rebasin against independent references: BFS swap counts and brute-force matching."""

import itertools
from collections import deque

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from symlib.nn.mlp import MLPSpec, init_mlp, mlp_forward
from symlib.symmetry import GroupElement, apply_group_element, rebasin, sample_group_element


def _bfs_swap_distances(n: int) -> dict[tuple, int]:
    """Minimal number of transpositions to reach every permutation of n items (BFS from id)."""
    start = tuple(range(n))
    dist, queue = {start: 0}, deque([start])
    while queue:
        p = queue.popleft()
        for i, j in itertools.combinations(range(n), 2):
            q = list(p)
            q[i], q[j] = q[j], q[i]
            q = tuple(q)
            if q not in dist:
                dist[q] = dist[p] + 1
                queue.append(q)
    return dist


def test_paper_example_has_not_3():
    # 1->4, 2->1, 3->5, 4->2, 5->3 (1-based) = (1 4 2)(3 5)
    perm = [3, 0, 4, 1, 2]
    assert rebasin.number_of_transpositions(perm) == 3
    assert sorted(len(c) for c in rebasin.cycles(perm)) == [2, 3]
    assert rebasin.number_of_transpositions(torch.argsort(torch.tensor(perm))) == 3  # inverse


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_not_equals_bfs_minimal_swaps(n):
    dist = _bfs_swap_distances(n)
    assert len(dist) == len(list(itertools.permutations(range(n))))
    for perm, d in dist.items():
        assert rebasin.number_of_transpositions(perm) == d


def test_not_rejects_non_permutations():
    with pytest.raises(ValueError, match="not a permutation"):
        rebasin.number_of_transpositions([0, 0, 1])


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), frac=st.floats(0, 1), seed=st.integers(0, 10_000))
def test_permutation_with_prescribed_not(n, frac, seed):
    k = min(int(frac * n), n - 1)
    perm = rebasin.permutation_with_not(n, k, torch.Generator().manual_seed(seed))
    assert sorted(perm.tolist()) == list(range(n))
    assert rebasin.number_of_transpositions(perm) == k


def test_permutation_with_not_out_of_range():
    with pytest.raises(ValueError):
        rebasin.permutation_with_not(5, 5, torch.Generator())


def _net(widths, seed, dtype=torch.float64):
    spec = MLPSpec(widths)
    return spec, init_mlp(spec, torch.Generator().manual_seed(seed), dtype)


def _permuted(params, spec, seed):
    g = sample_group_element(spec, torch.Generator().manual_seed(seed), scales=False)
    return apply_group_element(params, spec, g)


@pytest.mark.parametrize("widths", [(5, 12, 3), (6, 10, 8, 7, 2)])
def test_weight_matching_recovers_a_permutation_exactly(widths):
    spec, a = _net(widths, 0)
    b = _permuted(a, spec, 1)
    assert any(not torch.equal(a[k], b[k]) for k in a)
    g = rebasin.weight_matching(a, b, spec, generator=torch.Generator().manual_seed(0))
    matched = apply_group_element(b, spec, g)
    for k in a:
        assert torch.equal(matched[k], a[k]), k


def test_matched_network_computes_the_same_function():
    spec, a = _net((4, 9, 7, 3), 2)
    _, b = _net((4, 9, 7, 3), 3)  # unrelated network: the match is far from exact
    g = rebasin.weight_matching(a, b, spec)
    x = torch.randn(50, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(mlp_forward(apply_group_element(b, spec, g), x, spec), mlp_forward(b, x, spec))
    assert rebasin.total_not(g) >= 0


def test_one_hidden_layer_matches_brute_force():
    spec, a = _net((3, 6, 2), 4)
    _, b = _net((3, 6, 2), 5)
    g = rebasin.weight_matching(a, b, spec)
    best = max(rebasin.matching_objective(a, b, spec, GroupElement({"P1": torch.tensor(p)}))
               for p in itertools.permutations(range(6)))
    assert rebasin.matching_objective(a, b, spec, g) == pytest.approx(best, rel=1e-12)


def test_two_hidden_layers_brute_force_on_noisy_copy_and_coordinatewise_optimum():
    widths = (3, 4, 4, 2)
    spec, a = _net(widths, 6)
    gen = torch.Generator().manual_seed(7)
    noisy = {k: v + 0.05 * torch.randn(v.shape, generator=gen, dtype=v.dtype) for k, v in _permuted(a, spec, 8).items()}
    all_elements = [GroupElement({"P1": torch.tensor(p1), "P2": torch.tensor(p2)})
                    for p1 in itertools.permutations(range(4)) for p2 in itertools.permutations(range(4))]
    for b in (noisy, _net(widths, 9)[1]):
        g = rebasin.weight_matching(a, b, spec)
        value = rebasin.matching_objective(a, b, spec, g)
        brute = max(rebasin.matching_objective(a, b, spec, h) for h in all_elements)
        assert value <= brute + 1e-9
        # coordinate-wise optimal: no single-layer change improves
        for name in ("P1", "P2"):
            for p in itertools.permutations(range(4)):
                h = GroupElement({**g.perms, name: torch.tensor(p)})
                assert rebasin.matching_objective(a, b, spec, h) <= value + 1e-9
        if b is noisy:
            assert value == pytest.approx(brute, rel=1e-12)


def test_batched_weight_matching_equals_one_by_one():
    spec, a = _net((3, 7, 2), 10)
    bs = [_net((3, 7, 2), s)[1] for s in (11, 12, 13)]
    batch = {k: torch.stack([b[k] for b in bs]) for k in a}
    g = rebasin.weight_matching(a, batch, spec)
    assert g.perms["P1"].shape == (3, 7)
    for i, b in enumerate(bs):
        assert torch.equal(g.perms["P1"][i], rebasin.weight_matching(a, b, spec).perms["P1"])


def test_activation_matching_recovers_permutation_and_matches_brute_force():
    spec, a = _net((5, 6, 5, 3), 14)
    x = torch.rand(200, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    b = _permuted(a, spec, 15)
    g = rebasin.activation_matching(a, b, spec, x)
    matched = apply_group_element(b, spec, g)
    for k in a:
        assert torch.equal(matched[k], a[k])
    # brute force on an unrelated network, layer 1: maximise <P, Z_a^T Z_b>
    _, c = _net((5, 6, 5, 3), 16)
    g = rebasin.activation_matching(a, c, spec, x)
    za, zc = rebasin.hidden_activations(a, x, spec)[0], rebasin.hidden_activations(c, x, spec)[0]
    cost = za.T @ zc
    best = max(sum(cost[i, p[i]].item() for i in range(6)) for p in itertools.permutations(range(6)))
    got = sum(cost[i, g.perms["P1"][i]].item() for i in range(6))
    assert got == pytest.approx(best, rel=1e-12)


def test_batched_activation_matching():
    spec, a = _net((4, 8, 2), 17)
    x = torch.rand(64, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    copies = [_permuted(a, spec, s) for s in (20, 21)]
    batch = {k: torch.stack([c[k] for c in copies]) for k in a}
    g = rebasin.activation_matching(a, batch, spec, x, chunk=1)
    matched = apply_group_element(batch, spec, g)
    for k in a:
        torch.testing.assert_close(matched[k], a[k].expand_as(matched[k]), rtol=0, atol=0)


def test_interpolate_end_points_and_midpoint():
    _spec, a = _net((2, 3, 1), 0)
    _, b = _net((2, 3, 1), 1)
    path = rebasin.interpolate(a, b, [0.0, 0.5, 1.0])
    for k in a:
        torch.testing.assert_close(path[k][0], a[k])
        torch.testing.assert_close(path[k][2], b[k])
        torch.testing.assert_close(path[k][1], 0.5 * (a[k] + b[k]))

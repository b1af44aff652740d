"""NoT and rebasin against independent references: BFS swap counts and brute-force matching."""

import itertools
from collections import deque

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from symlib.nn.convnets import init_optunet, optunet_forward
from symlib.nn.mlp import MLPSpec, init_mlp, mlp_forward
from symlib.symmetry import (
    GroupElement,
    PermutationSpec,
    apply_group_element,
    optunet_permutation_spec,
    rebasin,
    sample_group_element,
    sample_spec_element,
)


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


# --- convnets: block axes, perms sharing an axis, grouped perms -----------------------------


def _tiny_conv_spec() -> PermutationSpec:
    """OptuNet's structure at toy size: conv 1->2 (k2), grouped conv 2->6 (2 groups, k2), 6->2->3.

    Same entry kinds as :func:`optunet_permutation_spec`: ``P1`` swaps conv1's channels and
    moves conv2's blocks of 3 along, ``P2`` permutes conv2's channels within their group (3 wide,
    so not every perm is its own inverse).
    """
    axes = {
        "P1": (("W1", 0), ("W2", 0, 3), ("W3", 1, 3)),
        "P2": (("W2", 0), ("W3", 1)),
        "P3": (("W3", 0), ("b3", 0), ("W4", 1)),
    }
    incoming = {"P1": (("W1", 0),), "P2": (("W2", 0),), "P3": (("W3", 0), ("b3", 0))}
    ndims = {k: len(s) for k, s in _TINY_SHAPES.items()}
    return PermutationSpec(
        axes, {"P1": 2, "P2": 6, "P3": 2}, incoming, ndims, {"P1": (("W3", 1, 3),)}, {"P2": 2}
    )


_TINY_SHAPES = {
    "W1": (2, 1, 2, 2),
    "W2": (6, 1, 2, 2),
    "W3": (2, 6),
    "b3": (2,),
    "W4": (3, 2),
    "b4": (3,),
}


def _tiny_conv_forward(p, x):
    h = torch.relu(torch.nn.functional.conv2d(x, p["W1"]))
    h = torch.relu(torch.nn.functional.conv2d(h, p["W2"], groups=2)).mean(dim=(-2, -1))
    return torch.relu(h @ p["W3"].T + p["b3"]) @ p["W4"].T + p["b4"]


def _tiny_conv_net(seed):
    gen = torch.Generator().manual_seed(seed)
    return {k: torch.randn(s, generator=gen, dtype=torch.float64) for k, s in _TINY_SHAPES.items()}


def _noisy(params, seed, sd=0.05):
    gen = torch.Generator().manual_seed(seed)
    return {
        k: v + sd * torch.randn(v.shape, generator=gen, dtype=v.dtype) for k, v in params.items()
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_weight_matching_recovers_an_optunet_permutation_exactly(seed):
    ps = optunet_permutation_spec()
    a = init_optunet(torch.Generator().manual_seed(seed), dtype=torch.float64)
    g = sample_spec_element(ps, torch.Generator().manual_seed(100 + seed), scales=False)
    b = apply_group_element(a, ps, g)
    assert any(not torch.equal(a[k], b[k]) for k in a)
    x = torch.randn(
        8, 1, 28, 28, generator=torch.Generator().manual_seed(seed), dtype=torch.float64
    )
    torch.testing.assert_close(optunet_forward(b, x), optunet_forward(a, x))  # same function
    found = rebasin.weight_matching(a, b, ps, generator=torch.Generator().manual_seed(seed))
    matched = apply_group_element(b, ps, found)
    for k in a:  # entries of a are distinct: only the exact inverse of g maps b back onto a
        assert torch.equal(matched[k], a[k]), k
    # a noisy copy is matched by the same element
    noisy = rebasin.weight_matching(a, apply_group_element(_noisy(a, seed, 0.01), ps, g), ps)
    for name in ps.perm_sizes:
        assert torch.equal(noisy.perms[name], found.perms[name]), name


def test_tiny_conv_spec_is_a_symmetry_of_its_network():
    ps, a = _tiny_conv_spec(), _tiny_conv_net(0)
    x = torch.randn(5, 1, 5, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    elements = _all_spec_elements(ps)
    for i in torch.randperm(len(elements), generator=torch.Generator().manual_seed(1))[:12]:
        h = elements[i]
        torch.testing.assert_close(
            _tiny_conv_forward(apply_group_element(a, ps, h), x), _tiny_conv_forward(a, x)
        )


def _all_spec_elements(ps: PermutationSpec) -> list[GroupElement]:
    """Every element of the perm group a spec allows (grouped perms stay in their groups)."""
    choices = []
    for name, n in ps.perm_sizes.items():
        size = n // ps.groups.get(name, 1)
        per_group = [
            [tuple(lo + i for i in p) for p in itertools.permutations(range(size))]
            for lo in range(0, n, size)
        ]
        choices.append([sum(parts, ()) for parts in itertools.product(*per_group)])
    return [
        GroupElement({name: torch.tensor(p) for name, p in zip(ps.perm_sizes, combo)})
        for combo in itertools.product(*choices)
    ]


def test_conv_weight_matching_against_brute_force():
    ps, a = _tiny_conv_spec(), _tiny_conv_net(1)
    elements = _all_spec_elements(ps)
    assert len(elements) == 2 * 6 * 6 * 2  # 2! x (3!)^2 x 2!
    g = sample_spec_element(ps, torch.Generator().manual_seed(3), scales=False)
    noisy = apply_group_element(_noisy(a, 4), ps, g)
    for b in (noisy, _tiny_conv_net(5)):
        found = rebasin.weight_matching(a, b, ps)
        value = rebasin.matching_objective(a, b, ps, found)
        brute = max(rebasin.matching_objective(a, b, ps, h) for h in elements)
        assert value <= brute + 1e-9
        # P2 stayed within its groups
        assert any(
            all(torch.equal(found.perms[k], h.perms[k]) for k in ps.perm_sizes) for h in elements
        )
        # coordinate-wise optimal: no change of a single perm improves
        for h in elements:
            differing = [k for k in ps.perm_sizes if not torch.equal(h.perms[k], found.perms[k])]
            if len(differing) == 1:
                assert rebasin.matching_objective(a, b, ps, h) <= value + 1e-9
        if b is noisy:
            assert value == pytest.approx(brute, rel=1e-12)


@pytest.mark.parametrize("seed", [6, 7, 8])
def test_every_conv_matching_step_is_an_exact_maximisation(seed):
    """One pass in forward order from sampled starts: each perm's step, the others held at their
    values at that moment, reaches the brute-force maximum over that perm alone."""
    ps, a, b = _tiny_conv_spec(), _tiny_conv_net(seed), _tiny_conv_net(seed + 10)
    elements = _all_spec_elements(ps)
    names = list(ps.perm_sizes)
    starts = torch.randperm(len(elements), generator=torch.Generator().manual_seed(seed))[:8]
    for start in (elements[i] for i in starts):
        found = rebasin.weight_matching(a, b, ps, init=start, max_iter=1)
        for i, name in enumerate(names):
            held = {**start.perms, **{k: found.perms[k] for k in names[:i]}}
            best = max(
                rebasin.matching_objective(a, b, ps, GroupElement({**held, name: h.perms[name]}))
                for h in elements
            )
            got = rebasin.matching_objective(
                a, b, ps, GroupElement({**held, name: found.perms[name]})
            )
            assert got == pytest.approx(best, rel=1e-12), (name, start.perms)


def test_weight_matching_rejects_an_axis_entry_that_does_not_fit():
    ps = PermutationSpec({"P": (("W", 0, 3),)}, {"P": 2}, {"P": (("W", 0, 3),)}, {"W": 2})
    w = torch.randn(5, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    with pytest.raises(ValueError, match=r"\('W', 0, 3\) of perm 'P'"):
        rebasin.weight_matching({"W": w}, {"W": w}, ps)

"""Nearest permuted copy of a one-hidden-layer MLP: exact formula against brute force."""

import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from symlib.chapters.sgm_vi import mode_proximity as mp
from symlib.nn.mlp import MLPSpec, init_mlp
from symlib.symmetry import GroupElement, apply_group_element


def _flat(params):
    return torch.cat([v.flatten() for v in params.values()])


@pytest.mark.parametrize("widths", [(1, 2, 1), (3, 4, 2), (2, 5, 3)])
def test_matches_brute_force_over_all_permutations(widths):
    spec = MLPSpec(widths)
    params = init_mlp(spec, torch.Generator().manual_seed(sum(widths)), torch.float64)
    w = _flat(params)
    best = min(
        torch.linalg.vector_norm(w - _flat(apply_group_element(params, spec, GroupElement({"P1": torch.tensor(p)})))).item()
        for p in itertools.permutations(range(widths[1])) if list(p) != list(range(widths[1]))
    )
    assert math.isclose(mp.nearest_copy_distance(params, spec, relative=False).item(), best, rel_tol=1e-9)
    assert math.isclose(mp.nearest_copy_distance(params, spec).item(),
                        best / torch.linalg.vector_norm(w).item(), rel_tol=1e-9)


def test_batched_and_chunked_agree():
    spec = MLPSpec((3, 50, 2))
    gen = torch.Generator().manual_seed(0)
    nets = [init_mlp(spec, gen, torch.float64) for _ in range(3)]
    batched = {k: torch.stack([n[k] for n in nets]) for k in nets[0]}
    full = mp.nearest_copy_distance(batched, spec, chunk=1024)
    chunked = mp.nearest_copy_distance(batched, spec, chunk=7)
    single = torch.stack([mp.nearest_copy_distance(n, spec) for n in nets])
    assert torch.allclose(full, chunked) and torch.allclose(full, single)


@settings(max_examples=30, deadline=None)
@given(d_in=st.integers(1, 6), width=st.integers(3, 40), d_out=st.integers(1, 4),
       scale=st.floats(0.01, 100.0), seed=st.integers(0, 1000))
def test_both_bounds_hold_for_every_network(d_in, width, d_out, scale, seed):
    spec = MLPSpec((d_in, width, d_out))
    gen = torch.Generator().manual_seed(seed)
    params = {k: scale * torch.randn(s, generator=gen, dtype=torch.float64) ** 3 for k, s in spec.shapes().items()}
    rel = mp.nearest_copy_distance(params, spec).item()
    assert rel <= mp.elementary_bound(width).item() + 1e-12
    assert rel <= mp.theorem31_bound(d_in, d_out, width).item() + 1e-12


def test_bound_formulas():
    assert math.isinf(mp.theorem31_bound(1, 1, 2).item())
    assert math.isclose(mp.theorem31_bound(1, 1, 20).item(), 2 * (3 + 0.05) / math.log(10))
    assert math.isclose(mp.elementary_bound(8).item(), 1.0)


def test_needs_one_hidden_layer():
    spec = MLPSpec((2, 3, 3, 1))
    with pytest.raises(ValueError, match="one hidden layer"):
        mp.nearest_copy_distance(init_mlp(spec, torch.Generator().manual_seed(0)), spec)

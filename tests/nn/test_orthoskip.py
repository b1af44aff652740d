"""Fixed semi-orthogonal skips: orthonormality, determinism, forward pass, symmetry breaking."""

import pytest
import torch

from symlib.inference import mfvi
from symlib.nn.mlp import MLPSpec, init_mlp, mlp_forward
from symlib.nn.orthoskip import (
    SkipPlacement,
    orthoskip_forward,
    semi_orthogonal,
    skip_layers,
    skip_matrices,
)
from symlib.symmetry import apply_group_element, sample_group_element


@pytest.mark.parametrize("shape", [(32, 1), (1, 32), (32, 32), (5, 3), (3, 5), (1, 1)])
def test_semi_orthogonal_has_orthonormal_rows_or_columns(shape):
    o = semi_orthogonal(*shape, torch.Generator().manual_seed(0), dtype=torch.float64)
    assert o.shape == shape
    gram = o.T @ o if shape[0] >= shape[1] else o @ o.T
    assert torch.allclose(gram, torch.eye(min(shape), dtype=torch.float64), atol=1e-12)


def test_semi_orthogonal_is_seeded_and_sign_symmetric():
    a = semi_orthogonal(6, 4, torch.Generator().manual_seed(3))
    b = semi_orthogonal(6, 4, torch.Generator().manual_seed(3))
    c = semi_orthogonal(6, 4, torch.Generator().manual_seed(4))
    assert torch.equal(a, b) and not torch.equal(a, c)
    # Haar: every entry has mean 0 (sd 1/sqrt(3)); LAPACK's sign convention alone would give
    # E[O_11] = -E|O_11| = -0.5
    gen = torch.Generator().manual_seed(0)
    draws = torch.stack([semi_orthogonal(3, 3, gen, dtype=torch.float64) for _ in range(400)])
    assert draws.mean(0).abs().max() < 0.15


def test_placements():
    spec = MLPSpec((1, 4, 4, 4, 1), "selu")
    assert skip_layers(spec, "all") == (1, 2, 3, 4)
    assert skip_layers(spec, SkipPlacement.HIDDEN) == (1, 2, 3)
    assert skip_layers(spec, "interior") == (2, 3)
    skips = skip_matrices(spec, torch.Generator().manual_seed(0))
    assert {k: tuple(v.shape) for k, v in skips.items()} == {
        "O1": (4, 1), "O2": (4, 4), "O3": (4, 4), "O4": (1, 4)}


def _reference_forward(params, x, spec, skips):
    """Eq. 7 of Kurle et al. written out one input at a time."""
    outs = []
    for xi in x:
        h = xi
        for l in range(1, spec.n_layers + 1):
            inp = h if l == 1 else torch.selu(h)
            new = params[f"W{l}"] @ inp + params[f"b{l}"]
            if f"O{l}" in skips:
                new = new + skips[f"O{l}"] @ h
            h = new
        outs.append(h)
    return torch.stack(outs)


def test_forward_matches_equation_7_and_reduces_to_the_plain_mlp():
    spec = MLPSpec((2, 5, 4, 3), "selu")
    gen = torch.Generator().manual_seed(1)
    params = init_mlp(spec, gen, dtype=torch.float64)
    skips = skip_matrices(spec, gen, dtype=torch.float64)
    x = torch.randn(7, 2, generator=gen, dtype=torch.float64)
    assert torch.allclose(orthoskip_forward(params, x, spec, skips), _reference_forward(params, x, spec, skips))
    assert torch.allclose(orthoskip_forward(params, x, spec, {}), mlp_forward(params, x, spec))


def test_skips_break_the_permutation_symmetry():
    spec = MLPSpec((1, 6, 6, 1), "selu")
    gen = torch.Generator().manual_seed(2)
    params = init_mlp(spec, gen, dtype=torch.float64)
    skips = skip_matrices(spec, gen, dtype=torch.float64)
    x = torch.linspace(-1, 1, 11, dtype=torch.float64)[:, None]
    moved = apply_group_element(params, spec, sample_group_element(spec, gen))
    assert torch.allclose(mlp_forward(moved, x, spec), mlp_forward(params, x, spec))
    assert not torch.allclose(orthoskip_forward(moved, x, spec, skips), orthoskip_forward(params, x, spec, skips))


def test_skip_matrices_are_not_trained():
    spec = MLPSpec((1, 4, 4, 1), "selu")
    gen = torch.Generator().manual_seed(0)
    skips = skip_matrices(spec, gen)
    frozen = {k: v.clone() for k, v in skips.items()}
    model = mfvi.BayesMLP(spec, skips)
    q = mfvi.init_mean_field(model, gen)
    x = torch.rand(16, 1, generator=gen) * 2 - 1
    y = torch.sinc(4 * x)
    result = mfvi.fit(model, q, x, y, n_steps=20, n_samples=2, lr=1e-2, generator=gen, progress=False)
    assert not torch.equal(result.q.mean["W2"], q.mean["W2"])  # the weights did move
    for k, v in model.skips.items():
        assert torch.equal(v, frozen[k]) and not v.requires_grad and v.grad is None
        gram = v.T @ v if v.shape[0] >= v.shape[1] else v @ v.T
        assert torch.allclose(gram, torch.eye(min(v.shape)), atol=1e-6)

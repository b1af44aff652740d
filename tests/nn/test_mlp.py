import pytest
import torch

from symlib.nn.mlp import Activation, MLPSpec, init_mlp, mlp_forward


def test_shapes_and_param_count():
    spec = MLPSpec((3, 5, 4, 2), "tanh")
    params = init_mlp(spec, torch.Generator().manual_seed(0))
    assert {k: tuple(v.shape) for k, v in params.items()} == spec.shapes()
    assert spec.n_params == 3 * 5 + 5 + 5 * 4 + 4 + 4 * 2 + 2
    assert spec.activation is Activation.TANH


def test_forward_matches_explicit_formula():
    spec = MLPSpec((2, 3, 1), "relu")
    p = init_mlp(spec, torch.Generator().manual_seed(1), dtype=torch.float64)
    x = torch.randn(7, 2, dtype=torch.float64)
    h1 = x @ p["W1"].T + p["b1"]  # f_1 = id: the first layer sees the raw input
    expected = torch.relu(h1) @ p["W2"].T + p["b2"]
    assert torch.allclose(mlp_forward(p, x, spec), expected)


def test_vmap_over_an_ensemble_equals_a_loop():
    spec = MLPSpec((2, 4, 3), "selu")
    members = [init_mlp(spec, torch.Generator().manual_seed(s)) for s in range(5)]
    stacked = {k: torch.stack([m[k] for m in members]) for k in members[0]}
    x = torch.randn(6, 2)
    batched = torch.func.vmap(lambda p: mlp_forward(p, x, spec))(stacked)
    assert torch.allclose(batched, torch.stack([mlp_forward(m, x, spec) for m in members]), atol=1e-6)


def test_bad_widths():
    with pytest.raises(ValueError):
        MLPSpec((3,))
    with pytest.raises(ValueError):
        MLPSpec((3, 0, 1))

"""The unit-vector MLP of symlib.nn.constrained (no Stan needed)."""

import math

import pytest
import torch
from scipy import stats

from symlib import transforms as tf
from symlib.nn import constrained as idf
from symlib.nn.mlp import MLPSpec, mlp_forward

SPEC = MLPSpec((4, 3, 2))


def test_size_and_unit_rows():
    d = idf.n_unit_vector_mlp(SPEC)
    assert d == 3 * 2 + 3 * 2 + 3 + 2 * 3 + 2
    z = torch.randn(5, d, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    params, log_prior = idf.unit_vector_mlp(z, SPEC)
    assert params["W1"].shape == (5, 3, 4) and params["W2"].shape == (5, 2, 3)
    assert torch.allclose(params["W1"].norm(dim=-1), torch.ones(5, 3, dtype=torch.float64))
    assert log_prior.shape == (5,)
    # the network is an ordinary MLP of the spec
    one = {k: v[1] for k, v in params.items()}
    x = torch.randn(7, 4, dtype=torch.float64)
    assert mlp_forward(one, x, SPEC).shape == (7, 2)


def test_log_prior_by_hand():
    d = idf.n_unit_vector_mlp(SPEC)
    z = torch.randn(d, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    params, log_prior = idf.unit_vector_mlp(z, SPEC, prior_sd=0.7)
    p, u = z[:6].reshape(3, 2), z[6:12].reshape(3, 2)
    w1, corr = tf.unit_vector_from_unconstrained(p, u)
    assert torch.equal(w1, params["W1"])
    rest = torch.cat([params[k].reshape(-1) for k in ("b1", "W2", "b2")]).numpy()
    expected = corr.sum().item() + stats.norm.logpdf(rest, 0, 0.7).sum()
    assert log_prior.item() == pytest.approx(expected, rel=1e-12)
    assert math.isfinite(log_prior.item())


def test_needs_one_hidden_layer_and_two_inputs():
    with pytest.raises(ValueError, match="one hidden layer"):
        idf.n_unit_vector_mlp(MLPSpec((1, 3, 1)))
    with pytest.raises(ValueError, match="one hidden layer"):
        idf.n_unit_vector_mlp(MLPSpec((4, 3, 3, 1)))

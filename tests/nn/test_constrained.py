"""The Stan programs of chapter 4 against their torch twins (symlib.nn.constrained), and a tiny NUTS.

Builds the three programs with PyStan (compiled once per machine, cached by httpstan under
``~/.cache/httpstan``; the first run on a fresh machine compiles them, a few minutes in all).
"""

import math

import numpy as np
import pytest
import torch

from symlib import transforms as tf
from symlib.inference import stan as st
from symlib.nn import constrained as idf

N, D, H = 15, 4, 3


def _data():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(N, D, generator=gen, dtype=torch.float64)
    y = torch.randn(N, generator=gen, dtype=torch.float64)
    return x, y


PRIORS = {
    "unconstrained": [idf.NetPrior(w_laplace=True), idf.NetPrior(w_laplace=False, w_scale=0.9)],
    "ordered": [idf.NetPrior(w_laplace=True, sigma_scale=2.0)],
    "constrained": [idf.NetPrior(angle_jacobian=True), idf.NetPrior(angle_jacobian=False, w_laplace=False)],
}


@pytest.fixture(scope="module")
def built():
    out = {}
    for name in st.MODELS:
        for i, prior in enumerate(PRIORS[name]):
            x, y = _data()
            out[name, i] = st.build(name, idf.stan_data(name, x, y, H, prior), seed=1)
    return out


@pytest.mark.parametrize("name", st.MODELS)
def test_parameter_layout_matches_stan(built, name):
    model = built[name, 0]
    d = idf.n_unconstrained(name, D, H)
    gen = torch.Generator().manual_seed(3)
    z = torch.randn(d, generator=gen, dtype=torch.float64)
    flat = model.constrain(z.numpy())
    params, _ = idf.unpack(name, z, D, H)
    # Stan writes constrained values column-major (arrays too: p.1.1, p.2.1, ...), declared
    # parameters first, then transformed parameters; it reads unconstrained ones array by array.
    expected = []
    order = ["p", "t", "b1", "W2", "b2", "sigma", "W1"] if name == "constrained" else \
        ["W1", "b1", "W2", "b2", "sigma"]
    for key in order:
        v = params[key]
        expected.append(v.transpose(-1, -2).reshape(-1) if key in ("W1", "t", "p") else v.reshape(-1))
    expected = torch.cat(expected).numpy()
    assert flat.shape == expected.shape
    np.testing.assert_allclose(flat, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", st.MODELS)
def test_torch_log_density_and_gradient_equal_stans(built, name):
    d = idf.n_unconstrained(name, D, H)
    gen = torch.Generator().manual_seed(7)
    for i, prior in enumerate(PRIORS[name]):
        model = built[name, i]
        x, y = _data()
        for _ in range(4):
            z = (1.5 * torch.randn(d, generator=gen, dtype=torch.float64)).requires_grad_(True)
            lp = idf.log_density(name, z, x, y, prior)
            (grad,) = torch.autograd.grad(lp, z)
            assert math.isclose(lp.item(), model.log_prob(z.detach().numpy()), rel_tol=1e-10, abs_tol=1e-8)
            np.testing.assert_allclose(grad.numpy(), model.grad_log_prob(z.detach().numpy()),
                                       rtol=1e-8, atol=1e-8)


def test_log_density_batches():
    x, y = _data()
    z = torch.randn(5, 2, idf.n_unconstrained("constrained", D, H), dtype=torch.float64)
    lp = idf.log_density("constrained", z, x, y)
    assert lp.shape == (5, 2)
    assert torch.allclose(lp[3, 1], idf.log_density("constrained", z[3, 1], x, y))


def test_constrained_rows_are_unit_vectors_and_biases_ordered():
    z = torch.randn(50, idf.n_unconstrained("constrained", D, H), dtype=torch.float64)
    params, _ = idf.unpack("constrained", z, D, H)
    assert torch.allclose(params["W1"].norm(dim=-1), torch.ones(50, H, dtype=torch.float64))
    assert bool((params["b1"].diff(dim=-1) > 0).all())
    assert torch.allclose(params["W1"][..., 0, :], tf.unit_vector_from_unconstrained(
        params["p"][..., 0, :], z[..., 2 * H:2 * H + H * (D - 2)].reshape(50, D - 2, H)[..., 0])[0])


def test_tiny_nuts_run(built):
    fit = built["ordered", 0].sample(chains=2, warmup=30, draws=20)
    assert fit.draws["W1"].shape == (2, 20, H, D)
    assert fit.draws["sigma"].shape == (2, 20)
    assert bool((np.diff(fit.draws["b1"], axis=-1) > 0).all())
    for f in ("treedepth__", "n_leapfrog__", "divergent__", "stepsize__"):
        assert fit.sampler[f].shape == (2, 20)
    assert np.all(fit.sampler["n_leapfrog__"] >= 1)
    assert np.all(np.isfinite(fit.sampling_s)) and fit.wall_s > 0
    again = built["ordered", 0].sample(chains=2, warmup=30, draws=20)      # same seed: same draws
    np.testing.assert_array_equal(again.draws["W1"], fit.draws["W1"])


def test_program_names():
    assert "ordered[H] b1" in st.program("ordered")
    with pytest.raises(ValueError, match="valid"):
        st.program("nope")

"""The ELBO-gap estimator KL[q0 || q_mix] against numerical integration and brute force."""

import math

import numpy as np
import pytest
import torch

from symlib.chapters.ortho_skip import gap
from symlib.nn.mlp import MLPSpec, init_mlp, mlp_forward

F64 = torch.float64


def test_permutation_indices_enumerate_the_symmetry_group():
    spec = MLPSpec((1, 3, 2, 1), "selu")
    perms = gap.permutation_indices(spec)
    assert perms.shape == (math.factorial(3) * math.factorial(2), spec.n_params)
    assert torch.equal(perms[0], torch.arange(spec.n_params))
    assert len({tuple(p.tolist()) for p in perms}) == len(perms)
    params = init_mlp(spec, torch.Generator().manual_seed(0), dtype=F64)
    flat = gap.flatten_params(params, spec)
    assert torch.equal(gap.flatten_params(gap.unflatten_params(flat, spec), spec), flat)
    x = torch.linspace(-2, 2, 7, dtype=F64)[:, None]
    reference = mlp_forward(params, x, spec)
    copies = {tuple(flat[p].tolist()) for p in perms}
    assert len(copies) == len(perms)  # all copies distinct ...
    for p in perms:  # ... and all compute the same function: every hidden layer permutes
        assert torch.allclose(mlp_forward(gap.unflatten_params(flat[p], spec), x, spec), reference)
    assert gap.permutation_indices(spec, layers=[2]).shape[0] == 2
    assert gap.log_group_order(spec) == pytest.approx(math.log(12))
    assert gap.log_group_order(spec, [2]) == pytest.approx(math.log(2))


def _kl_by_quadrature(mean, sd):
    """KL[q0 || (q0 + q_swap)/2] in 2-D on a dense grid (q_swap swaps the two coordinates)."""
    lim = 9.0 * float(sd.max()) + float(mean.abs().max())
    grid = np.linspace(-lim, lim, 1201)
    w1, w2 = np.meshgrid(grid, grid, indexing="ij")
    m, s = mean.numpy(), sd.numpy()

    def log_normal(a, b, mu, sig):
        return (-0.5 * ((a - mu[0]) / sig[0]) ** 2 - 0.5 * ((b - mu[1]) / sig[1]) ** 2
                - np.log(sig[0] * sig[1]) - np.log(2 * np.pi))

    lq0 = log_normal(w1, w2, m, s)
    lq1 = log_normal(w1, w2, m[::-1], s[::-1])
    integrand = np.exp(lq0) * (lq0 - np.logaddexp(lq0, lq1) + np.log(2))
    return np.trapezoid(np.trapezoid(integrand, grid, axis=1), grid)


@pytest.mark.parametrize("mean, sd", [((0.3, -0.5), (0.7, 1.2)), ((1.5, -1.0), (0.5, 0.5)), ((0.0, 0.0), (1.0, 0.4))])
def test_two_component_gap_matches_numerical_integration(mean, sd):
    mean, sd = torch.tensor(mean, dtype=F64), torch.tensor(sd, dtype=F64)
    perms = torch.tensor([[0, 1], [1, 0]])
    est = gap.mixture_gap(mean, sd, perms, 100_000, torch.Generator().manual_seed(1))
    exact = _kl_by_quadrature(mean, sd)
    assert abs(est.estimate - exact) < 5 * est.standard_error + 1e-4, (est, exact)
    assert -1e-12 <= exact <= math.log(2)


def _brute_force_terms(mean, sd, perms, eps):
    """Per-sample log q0(w) - log q_mix(w), one Normal.log_prob per mixture component."""
    w = mean + sd * eps
    log_q0 = torch.distributions.Normal(mean, sd).log_prob(w).sum(-1)
    comps = torch.stack([torch.distributions.Normal(mean[p], sd[p]).log_prob(w).sum(-1) for p in perms], -1)
    return log_q0 - (torch.logsumexp(comps, -1) - math.log(len(perms)))


def test_estimator_agrees_with_a_brute_force_implementation():
    spec = MLPSpec((1, 3, 2, 1), "selu")
    perms = gap.permutation_indices(spec)
    gen = torch.Generator().manual_seed(2)
    mean = 0.8 * torch.randn(spec.n_params, generator=gen, dtype=F64)
    sd = 0.5 + torch.rand(spec.n_params, generator=gen, dtype=F64)
    n = 3000
    est = gap.mixture_gap(mean, sd, perms, n, torch.Generator().manual_seed(3), chunk=n)
    eps = torch.randn(n, spec.n_params, generator=torch.Generator().manual_seed(3), dtype=F64)
    ref = _brute_force_terms(mean, sd, perms, eps)
    assert est.estimate == pytest.approx(ref.mean().item(), abs=1e-10)
    assert est.standard_error == pytest.approx(ref.std().item() / math.sqrt(n), rel=1e-8)
    chunked = gap.mixture_gap(mean, sd, perms, n, torch.Generator().manual_seed(9), chunk=512)
    assert abs(chunked.estimate - est.estimate) < 5 * math.hypot(chunked.standard_error, est.standard_error)


def test_gap_is_zero_at_the_prior_bounded_and_reaches_log_n():
    spec = MLPSpec((1, 3, 3, 1), "selu")
    curve = gap.gap_curve(spec, [0.0, 0.1, 1.0, 30.0], 2000, torch.Generator().manual_seed(4))
    assert curve.log_n == pytest.approx(2 * math.log(6))
    assert abs(curve.gap[0]) < 1e-12
    assert (curve.gap <= curve.log_n + 1e-9).all()
    assert (curve.gap >= -4 * curve.standard_error - 1e-12).all()
    assert curve.gap[-1] == pytest.approx(curve.log_n, abs=1e-6)
    assert (curve.gap.diff() > 0).all()
    # the bound as printed in the paper (hidden layers 2..L only) is exceeded
    assert curve.gap[-1] > gap.log_group_order(spec, [2]) + 1.0


def test_collapsed_units_lower_the_gap_to_the_distinct_copies():
    spec = MLPSpec((1, 3, 3, 1), "selu")
    c = gap.collapse_curve(spec, [0, 1, 2, 3], 1000, torch.Generator().manual_seed(5), scale=30.0)
    expected = [0.0, 2 * math.log(3), 2 * math.log(6), 2 * math.log(6)]
    assert torch.allclose(c.limit, torch.tensor(expected, dtype=F64))
    assert torch.allclose(c.gap, c.limit, atol=1e-6)


def test_refuses_huge_groups():
    with pytest.raises(ValueError, match="at most"):
        gap.permutation_indices(MLPSpec((1, 32, 1)))

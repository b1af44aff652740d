"""Min-mass problem: invariance, agreement with the closed form and a generic convex solver,
uniqueness of the optimum."""

import numpy as np
import pytest
import torch

from symlib import symmetry as sym
from symlib.nn import convnets as cn
from symlib.nn.mlp import MLPSpec, init_mlp, mlp_forward
from symlib.symmetry import minmass as mm


def _mlp(widths, seed):
    spec = MLPSpec(widths, "relu")
    return spec, init_mlp(spec, torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_hidden_layer_matches_closed_form(seed):
    spec, p = _mlp((3, 6, 2), seed)
    ps = sym.mlp_permutation_spec(spec)
    terms = mm.mass_terms(p, ps)
    closed = mm.closed_form_one_hidden(p["W1"], p["W2"]).numpy()
    np.testing.assert_allclose(mm.solve_min_mass(terms), closed, atol=1e-4)
    np.testing.assert_allclose(mm.solve_min_mass_scipy(terms), closed, atol=1e-7)


def test_mass_terms_reproduce_mass_at_any_scale():
    spec, p = _mlp((3, 5, 4, 2), 3)
    ps = sym.mlp_permutation_spec(spec)
    terms = mm.mass_terms(p, ps)
    assert terms.value(np.zeros(terms.n)) == pytest.approx(mm.mass(p, ps).item())
    lam = np.random.default_rng(0).normal(size=terms.n)
    scales = mm.scales_from_log(lam, terms, ps)
    g = sym.GroupElement({k: torch.arange(n) for k, n in ps.perm_sizes.items()}, None, scales)
    assert terms.value(lam) == pytest.approx(mm.mass(sym.apply_group_element(p, ps, g), ps).item())


@pytest.mark.parametrize("arch", ["mlp", "optunet"])
def test_min_mass_keeps_function_and_lowers_mass(arch):
    gen = torch.Generator().manual_seed(5)
    if arch == "mlp":
        spec, p = _mlp((4, 7, 5, 3), 5)
        ps = sym.mlp_permutation_spec(spec)
        x = torch.randn(32, 4, generator=gen, dtype=torch.float64)
        f = lambda q: mlp_forward(q, x, spec)
    else:
        p = cn.init_optunet(gen, dtype=torch.float64)
        ps = sym.optunet_permutation_spec()
        x = torch.randn(8, 1, 28, 28, generator=gen, dtype=torch.float64)
        f = lambda q: cn.optunet_forward(q, x)
    # move the net far from its min-mass point first: the optimum must not depend on it
    scales = sym.sample_spec_element(ps, gen, log_scale_sd=1.0).scales
    ident = {k: torch.arange(n) for k, n in ps.perm_sizes.items()}
    moved = sym.apply_group_element(p, ps, sym.GroupElement(ident, None, scales))
    opt = mm.min_mass(moved, ps)
    torch.testing.assert_close(f(opt), f(p), rtol=1e-9, atol=1e-9)
    assert mm.mass(opt, ps) < mm.mass(moved, ps)
    # unique optimum: the same min-mass network from both members of the scaling orbit
    opt_p = mm.min_mass(p, ps)
    for k in opt:
        torch.testing.assert_close(opt[k], opt_p[k], rtol=1e-3, atol=1e-4)


def test_optimum_unique_and_generic_solver_agrees():
    gen = torch.Generator().manual_seed(7)
    p = cn.init_optunet(gen, dtype=torch.float64)
    ps = sym.optunet_permutation_spec()
    terms = mm.mass_terms(p, ps)
    lam = mm.solve_min_mass(terms)
    starts = [np.random.default_rng(s).normal(scale=2.0, size=terms.n) for s in range(3)]
    sols = [mm.solve_min_mass_scipy(terms, lam0) for lam0 in starts]
    for s in sols:
        np.testing.assert_allclose(s, sols[0], atol=1e-6)
    np.testing.assert_allclose(lam, sols[0], atol=1e-3)
    assert terms.value(lam) == pytest.approx(terms.value(sols[0]), rel=1e-6)
    # strict convexity at the optimum: the Hessian of M(lam) is positive definite
    A = np.zeros((len(terms.coef), terms.n + 1))
    np.add.at(A, (np.arange(len(terms.coef)), terms.inc), 2.0)
    np.add.at(A, (np.arange(len(terms.coef)), terms.out), -2.0)
    A = A[:, : terms.n]
    w = terms.coef * np.exp(A @ sols[0])
    assert np.linalg.eigvalsh((A.T * w) @ A).min() > 1e-8


def test_biases_rescaled_not_counted():
    spec, p = _mlp((2, 3, 1), 9)
    ps = sym.mlp_permutation_spec(spec)
    big_bias = dict(p, b1=p["b1"] * 100)
    assert mm.mass(big_bias, ps).item() == pytest.approx(mm.mass(p, ps).item())
    g = mm.min_mass_element(p, ps)
    opt = mm.min_mass(p, ps)
    torch.testing.assert_close(opt["b1"], p["b1"] * g.scales["P1"])

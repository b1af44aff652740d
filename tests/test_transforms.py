"""Transforms: invertible, log-Jacobians equal to autograd's, unit vectors uniform on the sphere."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import stats

from symlib.transforms import (
    angle_from_point,
    angles_from_unit_vector,
    angles_log_abs_det_jacobian,
    bounded_from_unconstrained,
    bounded_log_abs_det_jacobian,
    ordered_from_unconstrained,
    ordered_log_abs_det_jacobian,
    point_log_density,
    unconstrained_from_bounded,
    unconstrained_from_ordered,
    unit_vector_from_angles,
    unit_vector_from_unconstrained,
)

vectors = st.integers(1, 8).flatmap(
    lambda k: arrays(np.float64, (k,), elements=st.floats(-4.0, 4.0, allow_nan=False))
)
# D - 1 angles, D = 2..7, kept a little inside the chart so the inverse is well conditioned
angle_vectors = st.integers(1, 6).flatmap(
    lambda k: st.tuples(
        st.floats(-3.1, 3.1), arrays(np.float64, (k - 1,), elements=st.floats(-1.5, 1.5))
    )
)


def _angles(draw) -> torch.Tensor:
    first, rest = draw
    return torch.cat([torch.tensor([first], dtype=torch.float64), torch.as_tensor(rest)])


def _uniform_on_sphere(n: int, dim: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, dim, generator=g, dtype=torch.float64)
    return z / torch.linalg.vector_norm(z, dim=-1, keepdim=True)


# --------------------------------------------------------------------------- ordered


@settings(max_examples=60, deadline=None)
@given(vectors)
def test_ordered_is_strictly_increasing_and_round_trips(y):
    y = torch.as_tensor(y)
    x = ordered_from_unconstrained(y)
    assert torch.all(x[1:] > x[:-1])
    assert x[0] == y[0]
    assert torch.allclose(unconstrained_from_ordered(x), y, atol=1e-9)


@settings(max_examples=30, deadline=None)
@given(vectors)
def test_log_jacobian_matches_autograd(y):
    y = torch.as_tensor(y)
    jac = torch.autograd.functional.jacobian(ordered_from_unconstrained, y)
    sign, logdet = torch.linalg.slogdet(jac)
    assert sign > 0
    assert torch.allclose(ordered_log_abs_det_jacobian(y), logdet, atol=1e-9)


def test_matches_the_definition_and_broadcasts_over_batches():
    y = torch.tensor([[0.5, 0.0, -1.0], [-2.0, 1.0, 2.0]], dtype=torch.float64)
    x = ordered_from_unconstrained(y)
    expected = torch.tensor(
        [
            [0.5, 0.5 + 1.0, 0.5 + 1.0 + np.exp(-1.0)],
            [-2.0, -2.0 + np.e, -2.0 + np.e + np.exp(2.0)],
        ],
        dtype=torch.float64,
    )
    assert torch.allclose(x, expected)
    assert torch.allclose(
        ordered_log_abs_det_jacobian(y), torch.tensor([-1.0, 3.0], dtype=torch.float64)
    )
    assert torch.allclose(unconstrained_from_ordered(x), y)


def test_inverse_rejects_unordered_input():
    with pytest.raises(ValueError, match="strictly increasing"):
        unconstrained_from_ordered(torch.tensor([0.0, 1.0, 1.0]))


# --------------------------------------------------------------------------- bounded


@settings(max_examples=40, deadline=None)
@given(vectors, st.floats(-5.0, 5.0), st.floats(0.1, 10.0))
def test_bounded_stays_inside_round_trips_and_matches_autograd(y, lo, width):
    y, hi = torch.as_tensor(y), lo + width
    x = bounded_from_unconstrained(y, lo, hi)
    assert torch.all((x > lo) & (x < hi))
    assert torch.allclose(unconstrained_from_bounded(x, lo, hi), y, atol=1e-7)
    jac = torch.autograd.functional.jacobian(lambda v: bounded_from_unconstrained(v, lo, hi), y)
    logdet = torch.linalg.slogdet(jac)[1]
    assert torch.allclose(bounded_log_abs_det_jacobian(y, lo, hi).sum(), logdet, atol=1e-9)


def test_bounded_log_jacobian_is_finite_far_out_and_inverse_checks_bounds():
    y = torch.tensor([-800.0, 0.0, 800.0], dtype=torch.float64)
    logdet = bounded_log_abs_det_jacobian(y, -1.0, 1.0)
    assert torch.isfinite(logdet).all()
    assert torch.allclose(
        logdet,
        torch.tensor(
            [-800.0 + math.log(2), math.log(0.5), -800.0 + math.log(2)], dtype=torch.float64
        ),
    )
    with pytest.raises(ValueError, match="open interval"):
        unconstrained_from_bounded(torch.tensor([0.0, 1.0]), -1.0, 1.0)


# --------------------------------------------------------------------------- unit vector


@settings(max_examples=60, deadline=None)
@given(angle_vectors)
def test_unit_vector_has_norm_one_and_round_trips(draw):
    theta = _angles(draw)
    w = unit_vector_from_angles(theta)
    assert w.shape == (theta.shape[0] + 1,)
    assert torch.allclose(torch.linalg.vector_norm(w), torch.tensor(1.0, dtype=torch.float64))
    assert torch.allclose(angles_from_unit_vector(w), theta, atol=1e-8)


@settings(max_examples=40, deadline=None)
@given(angle_vectors)
def test_angle_log_jacobian_is_the_surface_element_of_the_embedding(draw):
    """``sum_{k>=2} (k-1) log cos t_k == log sqrt(det(J^T J))`` for the D x (D-1) Jacobian."""
    theta = _angles(draw)
    jac = torch.autograd.functional.jacobian(unit_vector_from_angles, theta)
    log_area = 0.5 * torch.linalg.slogdet(jac.T @ jac)[1]
    assert torch.allclose(angles_log_abs_det_jacobian(theta), log_area, atol=1e-8)


def test_unit_vector_matches_the_definition_and_broadcasts():
    t1, t2, t3 = 0.3, -0.7, 1.1
    theta = torch.tensor([[t1, t2, t3], [0.0, 0.0, 0.0]], dtype=torch.float64)
    c, s = math.cos, math.sin
    expected = torch.tensor(
        [
            [c(t1) * c(t2) * c(t3), s(t1) * c(t2) * c(t3), s(t2) * c(t3), s(t3)],
            [1.0, 0.0, 0.0, 0.0],
        ],
        dtype=torch.float64,
    )
    assert torch.allclose(unit_vector_from_angles(theta), expected)
    assert torch.allclose(
        angles_log_abs_det_jacobian(theta),
        torch.tensor([math.log(c(t2)) + 2 * math.log(c(t3)), 0.0], dtype=torch.float64),
    )
    two_d = unit_vector_from_angles(torch.tensor([[0.5]], dtype=torch.float64))
    assert torch.allclose(two_d, torch.tensor([[c(0.5), s(0.5)]], dtype=torch.float64))
    assert angles_log_abs_det_jacobian(torch.tensor([0.5])).item() == 0.0
    batch = _uniform_on_sphere(7, 5, seed=1).reshape(7, 1, 5)
    assert torch.allclose(unit_vector_from_angles(angles_from_unit_vector(batch)), batch)


def test_angles_from_unit_vector_rejects_non_unit_input():
    with pytest.raises(ValueError, match="unit norm"):
        angles_from_unit_vector(torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64))


def test_point_angle_round_trips_and_density_is_standard_normal():
    theta = torch.linspace(-3.1, 3.1, 11, dtype=torch.float64)
    radius = torch.linspace(0.1, 3.0, 11, dtype=torch.float64)
    p = torch.stack([radius * torch.cos(theta), radius * torch.sin(theta)], dim=-1)
    assert torch.allclose(angle_from_point(p), theta)
    normal = torch.distributions.Normal(torch.tensor(0.0, dtype=torch.float64), 1.0)
    assert torch.allclose(point_log_density(p), normal.log_prob(p).sum(-1))


def test_unconstrained_correction_is_the_sum_of_its_parts():
    g = torch.Generator().manual_seed(3)
    p2 = torch.randn(6, 2, generator=g, dtype=torch.float64)
    y = torch.randn(6, 3, generator=g, dtype=torch.float64)
    w, corr = unit_vector_from_unconstrained(p2, y)
    w_plain, corr_plain = unit_vector_from_unconstrained(p2, y, include_angle_jacobian=False)
    theta = angles_from_unit_vector(w)
    assert w.shape == (6, 5) and corr.shape == (6,)
    assert torch.equal(w, w_plain)
    assert torch.allclose(theta[:, 0], angle_from_point(p2))
    assert torch.allclose(theta[:, 1:], bounded_from_unconstrained(y, -math.pi / 2, math.pi / 2))
    expected_plain = point_log_density(p2) + bounded_log_abs_det_jacobian(
        y, -math.pi / 2, math.pi / 2
    ).sum(-1)
    assert torch.allclose(corr_plain, expected_plain)
    assert torch.allclose(corr, expected_plain + angles_log_abs_det_jacobian(theta))
    w2, corr2 = unit_vector_from_unconstrained(p2, y[:, :0])  # D = 2
    assert torch.allclose(w2, p2 / torch.linalg.vector_norm(p2, dim=-1, keepdim=True))
    assert torch.allclose(corr2, point_log_density(p2))


# --------------------------------------------------------------------------- uniformity


def test_uniform_sphere_gives_angle_density_cos_for_d3_and_uniform_angles_are_rejected():
    """Sphere-uniform points mapped to angles: ``t_2`` has CDF ``(sin t + 1) / 2``, not uniform."""
    theta = angles_from_unit_vector(_uniform_on_sphere(4000, 3, seed=0)).numpy()
    with_jacobian = stats.kstest(theta[:, 1], lambda t: (np.sin(t) + 1) / 2)
    without = stats.kstest(theta[:, 1], stats.uniform(-np.pi / 2, np.pi).cdf)
    assert with_jacobian.pvalue > 0.01
    assert without.pvalue < 1e-10
    assert stats.kstest(theta[:, 0], stats.uniform(-np.pi, 2 * np.pi).cdf).pvalue > 0.01


@pytest.mark.parametrize("dim", [4, 5])
def test_uniform_sphere_angle_marginals_match_the_jacobian(dim):
    """Density ``∝ cos(t_k)^(k-1)``: ``(sin t_k + 1) / 2 ~ Beta(k/2, k/2)`` and
    ``E[cos t_k] = I_k / I_{k-1}`` with ``I_n = ∫ cos^n = sqrt(pi) Γ((n+1)/2) / Γ(n/2 + 1)``."""
    n = 20000
    theta = angles_from_unit_vector(_uniform_on_sphere(n, dim, seed=dim)).numpy()

    def log_wallis(m):
        return 0.5 * math.log(math.pi) + math.lgamma((m + 1) / 2) - math.lgamma(m / 2 + 1)

    for k in range(2, dim):
        t = theta[:, k - 1]
        assert stats.kstest((np.sin(t) + 1) / 2, stats.beta(k / 2, k / 2).cdf).pvalue > 1e-3
        mean_cos = math.exp(log_wallis(k) - log_wallis(k - 1))
        assert abs(np.cos(t).mean() - mean_cos) < 4 * np.cos(t).std() / math.sqrt(n)


@pytest.mark.parametrize("dim", [3, 4, 5])
def test_implied_prior_with_correction_is_uniform_on_the_sphere(dim):
    """Rejection-sample ``(p2, y)`` from ``exp(correction)``, map to ``w``, test uniformity.

    Proposal: ``p2 ~ N(0, I_2)``, ``y_k ~ Logistic(0, 1)``; its log density is the correction
    without the angle term minus ``(D - 2) log pi``, so the acceptance probability is
    ``exp(angle term) <= 1``. Each coordinate of a uniform point on ``S^{D-1}`` has
    ``(w_i + 1) / 2 ~ Beta((D-1)/2, (D-1)/2)``. Without the angle term every proposal is kept
    and the last coordinate is far from that law (too much mass near ±1).
    """
    g = torch.Generator().manual_seed(10 + dim)
    n = 12000
    p2 = torch.randn(n, 2, generator=g, dtype=torch.float64)
    u = torch.rand(n, dim - 2, generator=g, dtype=torch.float64)
    y = torch.logit(u)
    log_proposal = point_log_density(p2) + (torch.log(u) + torch.log1p(-u)).sum(-1)
    w, corr = unit_vector_from_unconstrained(p2, y)
    log_ratio = corr - log_proposal - (dim - 2) * math.log(math.pi)
    assert log_ratio.max() <= 1e-12
    keep = torch.rand(n, generator=g, dtype=torch.float64) < torch.exp(log_ratio)
    marginal = stats.beta((dim - 1) / 2, (dim - 1) / 2)
    for i in range(dim):  # several tests on one sample: a lower level than 1%
        assert stats.kstest((w[keep, i].numpy() + 1) / 2, marginal.cdf).pvalue > 1e-3
    w_plain, corr_plain = unit_vector_from_unconstrained(p2, y, include_angle_jacobian=False)
    assert torch.allclose(
        corr_plain - log_proposal, torch.tensor((dim - 2) * math.log(math.pi), dtype=torch.float64)
    )
    assert stats.kstest((w_plain[:, -1].numpy() + 1) / 2, marginal.cdf).pvalue < 1e-10

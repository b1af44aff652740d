"""ADVI recovers the exact Gaussian posterior of a conjugate Bayesian linear regression."""

import math

import pytest
import torch

from symlib.inference import advi

N, D, SIGMA, TAU = 40, 3, 0.5, 1.0


def _problem():
    """``y = X b + N(0, SIGMA^2)``, ``b ~ N(0, TAU^2 I)``, correlated columns of ``X``.

    Posterior ``N(m, S)``: ``P = S^{-1} = X^T X / SIGMA^2 + I / TAU^2``, ``m = S X^T y / SIGMA^2``;
    evidence ``y ~ N(0, SIGMA^2 I + TAU^2 X X^T)``.
    """
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, D, generator=g, dtype=torch.float64)
    x[:, 1] += 0.8 * x[:, 0]
    y = x @ torch.tensor([1.0, -0.5, 0.3], dtype=torch.float64)
    y = y + SIGMA * torch.randn(N, generator=g, dtype=torch.float64)
    precision = x.T @ x / SIGMA**2 + torch.eye(D, dtype=torch.float64) / TAU**2
    cov = torch.linalg.inv(precision)
    mean = cov @ x.T @ y / SIGMA**2
    evidence_cov = SIGMA**2 * torch.eye(N, dtype=torch.float64) + TAU**2 * x @ x.T
    log_evidence = torch.distributions.MultivariateNormal(
        torch.zeros(N, dtype=torch.float64), evidence_cov
    ).log_prob(y)

    def log_joint(z):  # (..., D) -> (...)
        resid = y - z @ x.T
        log_lik = -0.5 * (resid**2).sum(-1) / SIGMA**2 - 0.5 * N * math.log(2 * math.pi * SIGMA**2)
        log_prior = -0.5 * (z**2).sum(-1) / TAU**2 - 0.5 * D * math.log(2 * math.pi * TAU**2)
        return log_lik + log_prior

    return log_joint, mean, cov, precision, log_evidence


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny tensors: a second intra-op thread only spins (10x slower on a loaded 2-core box)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def fits():
    log_joint, *_ = _problem()
    return {
        family: advi.fit(
            log_joint,
            D,
            family,
            generator=torch.Generator().manual_seed(1),
            n_steps=1000,
            lr=0.02,
            init_scale=0.1,  # near the posterior's scale (about 0.08): fewer steps
        )
        for family in advi.Family
    }


def test_full_rank_recovers_the_posterior_and_the_evidence(fits):
    log_joint, mean, cov, _, log_evidence = _problem()
    q = fits[advi.Family.FULLRANK]
    sd = cov.diagonal().sqrt()
    assert torch.all((q.mean - mean).abs() < 0.1 * sd)
    fitted = q.scale_tril @ q.scale_tril.T
    assert torch.all((fitted - cov).abs() < 0.1 * sd[:, None] * sd[None, :])
    # the family contains the posterior, so max ELBO = log evidence (KL = 0)
    value = advi.elbo(q, log_joint, 20000, torch.Generator().manual_seed(2))
    assert abs(value - log_evidence) < 0.05


def test_mean_field_finds_the_closed_form_optimum(fits):
    """For a Gaussian target, argmin KL(q || p) over diagonal q has the posterior mean and
    variances ``1 / diag(P)`` (not ``diag(S)``); its ELBO is ``log Z - KL`` with
    ``KL = (sum log diag P - log det P) / 2``."""
    log_joint, mean, cov, precision, log_evidence = _problem()
    q = fits[advi.Family.MEANFIELD]
    sd = cov.diagonal().sqrt()
    assert torch.all((q.mean - mean).abs() < 0.1 * sd)
    assert torch.count_nonzero(torch.tril(q.scale_tril, diagonal=-1)) == 0
    variance = q.scale_tril.diagonal() ** 2
    assert torch.allclose(
        variance * precision.diagonal(), torch.ones(D, dtype=torch.float64), atol=0.1
    )
    assert torch.all(variance[:2] < 0.75 * cov.diagonal()[:2])  # the correlated pair: too narrow
    kl = 0.5 * (precision.diagonal().log().sum() - torch.logdet(precision))
    value = advi.elbo(q, log_joint, 20000, torch.Generator().manual_seed(2))
    assert abs(value - (log_evidence - kl)) < 0.05


def test_samples_entropy_and_trace():
    q = advi.ADVIResult(
        advi.Family.FULLRANK,
        torch.tensor([1.0, -2.0], dtype=torch.float64),
        torch.tensor([[2.0, 0.0], [0.5, 0.3]], dtype=torch.float64),
        torch.zeros(1, dtype=torch.float64),
        False,
    )
    draws = q.sample(50000, torch.Generator().manual_seed(0))
    assert draws.shape == (50000, 2)
    assert torch.allclose(draws.mean(0), q.mean, atol=0.03)
    assert torch.allclose(torch.cov(draws.T), q.scale_tril @ q.scale_tril.T, atol=0.05)
    assert torch.equal(draws, advi.sample(q, 50000, torch.Generator().manual_seed(0)))
    exact = torch.distributions.MultivariateNormal(q.mean, scale_tril=q.scale_tril).entropy()
    assert torch.allclose(advi.entropy(q.scale_tril), exact)


def test_fit_is_deterministic_and_stops_on_tol_rel_obj():
    def log_density(z):
        return -0.5 * ((z - 3.0) ** 2).sum(-1)

    def run():
        return advi.fit(
            log_density,
            2,
            "meanfield",
            generator=torch.Generator().manual_seed(5),
            n_steps=3000,
            lr=0.05,
            tol_rel_obj=0.05,
            eval_every=50,
        )

    first, second = run(), run()
    assert first.converged and len(first.elbo_trace) < 3000
    assert len(first.elbo_trace) % 50 == 0
    assert torch.equal(first.mean, second.mean) and torch.equal(first.elbo_trace, second.elbo_trace)
    assert torch.allclose(first.mean, torch.full((2,), 3.0, dtype=torch.float64), atol=0.3)


def test_non_finite_log_density_raises():
    with pytest.raises(FloatingPointError, match="non-finite"):
        advi.fit(
            lambda z: torch.full(z.shape[:-1], -math.inf, dtype=z.dtype),
            2,
            generator=torch.Generator().manual_seed(0),
            n_steps=5,
        )

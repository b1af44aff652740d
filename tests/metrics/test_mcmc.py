"""Split R-hat and bulk ESS against cases with known answers."""

import numpy as np
import pytest

from symlib.metrics.mcmc import autocovariance, bulk_ess, split_rhat


def _ar1(phi, chains, n, seed):
    rng = np.random.default_rng(seed)
    x = np.zeros((chains, n))
    x[:, 0] = rng.normal(size=chains) / np.sqrt(1 - phi**2)
    for t in range(1, n):
        x[:, t] = phi * x[:, t - 1] + rng.normal(size=chains)
    return x


def test_iid_draws_have_ess_near_the_number_of_draws_and_rhat_near_one():
    x = np.random.default_rng(0).normal(size=(4, 1000))
    assert 3400 < bulk_ess(x) < 4600
    assert abs(split_rhat(x) - 1) < 0.01


def test_ar1_ess_matches_its_integrated_autocorrelation_time():
    phi = 0.8
    x = _ar1(phi, 4, 5000, 1)
    expected = x.size * (1 - phi) / (1 + phi)          # tau = (1 + phi) / (1 - phi)
    assert bulk_ess(x) == pytest.approx(expected, rel=0.2)


def test_rhat_flags_chains_in_different_places():
    x = np.random.default_rng(2).normal(size=(4, 500))
    x[0] += 3.0
    assert split_rhat(x) > 1.2
    assert bulk_ess(x) < 0.5 * x.size


def test_single_chain_is_split_in_halves():
    x = np.concatenate([np.zeros(200), np.ones(200)]) + 0.01 * np.random.default_rng(3).normal(size=400)
    assert split_rhat(x) > 1.5


def test_autocovariance_lag_zero_is_the_variance():
    x = np.random.default_rng(4).normal(size=(2, 300))
    np.testing.assert_allclose(autocovariance(x)[:, 0], x.var(axis=1), rtol=1e-12)


def test_too_short_chains_are_refused():
    with pytest.raises(ValueError):
        bulk_ess(np.zeros((2, 3)))

"""R-hat and ESS against cases with known answers and a plain-numpy second implementation."""

import numpy as np
import pytest
from scipy import stats

from symlib.metrics.mcmc import bulk_ess, split_rhat, summary, tail_ess

# --------------------------------------------------------------------------- reference
# Vehtari et al. (2021), written out in numpy independently of ArviZ (which symlib wraps).


def _split(x):
    x = np.atleast_2d(np.asarray(x, dtype=float))
    n = x.shape[1] // 2
    return np.concatenate([x[:, :n], x[:, -n:]], axis=0)


def _z(x):
    """Rank normalisation: ``Phi^-1((rank - 3/8) / (S + 1/4))`` over all ``S`` pooled draws."""
    r = stats.rankdata(x, method="average").reshape(x.shape)
    return stats.norm.ppf((r - 0.375) / (x.size + 0.25))


def _rhat(z):
    """``sqrt(var_plus / W)``, ``var_plus = (n-1)/n W + B/n`` (eqs. 3-4)."""
    n = z.shape[1]
    w = z.var(axis=1, ddof=1).mean()
    b = n * z.mean(axis=1).var(ddof=1)
    return np.sqrt(((n - 1) / n * w + b / n) / w)


def ref_rhat(x):
    """Max of the bulk R-hat and the folded R-hat (on ``|x - median|``), both of split chains."""
    s = _split(x)
    return max(_rhat(_z(s)), _rhat(_z(np.abs(s - np.median(s)))))


def _ess(z):
    """``M n / tau``, autocorrelations combined over sequences, Geyer's initial monotone sequence.

    As in Stan, pairs ``rho_2k + rho_2k+1`` are summed up to the first non-positive one or lag
    ``n - 3``, whichever comes first, and the even lag of that last pair counts once if positive.
    """
    m, n = z.shape
    c = z - z.mean(1, keepdims=True)
    f = np.fft.rfft(c, n=2 * n, axis=1)
    acov = np.fft.irfft(f * np.conj(f), axis=1)[:, :n] / n
    mean_var = acov[:, 0].mean() * n / (n - 1)
    var_plus = mean_var * (n - 1) / n + (z.mean(1).var(ddof=1) if m > 1 else 0.0)
    rho = 1.0 - (mean_var - acov.mean(0)) / var_plus
    rho[0] = 1.0
    pairs = rho[: 2 * (n // 2)].reshape(-1, 2).sum(1)
    last = (n - 3) // 2
    bad = np.flatnonzero(pairs[:last] <= 0)
    stop = bad[0] if bad.size else last
    tail = max(rho[2 * stop], 0.0)
    tau = -1.0 + 2.0 * np.minimum.accumulate(pairs[:stop]).sum() + tail
    return m * n / max(tau, 1.0 / np.log10(m * n))


def ref_bulk_ess(x):
    return _ess(_z(_split(x)))


def ref_tail_ess(x):
    q05, q95 = np.quantile(x, [0.05, 0.95])
    return min(_ess(_split(x <= q05)), _ess(_split(x <= q95)))


def _ar1(phi, chains, n, seed):
    rng = np.random.default_rng(seed)
    x = np.zeros((chains, n))
    x[:, 0] = rng.normal(size=chains) / np.sqrt(1 - phi**2)
    for t in range(1, n):
        x[:, t] = phi * x[:, t - 1] + rng.normal(size=chains)
    return x


def _scaled(seed=0):
    """Four iid N(0, 1) chains, the first one's spread tripled: same location, different scale."""
    x = np.random.default_rng(seed).normal(size=(4, 1000))
    x[0] *= 3.0
    return x


# --------------------------------------------------------------------------- tests


def test_chains_differing_only_in_scale_are_flagged_by_the_folded_rhat():
    x = _scaled()
    s = _split(x)
    assert _rhat(_z(s)) < 1.01  # the bulk R-hat alone misses it
    assert split_rhat(x) > 1.1
    assert tail_ess(x) < 0.05 * x.size  # the extremes come from one chain only
    assert bulk_ess(x) > 0.5 * x.size


def test_folded_rhat_matches_a_hand_computation():
    # Two chains of 4, halves A1 = (-1, 2), A2 = (1, -2), B1 = (-3, 4), B2 = (3, -4); median 0.
    # Folded values: each A-half is {1, 2}, each B-half {3, 4}; pooled ranks 1.5, 3.5, 5.5, 7.5
    # (S = 8), so each A-half has z = (z1, z2), each B-half (-z2, -z1) with
    # z_i = Phi^-1((r_i - 3/8) / 8.25). Within-half variance W = (z1 - z2)^2 / 2; half means
    # +-m, m = (z1 + z2) / 2, so B / n = var(m, m, -m, -m) = 4 m^2 / 3 and, with n = 2,
    # R-hat = sqrt(1/2 + 4 m^2 / (3 W)).
    x = np.array([[-1.0, 2.0, 1.0, -2.0], [-3.0, 4.0, 3.0, -4.0]])
    z1, z2 = stats.norm.ppf(np.array([1.125, 3.125]) / 8.25)
    m, w = (z1 + z2) / 2, (z1 - z2) ** 2 / 2
    folded = np.sqrt(0.5 + 4 * m**2 / (3 * w))
    assert folded == pytest.approx(1.6186585697, rel=1e-9)
    assert _rhat(_z(_split(x))) < folded  # so the folded part decides
    assert split_rhat(x) == pytest.approx(folded, rel=1e-12)
    assert ref_rhat(x) == pytest.approx(folded, rel=1e-12)


@pytest.mark.parametrize("case", ["ar1", "scaled", "shifted"])
def test_agrees_with_the_numpy_reference(case):
    x = {
        "ar1": _ar1(0.7, 3, 400, 5),
        "scaled": _scaled(6),
        "shifted": np.random.default_rng(7).normal(size=(4, 300))
        + np.array([[0], [0], [0], [1.0]]),
    }[case]
    assert split_rhat(x) == pytest.approx(ref_rhat(x), rel=1e-12)
    assert bulk_ess(x) == pytest.approx(ref_bulk_ess(x), rel=1e-9)
    assert tail_ess(x) == pytest.approx(ref_tail_ess(x), rel=1e-9)


def test_iid_draws_have_ess_near_the_number_of_draws_and_rhat_near_one():
    x = np.random.default_rng(0).normal(size=(4, 1000))
    assert split_rhat(x) < 1.01
    assert 3400 < bulk_ess(x) < 4600
    assert 3400 < tail_ess(x) < 4600


def test_ar1_ess_matches_its_integrated_autocorrelation_time():
    phi = 0.8
    x = _ar1(phi, 4, 5000, 1)
    expected = x.size * (1 - phi) / (1 + phi)  # tau = (1 + phi) / (1 - phi)
    assert bulk_ess(x) == pytest.approx(expected, rel=0.2)


def test_rhat_flags_chains_in_different_places():
    x = np.random.default_rng(2).normal(size=(4, 500))
    x[0] += 3.0
    assert split_rhat(x) > 1.2
    assert bulk_ess(x) < 0.5 * x.size


def test_single_chain_is_split_in_halves():
    x = np.concatenate([np.zeros(200), np.ones(200)]) + 0.01 * np.random.default_rng(3).normal(
        size=400
    )
    assert split_rhat(x) > 1.5
    assert split_rhat(np.random.default_rng(3).normal(size=400)) < 1.02


def test_several_quantities_give_one_value_each_and_summary_takes_the_worst():
    rng = np.random.default_rng(8)
    x = rng.normal(size=(4, 200, 2, 3))
    x[0, :, 1, 2] *= 3.0
    rhat, bulk, tail = split_rhat(x), bulk_ess(x), tail_ess(x)
    assert rhat.shape == bulk.shape == tail.shape == (2, 3)
    assert rhat[1, 2] == split_rhat(x[:, :, 1, 2])
    assert tail[0, 1] == tail_ess(x[:, :, 0, 1])
    s = summary(x)
    assert (s.rhat_max, s.bulk_ess_min, s.tail_ess_min) == (rhat.max(), bulk.min(), tail.min())
    assert s.rhat_max == rhat[1, 2] > 1.1


def test_too_short_chains_are_refused():
    with pytest.raises(ValueError):
        bulk_ess(np.zeros((2, 3)))
    with pytest.raises(ValueError):
        split_rhat(np.zeros(7))


# a constant quantity has no within-chain variance: ArviZ's R-hat divides 0 by 0 (numpy warns) and
# gives the NaN this test asks the summary to keep
@pytest.mark.filterwarnings("ignore:invalid value encountered in scalar divide:RuntimeWarning")
def test_summary_does_not_hide_a_quantity_whose_chains_never_moved():
    # issue 26: one quantity stuck at one value in every chain gave R-hat 1.0003 and ESS 3926,
    # because the worst case skipped ArviZ's NaN for it
    rng = np.random.default_rng(11)
    x = rng.normal(size=(4, 500, 3))
    x[:, :, 1] = 0.25
    assert np.isnan(split_rhat(x)[1])
    assert np.isnan(summary(x).rhat_max)  # (ArviZ's ESS of a constant is the draw count)
    assert summary(x[..., [0, 2]]).rhat_max < 1.01  # the moving quantities alone look mixed


def test_summary_of_chains_stuck_at_different_values_is_not_mixed():
    x = np.repeat(np.arange(4.0)[:, None], 300, axis=1)  # chain c sits at value c
    assert not summary(x).rhat_max <= 1.01  # NaN or infinite: either way not mixed

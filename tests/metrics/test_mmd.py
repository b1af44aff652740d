"""The unbiased MMD^2 estimator, the kernel bank, the bandwidth rule and the layer weighting."""

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from symlib.metrics import mmd


def _double_loop_mmd2(x, y, k):
    """Gretton et al. (2012, Lemma 6), written out term by term."""
    n, m = len(x), len(y)
    sxx = sum(k(x[i], x[j]) for i in range(n) for j in range(n) if i != j)
    syy = sum(k(y[i], y[j]) for i in range(m) for j in range(m) if i != j)
    sxy = sum(k(x[i], y[j]) for i in range(n) for j in range(m))
    return sxx / (n * (n - 1)) + syy / (m * (m - 1)) - 2 * sxy / (n * m)


def _gauss(l):
    return lambda a, b: math.exp(-sum((ai - bi) ** 2 for ai, bi in zip(a, b)) / l**2)


def _laplace(l):
    return lambda a, b: math.exp(-sum(abs(ai - bi) for ai, bi in zip(a, b)) / l)


def _sample(seed, n=7, m=5, d=3, shift=0.0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=gen, dtype=torch.float64)
    y = torch.randn(m, d, generator=gen, dtype=torch.float64) + shift
    return x, y


def test_estimator_matches_double_loop():
    x, y = _sample(0)
    xl, yl = x.tolist(), y.tolist()
    for l in (0.5, 1.3, 4.0):
        got = mmd.unbiased_mmd2(x, y, mmd.gaussian_kernel(l))
        assert got.item() == pytest.approx(_double_loop_mmd2(xl, yl, _gauss(l)), abs=1e-12)
        got = mmd.unbiased_mmd2(x, y, mmd.laplace_kernel(l))
        assert got.item() == pytest.approx(_double_loop_mmd2(xl, yl, _laplace(l)), abs=1e-12)


def test_kernel_bank_matches_double_loop_and_single_kernels():
    x, y = _sample(1, n=6, m=8, d=4, shift=0.5)
    bw = mmd.bandwidths(x, y)
    bank = mmd.kernel_bank_mmd2(x, y)
    assert bank.shape == (20,)
    single = torch.cat([mmd.unbiased_mmd2(x, y, mmd.gaussian_kernel(bw.gaussian)),
                        mmd.unbiased_mmd2(x, y, mmd.laplace_kernel(bw.laplace))])
    torch.testing.assert_close(bank, single)
    xl, yl = x.tolist(), y.tolist()
    for i in (0, 4, 9):
        assert bank[i].item() == pytest.approx(
            _double_loop_mmd2(xl, yl, _gauss(bw.gaussian[i].item())), abs=1e-12)
        assert bank[10 + i].item() == pytest.approx(
            _double_loop_mmd2(xl, yl, _laplace(bw.laplace[i].item())), abs=1e-12)


def _brute_force_bank(xl, yl, n=10, max_rows=500):
    """The whole bank from plain Python floats: cross distances, bandwidth rule, double loops."""
    cross = [(a, b) for a in xl[:max_rows] for b in yl[:max_rows]]
    l2 = np.array([math.dist(a, b) for a, b in cross])
    l1 = np.array([sum(abs(ai - bi) for ai, bi in zip(a, b)) for a, b in cross])

    def rule(d):  # NOTES.md §001; numpy's default quantile is the linear one
        lo = d.min() if d.min() >= 0.1 else max(np.quantile(d, 0.05), 0.1)
        hi = max(d.max(), 0.3)
        return [lo / 2 * (4 * hi / lo) ** (i / (n - 1)) for i in range(n)]

    return ([_double_loop_mmd2(xl, yl, _gauss(l)) for l in rule(l2)]
            + [_double_loop_mmd2(xl, yl, _laplace(l)) for l in rule(l1)])


@pytest.mark.parametrize("offset", [0.0, 1e3])
def test_kernel_bank_matches_brute_force(offset):
    """All 20 kernels, bandwidths included, against plain Python, with more than 25 rows per
    side (where torch.cdist switches to matmul-based distances) and far from the origin, where
    ``|a|^2 + |b|^2 - 2 a.b`` loses digits unless the samples are centred first."""
    x, y = _sample(7, n=31, m=27, d=3, shift=0.3)
    x, y = x + offset, y + offset
    expected = torch.tensor(_brute_force_bank(x.tolist(), y.tolist()), dtype=torch.float64)
    torch.testing.assert_close(mmd.kernel_bank_mmd2(x, y), expected, rtol=0, atol=1e-12)
    # max_rows smaller than both samples: the bandwidths see only the leading rows
    expected = torch.tensor(_brute_force_bank(x.tolist(), y.tolist(), max_rows=20),
                            dtype=torch.float64)
    torch.testing.assert_close(mmd.kernel_bank_mmd2(x, y, max_rows=20), expected,
                               rtol=0, atol=1e-12)


def test_kernel_bank_float32_close_to_float64():
    x, y = _sample(8, n=60, m=45, d=20, shift=0.2)
    bank64 = mmd.kernel_bank_mmd2(x, y)
    bank32 = mmd.kernel_bank_mmd2(x.float(), y.float(), dtype=torch.float32)
    assert bank32.dtype == torch.float32
    torch.testing.assert_close(bank32.double(), bank64, rtol=0, atol=1e-5)


def test_unbiased_exactly_by_enumeration():
    """E[MMD_u^2] over every sample of a small discrete P, Q equals the population MMD^2."""
    support = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
    p = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    q = torch.tensor([0.2, 0.2, 0.6], dtype=torch.float64)
    n, m = 3, 2
    ix = torch.tensor(list(itertools.product(range(3), repeat=n)))  # (27, n)
    iy = torch.tensor(list(itertools.product(range(3), repeat=m)))  # (9, m)
    a, b = ix.repeat_interleave(len(iy), 0), iy.repeat(len(ix), 1)  # every pair of samples
    weight = p[a].prod(1) * q[b].prod(1)
    assert weight.sum().item() == pytest.approx(1.0)
    for kernel_fn in (mmd.gaussian_kernel([0.7, 2.0]), mmd.laplace_kernel([0.5, 3.0])):
        est = mmd.unbiased_mmd2(support[a], support[b], kernel_fn)  # (2 kernels, 243 samples)
        k = kernel_fn(support, support)  # (2, 3, 3)
        population = p @ k @ p + q @ k @ q - 2 * p @ k @ q
        torch.testing.assert_close(est @ weight, population, rtol=0, atol=1e-12)
        # the biased V-statistic (diagonals kept) is off: the test can tell the two apart
        kxx = kernel_fn(support[a], support[a]).mean((-2, -1))
        assert not torch.allclose(kxx @ weight, p @ k @ p)


def test_unbiased_against_gaussian_closed_form():
    """Monte Carlo mean over resamples vs the closed form for Gaussians and a Gaussian kernel.

    For ``x ~ N(mu_x, s^2 I)``, ``y ~ N(mu_y, s^2 I)`` in ``d`` dimensions,
    ``E exp(-||x - y||^2 / l^2) = (1 + 4 s^2 / l^2)^(-d/2) exp(-||mu_x - mu_y||^2 / (l^2 + 4 s^2))``.
    """
    d, s, l, shift = 2, 1.0, 1.5, 1.0

    def c(dist2):
        return (1 + 4 * s**2 / l**2) ** (-d / 2) * math.exp(-dist2 / (l**2 + 4 * s**2))

    population = 2 * c(0.0) - 2 * c(shift**2)
    gen = torch.Generator().manual_seed(3)
    reps, n, m = 20000, 4, 3
    x = s * torch.randn(reps, n, d, generator=gen, dtype=torch.float64)
    y = s * torch.randn(reps, m, d, generator=gen, dtype=torch.float64)
    y[..., 0] += shift
    est = mmd.unbiased_mmd2(x, y, mmd.gaussian_kernel(l))[0]  # (reps,)
    se = est.std().item() / math.sqrt(reps)
    assert abs(est.mean().item() - population) < 4 * se
    # the biased estimate with diagonals kept is several standard errors away
    kxx, kyy = mmd.gaussian_kernel(l)(x, x)[0], mmd.gaussian_kernel(l)(y, y)[0]
    kxy = mmd.gaussian_kernel(l)(x, y)[0]
    biased = kxx.mean((-2, -1)) + kyy.mean((-2, -1)) - 2 * kxy.mean((-2, -1))
    assert abs(biased.mean().item() - population) > 10 * se


def test_near_zero_for_same_distribution_large_for_shift():
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(200, 5, generator=gen)
    y = torch.randn(150, 5, generator=gen)
    same = mmd.kernel_bank_mmd2(x, y)
    shifted = mmd.kernel_bank_mmd2(x, y + 1.5)
    assert same.abs().max() < 0.01
    assert mmd.aggregate(shifted).item() > 0.1
    assert mmd.aggregate(shifted).item() > 50 * mmd.aggregate(same).abs().item()
    assert mmd.aggregate(shifted, "max").item() > 0.3
    # tiny bandwidths see every pair as far apart: all kernels but those are discriminative
    assert (shifted[[4, 5, 6, 7, 8, 14, 15, 16, 17, 18]] > 10 * same.abs().max()).all()


@settings(max_examples=30, deadline=None)
@given(st.permutations(range(7)), st.permutations(range(5)), st.integers(0, 10_000))
def test_invariant_to_sample_order(perm_x, perm_y, seed):
    x, y = _sample(seed, n=7, m=5, shift=0.3)
    bank = mmd.kernel_bank_mmd2(x, y)
    permuted = mmd.kernel_bank_mmd2(x[list(perm_x)], y[list(perm_y)])
    torch.testing.assert_close(permuted, bank, rtol=0, atol=1e-12)
    torch.testing.assert_close(mmd.kernel_bank_mmd2(y, x, bw=mmd.bandwidths(x, y)), bank,
                               rtol=0, atol=1e-12)  # symmetric in x, y for fixed bandwidths


def _geometric(lo, hi, n=10):
    return torch.tensor([lo * (hi / lo) ** (i / (n - 1)) for i in range(n)], dtype=torch.float64)


@pytest.mark.parametrize(
    "x, y, l_min, l_max",
    [
        # cross distances .5, 3, .5, 2: l_min = min = .5, l_max = max = 3
        ([0.0, 1.0], [0.5, 3.0], 0.5, 3.0),
        # cross distances .05, 2, .95, 1: min < .1 -> 5% quantile .05 + .15 * (.95 - .05) = .185
        ([0.0, 1.0], [0.05, 2.0], 0.185, 2.0),
        # cross distances .01, .02, .99, .98: quantile .0115 < .1 -> floored at .1
        ([0.0, 1.0], [0.01, 0.02], 0.1, 0.99),
        # cross distances .2, .15: l_min = .15; largest .2 < .3 -> l_max = .3
        ([0.0, 0.05], [0.2], 0.15, 0.3),
    ],
)
def test_bandwidth_rule_by_hand(x, y, l_min, l_max):
    x, y = torch.tensor(x)[:, None], torch.tensor(y)[:, None]  # 1-D: L1 = L2
    bw = mmd.bandwidths(x, y)
    expected = _geometric(l_min / 2, 2 * l_max)
    torch.testing.assert_close(bw.gaussian, expected)
    torch.testing.assert_close(bw.laplace, expected)


def test_bandwidth_rule_l1_l2_and_max_rows():
    x = torch.tensor([[0.0, 0.0]])
    y = torch.tensor([[3.0, 4.0], [6.0, 8.0]])
    bw = mmd.bandwidths(x, y, n=5)
    torch.testing.assert_close(bw.gaussian, _geometric(2.5, 20.0, 5))  # L2: 5, 10
    torch.testing.assert_close(bw.laplace, _geometric(3.5, 28.0, 5))  # L1: 7, 14
    # rows past max_rows are ignored
    x = torch.tensor([[0.0], [1.0], [100.0]])
    y = torch.tensor([[0.5], [3.0], [-50.0]])
    torch.testing.assert_close(mmd.bandwidths(x, y, max_rows=2).gaussian, _geometric(0.25, 6.0))
    # the kernel bank uses the same rule
    torch.testing.assert_close(mmd.kernel_bank_mmd2(x, y, max_rows=2),
                               mmd.kernel_bank_mmd2(x, y, bw=mmd.bandwidths(x, y, max_rows=2)))


def test_aggregate():
    v = torch.tensor([4.0, 1.0, 3.0, 2.0])
    assert mmd.aggregate(v).item() == 2.5  # mean of the two middle values
    assert mmd.aggregate(v, "mean").item() == 2.5
    assert mmd.aggregate(v, mmd.Aggregation.MAX).item() == 4.0
    assert mmd.aggregate(torch.tensor([3.0, 1.0, 2.0]), "median").item() == 2.0
    with pytest.raises(ValueError):
        mmd.aggregate(v, "min")


def test_combine_layers_weights_by_parameter_count():
    banks = {"a": torch.tensor([1.0, 2.0, 3.0, 4.0]), "b": torch.tensor([0.0, 0.0, 10.0])}
    out = mmd.combine_layers(banks, {"a": 3, "b": 1})
    assert out.per_layer == {"a": 2.5, "b": 0.0}
    assert out.weighted == pytest.approx((3 * 2.5 + 1 * 0.0) / 4)
    assert mmd.combine_layers(banks, {"a": 3, "b": 1}, "max").weighted == pytest.approx(
        (3 * 4 + 10) / 4)


def test_layerwise_mmd_flattens_and_weights():
    gen = torch.Generator().manual_seed(5)
    a = {"conv": torch.randn(12, 2, 3, generator=gen), "fc": torch.randn(12, 4, generator=gen)}
    b = {"conv": torch.randn(9, 2, 3, generator=gen) + 0.5,
         "fc": torch.randn(9, 4, generator=gen)}
    per_layer, weighted = mmd.layerwise_mmd(a, b)
    for k, a_k in a.items():
        expected = mmd.aggregate(mmd.kernel_bank_mmd2(a_k.reshape(12, -1), b[k].reshape(9, -1)))
        assert per_layer[k] == pytest.approx(expected.item(), abs=1e-12)
    assert weighted == pytest.approx((6 * per_layer["conv"] + 4 * per_layer["fc"]) / 10)
    assert mmd.layerwise_mmd(a, b, how="mean").weighted != pytest.approx(weighted)
    with pytest.raises(ValueError):
        mmd.layerwise_mmd(a, {"conv": b["conv"]})


def test_too_few_samples_raises():
    with pytest.raises(ValueError):
        mmd.kernel_bank_mmd2(torch.zeros(1, 3), torch.ones(4, 3))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")
def test_gpu_matches_cpu():
    x, y = _sample(6, n=30, m=20, shift=0.4)
    torch.testing.assert_close(mmd.kernel_bank_mmd2(x.cuda(), y.cuda()).cpu(),
                               mmd.kernel_bank_mmd2(x, y))

"""Reverse-KL Gaussian fits to a two-component mixture, against 1-D quadrature."""

import dataclasses
import math

import numpy as np
import pytest
import torch
from scipy import optimize
from torch.distributions import Categorical, Independent, MixtureSameFamily, Normal

from symlib.chapters.sgm_vi import mode_interpolation as mi


def _quadrature_kl(m, log_s, a, sd, n=120):
    """KL(N(m, s^2) || p_a) in 1-D by Gauss-Hermite quadrature (independent of the MC code)."""
    x, wts = np.polynomial.hermite_e.hermegauss(n)
    s = math.exp(log_s)
    pts = m + s * x
    logp = np.logaddexp(-0.5 * (pts / sd) ** 2, -0.5 * ((pts - a) / sd) ** 2) - math.log(2 * sd * math.sqrt(2 * math.pi))
    entropy = 0.5 * math.log(2 * math.pi * math.e * s * s)
    return -entropy - (wts * logp).sum() / math.sqrt(2 * math.pi)


def test_mixture_log_prob_matches_torch_distributions():
    gen = torch.Generator().manual_seed(0)
    a, s = torch.tensor([0.0, 1.5, 4.0]), torch.tensor([0.5, 1.0, 2.0])
    u = mi.direction(3)
    x = torch.randn(3, 10, 3, generator=gen)
    ours = mi.mixture_log_prob(x, a, u, s)
    for i in range(3):
        locs = torch.stack([torch.zeros(3), a[i] * u])
        mix = MixtureSameFamily(Categorical(torch.ones(2)), Independent(Normal(locs, s[i]), 1))
        assert torch.allclose(ours[i], mix.log_prob(x[i]), atol=1e-5)


def test_direction_is_unit():
    for d in (1, 2, 20):
        assert torch.isclose(torch.linalg.vector_norm(mi.direction(d)), torch.tensor(1.0))


def test_monte_carlo_kl_matches_quadrature():
    gen = torch.Generator().manual_seed(1)
    eps = torch.randn(1, 200_000, 1, generator=gen)
    for m, log_s, a, sd in [(0.3, -0.2, 2.0, 1.0), (1.0, 0.4, 5.0, 0.5)]:
        mc = mi.reverse_kl(torch.tensor([[m]]), torch.tensor([[log_s]]), eps, torch.tensor([a]),
                           mi.direction(1), torch.tensor([sd]))
        assert abs(mc.item() - _quadrature_kl(m, log_s, a, sd)) < 0.01


def test_fits_match_the_quadrature_optimum_in_1d():
    """a = 1.5 s: one broad optimum at the midpoint; a = 6 s: the fit stays on its component."""
    a = torch.tensor([1.5, 6.0])
    fit = mi.fit_reverse_kl(a, torch.tensor(1.0), dim=1, n_samples=2000, n_steps=600, lr=3e-2,
                            generator=torch.Generator().manual_seed(0))
    for i, ai in enumerate(a.tolist()):
        ref = optimize.minimize(lambda p, ai=ai: _quadrature_kl(p[0], p[1], ai, 1.0), x0=[0.0, 0.0],
                                method="Nelder-Mead", options={"xatol": 1e-6, "fatol": 1e-9})
        assert abs(fit.mean[i, 0].item() - ref.x[0]) < 0.08, (fit.mean[i], ref.x)
        assert abs(math.log(fit.sd[i, 0].item()) - ref.x[1]) < 0.05
        assert abs(fit.kl[i].item() - ref.fun) < 0.02
    assert abs(fit.ratio[0].item() - 0.5) < 0.05 and fit.ratio[1].item() < 0.05
    # the recorded loss curve is the mean KL over the problems, step by step, ending at the fits' KL
    assert fit.loss_history.shape == (600,)
    assert abs(fit.loss_history[-50:].mean().item() - fit.kl.mean().item()) < 0.01
    assert fit.loss_history[:10].mean() > fit.loss_history[-10:].mean()


def test_interpolation_ratio_and_threshold():
    ratio = mi.interpolation_ratio(torch.tensor([[0.0, 0.0], [3.0, 4.0]]), torch.tensor([0.0, 10.0]))
    assert math.isnan(ratio[0].item()) and ratio[1].item() == 0.5
    grid = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    assert mi.mode_seeking_threshold(grid, [0.5, 0.52, 0.7, 0.1, 0.0]) == 4.0
    assert mi.mode_seeking_threshold(grid, [np.nan, 0.5, 0.5, 0.95, 0.0]) == 4.0
    assert math.isnan(mi.mode_seeking_threshold(grid, [0.5] * 5))


def test_direction_readings():
    """u = e_1 (the authors' notebook) by default; (1, ..., 1)/sqrt(D) as the other reading."""
    assert torch.equal(mi.direction(3), torch.tensor([1.0, 0.0, 0.0]))
    assert torch.allclose(mi.direction(4, kind="diagonal"), torch.full((4,), 0.5))
    assert torch.equal(mi.direction(1, kind="diagonal"), mi.direction(1))
    with pytest.raises(ValueError, match="axis"):
        mi.direction(2, kind="random")


def test_fits_start_from_the_given_sd():
    """With no steps, q is where it starts: N(0, init_sd^2 I), per problem."""
    a, s = torch.tensor([[1.0], [2.0]]), torch.tensor([[0.25], [2.0]])
    fit = mi.fit_reverse_kl(a, s, dim=2, n_samples=10, n_steps=0, lr=1e-2,
                            generator=torch.Generator().manual_seed(0), init_sd=s)
    assert torch.allclose(fit.sd[..., 0], s) and torch.allclose(fit.sd[..., 1], s)
    assert torch.equal(fit.mean, torch.zeros(2, 1, 2))
    unit = mi.fit_reverse_kl(a, s, dim=2, n_samples=10, n_steps=0, lr=1e-2, generator=torch.Generator())
    assert torch.equal(unit.sd, torch.ones(2, 1, 2))


def test_axis_aligned_u_decouples_the_other_coordinates():
    """With u = e_1 a diagonal q fits coordinates 2..D exactly (mean 0, sd s): the threshold does
    not depend on D; with the diagonal u every coordinate sees the separation."""
    a, s = torch.tensor([2.0]), torch.tensor(1.0)
    gen = torch.Generator().manual_seed(0)
    fit = mi.fit_reverse_kl(a, s, dim=3, n_samples=2000, n_steps=400, lr=3e-2, generator=gen)
    assert torch.allclose(fit.mean[0, 1:], torch.zeros(2), atol=0.05)
    assert torch.allclose(fit.sd[0, 1:], torch.ones(2), atol=0.05)
    assert abs(fit.mean[0, 0].item() - 1.0) < 0.1                       # the midpoint of 0 and a e_1
    diag = mi.fit_reverse_kl(a, s, dim=3, n_samples=2000, n_steps=400, lr=3e-2, generator=gen,
                             u=mi.direction(3, kind="diagonal"))
    assert torch.allclose(diag.mean[0], torch.full((3,), 1.0 / math.sqrt(3)), atol=0.1)


def _fit(seed=5, **kw):
    a = torch.tensor([[0.5, 2.0, 4.0], [1.0, 3.0, 6.0]])
    s = torch.tensor([[0.5], [1.0]])
    return mi.fit_reverse_kl(a, s, dim=3, n_samples=64, n_steps=40, lr=1e-2,
                             generator=torch.Generator().manual_seed(seed), u=mi.direction(3, kind="diagonal"), **kw)


def test_a_fit_stopped_at_its_budget_continues_to_the_uninterrupted_numbers_bit_for_bit():
    """Stopped after every step (budget 0) and continued from the state it kept, each time with a
    fresh generator seeded as the first, a fit ends exactly where an uninterrupted one does."""
    from symlib.inference.loop import BudgetExhausted

    whole = _fit()
    kept, pieces = [], 0
    while True:
        try:
            got = _fit(state=kept[-1] if kept else None, save=kept.append, budget_s=0.0)
            break
        except BudgetExhausted as stop:
            pieces += 1
            assert "of 40 steps" in str(stop)
    assert pieces == 39 and kept[-1]["step"] == 40   # one step per piece; the finished state kept too
    for field in mi.ReverseKLFit._fields:
        assert torch.equal(getattr(got, field), getattr(whole, field)), field
    # a finished state gives the finished fit again, with no step taken
    again = _fit(state=kept[-1], save=kept.append)
    assert torch.equal(again.kl, whole.kl) and torch.equal(again.mean, whole.mean)
    # keeping state moves no number of an uninterrupted fit; another seed does
    assert torch.equal(_fit(save=lambda _: None).mean, whole.mean)
    assert not torch.equal(_fit(seed=6).mean, whole.mean)


def test_the_figure_3_experiment_resumes_from_its_checkpoint_and_refuses_another_runs(tmp_path):
    """interpolation_experiment keeps every dimension's fit in one checkpoint: stopped inside its
    second dimension and run again, its result equals an uninterrupted run's; a checkpoint of other
    settings is refused, naming them."""
    from symlib.chapters.sgm_vi.profiles import PROFILES
    from symlib.chapters.sgm_vi.stages_geometry import interpolation_experiment
    from symlib.inference.loop import BudgetExhausted

    config = PROFILES["smoke"]
    whole = interpolation_experiment(config, 0)
    path = tmp_path / "interp.pt"
    stops = 0
    while True:
        try:
            got = interpolation_experiment(config, 0, checkpoint=path, budget_s=0.0)
            break
        except BudgetExhausted as stop:
            stops += 1
            assert str(stop).startswith("Figure 3's fits at D = ")
    assert stops == 2 * (config.interp_steps - 1)   # one step per call, each dimension's last step finishes
    for dim in config.interp_dims:
        for key, value in whole[dim].items():
            assert np.array_equal(got[dim][key], value, equal_nan=True), (dim, key)
    with pytest.raises(ValueError, match="interp_steps"):
        interpolation_experiment(dataclasses.replace(config, interp_steps=config.interp_steps + 1), 0, checkpoint=path)

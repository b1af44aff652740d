"""HMC against known Gaussians: moments, O(eps^2) energy error, acceptance, adaptation, storage."""

import math
import os

import numpy as np
import pytest
import torch

from symlib.book.runtime import torch_threads
from symlib.chapters import get_profile
from symlib.inference import hmc
from symlib.nn.mlp import MLPSpec, init_mlp, mlp_forward

COV = torch.tensor([[1.0, 0.9], [0.9, 1.0]], dtype=torch.float64) * torch.tensor([[1.0], [2.0]]).sqrt() \
    * torch.tensor([[1.0, 2.0]]).sqrt()  # sds 1 and sqrt 2, correlation 0.9
MEAN = torch.tensor([1.0, -2.0], dtype=torch.float64)
PREC = torch.linalg.inv(COV)


def gaussian_potential(pos):
    d = pos["x"] - MEAN
    return 0.5 * torch.einsum("ci,ij,cj->c", d, PREC, d)


def test_recovers_mean_and_covariance_of_a_correlated_gaussian():
    chains = 16
    start = {"x": torch.zeros(chains, 2, dtype=torch.float64)}
    out = hmc.sample(gaussian_potential, start, n_burnin=150, n_samples=400, n_leapfrog=10,
                     step_size=0.05, generator=torch.Generator().manual_seed(0), progress=False)
    xs = out.samples.batch(range(len(out.samples)))["x"].double()
    assert xs.shape == (chains * 400, 2)
    torch.testing.assert_close(xs.mean(0), MEAN, atol=0.08, rtol=0)
    torch.testing.assert_close(torch.cov(xs.T), COV, atol=0.12, rtol=0)
    assert (0.6 < out.accept_rate).all() and (out.accept_rate < 0.97).all()


def test_energy_error_shrinks_as_eps_squared():
    # fixed trajectory length 1, same start and momentum; |dH| ~ C eps^2
    gen = torch.Generator().manual_seed(1)
    q0 = {"x": MEAN + torch.randn(8, 2, dtype=torch.float64, generator=gen)}
    p0 = {"x": torch.randn(8, 2, dtype=torch.float64, generator=gen)}
    u0, g0 = hmc.value_and_grad(gaussian_potential, q0)
    h0 = u0 + 0.5 * p0["x"].square().sum(1)
    errors = []
    for eps in (0.1, 0.05, 0.025):
        _q, p, u, _ = hmc.leapfrog(q0, p0, g0, torch.full((8,), eps, dtype=torch.float64), round(1 / eps),
                                  gaussian_potential)
        errors.append((u + 0.5 * p["x"].square().sum(1) - h0).abs().mean().item())
    slopes = np.diff(np.log(errors)) / np.diff(np.log([0.1, 0.05, 0.025]))
    assert np.all((slopes > 1.8) & (slopes < 2.2)), (errors, slopes)


# leapfrog is stable for eps < 2 sd_min; the narrowest direction of COV has sd_min = 0.367
EPS_MAX = 2 * torch.linalg.eigvalsh(COV).min().sqrt().item()


def test_acceptance_near_one_for_tiny_steps_and_lower_for_large():
    start = {"x": MEAN.expand(32, 2).clone()}
    accept = {}
    for eps in (1e-3, 0.5 * EPS_MAX, 1.02 * EPS_MAX):  # exactly these step sizes: no jitter
        out = hmc.sample(gaussian_potential, start, n_burnin=0, n_samples=20, n_leapfrog=5, step_size=eps,
                         generator=torch.Generator().manual_seed(2), adapt=False, jitter=0.0, progress=False)
        accept[eps] = out.accept_rate.mean().item()
    tiny, moderate, unstable = accept.values()
    assert tiny > 0.999
    assert unstable < 0.3 < moderate < tiny


# A rotated 50-D Gaussian with scales 0.3 to 3 and a trajectory of L leapfrog steps of size H
# that turns its widest direction by half a period: from 0, a fixed-length trajectory ends at
# -x (up to the momentum's tiny contribution), transition after transition, and the chain never
# leaves the neighbourhood of its start in that direction (narrower ones resonate at 2, 3, ...
# half turns more loosely). Leapfrog turns a direction of scale s by phi = arccos(1 - H^2 / 2s^2)
# per step.
RES_DIM, RES_H = 50, 0.25
RES_SCALES = torch.logspace(math.log10(0.3), math.log10(3.0), RES_DIM, dtype=torch.float64)
RES_PHI = torch.arccos(1 - RES_H**2 / (2 * RES_SCALES**2))
RES_L = round(math.pi / RES_PHI[-1].item())  # 38: the widest direction turns by pi (+0.8%)
RES_Q = torch.linalg.qr(torch.randn(RES_DIM, RES_DIM, generator=torch.Generator().manual_seed(0),
                                    dtype=torch.float64))[0]
RES_PREC = RES_Q @ torch.diag(RES_SCALES**-2) @ RES_Q.T


def _variance_ratios(jitter, chains=256, n_burnin=40, n_samples=100):
    """Sample variance / true variance along each principal direction, chains started at 0."""
    start = {"x": torch.zeros(chains, RES_DIM, dtype=torch.float64)}
    with torch_threads(1):  # tiny tensors: one thread is several times faster than two
        out = hmc.sample(lambda p: 0.5 * ((p["x"] @ RES_PREC) * p["x"]).sum(1), start,
                         n_burnin=n_burnin, n_samples=n_samples, n_leapfrog=RES_L, step_size=RES_H,
                         generator=torch.Generator().manual_seed(6), adapt=False, jitter=jitter,
                         progress=False)
    xs = out.samples.batch(range(len(out.samples)))["x"] @ RES_Q
    return xs.var(0) / RES_SCALES**2, out.accept_rate.min().item(), chains * n_samples


def test_jitter_breaks_the_resonance_of_a_fixed_trajectory():
    ratio, accept, n = _variance_ratios(jitter=0.2)
    # Monte-Carlo error of a variance: relative sd sqrt(2 tau / n), tau the integrated
    # autocorrelation time of x^2. Per transition the widest direction turns by theta = pi u,
    # u ~ U(0.8, 1.2), so x^2 has lag-1 autocorrelation E[cos^2 theta] (times the acceptance,
    # plus the rejections, which repeat x^2) and, geometrically decaying, tau = (1+rho)/(1-rho);
    # narrower directions turn by k pi u, k > 1, and decorrelate faster.
    theta = math.pi * np.linspace(0.8, 1.2, 10_001)
    rho = accept * np.mean(np.cos(theta) ** 2) + (1 - accept)
    tau = (1 + rho) / (1 - rho)  # about 18
    tol = 4 * math.sqrt(2 * tau / n)  # 4 sd, 50 directions: about 0.15
    assert (ratio - 1).abs().max().item() < tol
    # the same run without jitter stays stuck near its start along the widest direction
    fixed, _, _ = _variance_ratios(jitter=0.0)
    assert fixed[-1].item() < 0.2
    assert (fixed - 1).abs().max().item() > 4 * tol


def test_jitter_must_be_below_one():
    start = {"x": torch.zeros(1, 2, dtype=torch.float64)}
    with pytest.raises(ValueError, match="jitter"):
        hmc.sample(gaussian_potential, start, n_burnin=0, n_samples=1, n_leapfrog=1, step_size=0.1,
                   generator=torch.Generator(), jitter=1.0, progress=False)


def test_chapter5_paper_profile_keeps_the_authors_fixed_trajectory():
    assert get_profile("05_rebasin_hmc", "paper").hmc_jitter == 0.0
    assert get_profile("05_rebasin_hmc", "quick").hmc_jitter > 0.0


def test_step_size_adapts_in_burn_in_only():
    start = {"x": torch.zeros(4, 2, dtype=torch.float64)}
    out = hmc.sample(gaussian_potential, start, n_burnin=200, n_samples=100, n_leapfrog=5, step_size=1.5,
                     generator=torch.Generator().manual_seed(3), target_accept=0.8, progress=False)
    steps, phase = out.history["step_size"], out.history["phase"]
    assert np.ptp(steps[phase == 0], axis=0).min() > 0  # moved during burn-in
    assert np.all(steps[phase == 1] == steps[phase == 1][0])  # fixed while sampling
    np.testing.assert_allclose(steps[phase == 1][0], out.step_size.numpy())
    # from an unstable start (acceptance 0) to a stable step with high acceptance; for a Gaussian
    # with fixed L the acceptance is not monotone in eps, so only a band is asserted
    assert out.history["accept_prob"][0].max() == 0.0
    assert (out.step_size < EPS_MAX).all()
    assert out.accept_rate.mean().item() > 0.6


def test_same_generator_same_chain():
    start = {"x": torch.zeros(2, 2, dtype=torch.float64)}
    runs = [hmc.sample(gaussian_potential, start, n_burnin=5, n_samples=5, n_leapfrog=3, step_size=0.1,
                       generator=torch.Generator().manual_seed(4), progress=False) for _ in range(2)]
    a, b = (r.samples.batch(range(10))["x"] for r in runs)
    assert torch.equal(a, b)


def test_divergent_proposals_are_rejected():
    start = {"x": MEAN.expand(4, 2).clone()}
    out = hmc.sample(gaussian_potential, start, n_burnin=0, n_samples=5, n_leapfrog=50, step_size=50.0,
                     generator=torch.Generator().manual_seed(5), adapt=False, progress=False)
    assert out.accept_rate.max().item() == 0.0
    xs = out.samples.batch(range(len(out.samples)))["x"]
    assert torch.isfinite(xs).all()


def test_sample_store_spills_to_disk_and_round_trips(tmp_path):
    shapes = {"W": (3, 4), "b": (3,)}
    store = hmc.SampleStore(shapes, 6, max_memory_bytes=10, directory=str(tmp_path))
    assert store.on_disk and os.path.exists(store.path)
    gen = torch.Generator().manual_seed(0)
    batches = [{"W": torch.randn(3, 3, 4, generator=gen), "b": torch.randn(3, 3, generator=gen)} for _ in range(2)]
    for b in batches:
        store.append(b)
    assert len(store) == 6
    got = store.batch(range(6))
    torch.testing.assert_close(got["W"], torch.cat([b["W"] for b in batches]))
    torch.testing.assert_close(store.get(4)["b"], batches[1]["b"][1])
    assert [b["W"].shape[0] for b in store.iter_batches(4)] == [4, 2]
    with pytest.raises(ValueError, match="full"):
        store.append(batches[0])
    folder = os.path.dirname(store.path)
    store.close()
    assert not os.path.exists(folder)
    small = hmc.SampleStore(shapes, 6)
    assert not small.on_disk


def test_mlp_potential_value_and_gradient():
    spec = MLPSpec((3, 5, 4))
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(20, 3, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 4, (20,), generator=gen)
    nets = [init_mlp(spec, gen, torch.float64) for _ in range(2)]
    params = {k: torch.stack([n[k] for n in nets]) for k in nets[0]}
    u, grad = hmc.value_and_grad(hmc.mlp_classification_potential(spec, x, y, prior_sd=2.0), params)
    for c, net in enumerate(nets):
        leaves = {k: v.clone().requires_grad_(True) for k, v in net.items()}
        h = torch.relu(x @ leaves["W1"].T + leaves["b1"]) @ leaves["W2"].T + leaves["b2"]
        ref = torch.nn.functional.cross_entropy(h, y, reduction="sum") + sum(
            v.square().sum() for v in leaves.values()) / (2 * 4.0)
        ref.backward()
        assert u[c].item() == pytest.approx(ref.item(), rel=1e-12)
        for k, leaf in leaves.items():
            torch.testing.assert_close(grad[k][c], leaf.grad)
    assert math.isfinite(u.sum().item())


def test_regression_potential_by_hand():
    from scipy import stats

    spec = MLPSpec((2, 3, 1))
    g = torch.Generator().manual_seed(0)
    chains = [init_mlp(spec, g, torch.float64) for _ in range(2)]
    params = {k: torch.stack([c[k] for c in chains]) for k in chains[0]}
    x, y = torch.randn(6, 2, generator=g, dtype=torch.float64), torch.randn(6, 1, generator=g, dtype=torch.float64)
    u = hmc.mlp_regression_potential(spec, x, y, noise_sd=0.3, prior_sd=2.0)(params)
    for c, p in enumerate(chains):
        f = mlp_forward(p, x, spec)
        w = torch.cat([v.reshape(-1) for v in p.values()]).numpy()
        log_post = stats.norm.logpdf(y.numpy(), f.numpy(), 0.3).sum() + stats.norm.logpdf(w, 0, 2.0).sum()
        const = 6 * math.log(0.3 * math.sqrt(2 * math.pi)) + len(w) * math.log(2.0 * math.sqrt(2 * math.pi))
        assert u[c].item() == pytest.approx(-log_post - const, rel=1e-10)

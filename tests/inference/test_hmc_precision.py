"""HMC with reduced-precision leapfrog forces stays exact (issue 30, item 1).

bf16 forces run on the CPU too (``torch.autocast("cpu", dtype=torch.bfloat16)``), so the CPU
emulates exactly what the GPU does with them: forces from bf16 matrix products, positions and
momenta in float32, and the Metropolis step's ``U`` in full precision. TF32 changes nothing on
the CPU; its context is checked to set and restore the CUDA flags.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from symlib.inference import hmc

DIM = 6


def _gaussian(seed: int = 0):
    """``U(q) = q^T P q / 2`` with a fixed precision ``P`` (covariance ``P^-1``), through a
    matrix product so that autocast computes its force in bf16."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(DIM, DIM, generator=g, dtype=torch.float64)
    cov = a @ a.T / DIM + 0.5 * torch.eye(DIM, dtype=torch.float64)
    prec = torch.linalg.inv(cov)
    p32 = prec.to(torch.float32)

    def potential(params):
        q = params["q"]                                            # (C, D)
        pq = q @ p32.to(q.device)                                  # bf16 under autocast
        return 0.5 * (pq.to(torch.float64) * q.to(torch.float64)).sum(-1)

    return potential, cov


def test_bf16_forces_differ_from_fp32_but_the_metropolis_energy_does_not():
    potential, _ = _gaussian()
    q = {"q": torch.randn(4, DIM, generator=torch.Generator().manual_seed(1))}
    u32, g32 = hmc.value_and_grad(potential, q)
    u16, g16 = hmc.value_and_grad(potential, q, "bf16")
    assert g16["q"].dtype == torch.float32
    assert not torch.equal(g16["q"], g32["q"])                     # the force really is reduced
    torch.testing.assert_close(g16["q"], g32["q"], rtol=3e-2, atol=3e-2)
    state = hmc.init(q, potential, "bf16")
    torch.testing.assert_close(state.potential, u32, rtol=1e-6, atol=1e-6)   # exact U
    assert not torch.allclose(u16, u32, rtol=1e-6, atol=1e-6)


def test_a_bf16_trajectory_runs_back_to_its_start():
    potential, _ = _gaussian()
    gen = torch.Generator().manual_seed(2)
    q0 = {"q": torch.randn(8, DIM, generator=gen)}
    p0 = {"q": torch.randn(8, DIM, generator=gen)}
    eps = torch.full((8,), 0.1, dtype=torch.float64)
    state = hmc.init(q0, potential, "bf16")
    q1, p1, _, g1 = hmc.leapfrog(q0, p0, state.grad, eps, 25, potential, "bf16")
    assert (q1["q"] - q0["q"]).abs().max() > 0.1                     # it went somewhere
    q2, p2, u2, _ = hmc.leapfrog(q1, {"q": -p1["q"]}, g1, eps, 25, potential, "bf16")
    # the force is a deterministic function of the position: back to the start up to float32
    # rounding (amplified only where a bf16 rounding of the force flips on a rounded position)
    torch.testing.assert_close(q2["q"], q0["q"], rtol=0, atol=1e-4)
    torch.testing.assert_close(-p2["q"], p0["q"], rtol=0, atol=1e-4)
    torch.testing.assert_close(u2, state.potential, rtol=1e-5, atol=1e-5)


def _moments(precision: str, seed: int):
    potential, cov = _gaussian()
    n_chains, n_samples = 8, 1500
    start = {"q": torch.zeros(n_chains, DIM)}
    res = hmc.sample(potential, start, n_burnin=200, n_samples=n_samples, n_leapfrog=8, step_size=0.3,
                     generator=torch.Generator().manual_seed(seed), progress=False,
                     force_precision=precision, target_accept=0.9)
    draws = res.samples.batch(range(len(res.samples)))["q"].double().numpy()
    return res, draws, cov.numpy()


@pytest.fixture(scope="module")
def runs():
    """``precision -> _moments(precision, seed=3)``, each run once for the module's tests: the
    same target, start, tuning and seed for both precisions."""
    done = {}

    def run(precision: str):
        if precision not in done:
            done[precision] = _moments(precision, seed=3)
        return done[precision]

    return run


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_reduced_precision_hmc_samples_the_exact_gaussian(runs, precision):
    res, draws, cov = runs(precision)
    assert res.force_precision == precision
    n = draws.shape[0]
    sd = np.sqrt(np.diag(cov))
    # HMC draws of a Gaussian are nearly independent here (accept ~0.9, 8 steps): allow an
    # effective sample size of n / 4 in the standard errors
    n_eff = n / 4
    assert np.all(np.abs(draws.mean(0)) < 4 * sd / math.sqrt(n_eff))
    emp = np.cov(draws.T)
    se_cov = np.sqrt((cov**2 + np.outer(np.diag(cov), np.diag(cov))) / n_eff)
    assert np.all(np.abs(emp - cov) < 4 * se_cov)
    assert float(res.accept_rate.mean()) > 0.5


def test_bf16_acceptance_is_reported_beside_fp32(runs):
    fp32, _, _ = runs("fp32")
    bf16, _, _ = runs("bf16")
    # the same target and tuning: the reduced force can only cost acceptance, not much here
    a32, a16 = float(fp32.accept_rate.mean()), float(bf16.accept_rate.mean())
    assert abs(a16 - a32) < 0.1, (a32, a16)


def test_tf32_context_sets_and_restores_the_cuda_flags():
    before = (torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.fp32_precision)
    with hmc.force_precision("tf32", "cpu"):
        assert torch.backends.cuda.matmul.fp32_precision == "tf32"
        with hmc.exact_precision("tf32"):
            assert torch.backends.cuda.matmul.fp32_precision == "ieee"
        assert torch.backends.cuda.matmul.fp32_precision == "tf32"
    assert (torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.fp32_precision) == before


def test_an_unknown_precision_is_refused():
    potential, _ = _gaussian()
    with pytest.raises(ValueError, match="fp16"):
        hmc.sample(potential, {"q": torch.zeros(1, DIM)}, n_burnin=1, n_samples=1, n_leapfrog=1,
                   step_size=0.1, generator=torch.Generator().manual_seed(0), progress=False,
                   force_precision="fp16")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_a_gpu_generator_draws_every_random_number_on_the_gpu():
    potential, cov = _gaussian()
    start = {"q": torch.zeros(4, DIM, device="cuda")}
    res = hmc.sample(potential, start, n_burnin=50, n_samples=200, n_leapfrog=8, step_size=0.3,
                     generator=torch.Generator("cuda").manual_seed(0), progress=False, force_precision="bf16")
    draws = res.samples.batch(range(len(res.samples)))["q"].double().numpy()
    assert np.isfinite(draws).all() and draws.std(0).min() > 0.1 * np.sqrt(np.diag(cov.numpy())).min()
    assert float(res.accept_rate.mean()) > 0.5

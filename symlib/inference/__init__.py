"""Approximate inference for Bayesian neural networks.

- :mod:`symlib.inference.mfvi`: mean-field Gaussian VI with the local reparameterisation trick
  for regression MLPs, optional orthogonal skips and ordered biases (chapter 1; its state layout
  is reused by chapters 3 and 5).
- :mod:`symlib.inference.vi_classifier`: mean-field VI for classification MLPs (chapter 5).
- :mod:`symlib.inference.sgm`: symmetrised mean-field VI, the SGM entropy estimator and exact
  symmetrised entropies by enumeration (chapter 3).
- :mod:`symlib.inference.hmc`: batched-chain HMC with step-size adaptation in burn-in (chapter 5);
  :mod:`symlib.inference.hmc_resumable` runs it in checkpointed pieces.
- :mod:`symlib.inference.loop`: the one loop long runs go through (HMC, chapter 1's VI): step a
  state, checkpoint it, stop at a time budget given as an argument.
- :mod:`symlib.inference.ensemble`: vmapped MAP ensembles (chapter 5).
- :mod:`symlib.inference.posteriors`: weight samples from SWAG, Laplace (full Hessian or GGN),
  SGHMC, last-layer MC dropout and mean-field VI for any functional network, batched over
  several trained modes (chapter 2b).
- :mod:`symlib.inference.advi`: ADVI, mean-field and full-rank, on an unconstrained space
  (chapter 4).
- :mod:`symlib.inference.compact`: compact (diagonal Gaussian) summaries of weight samples before
  and after rebasin, and pruning (chapter 5).
- :mod:`symlib.inference.stan`: Stan's NUTS through PyStan for the Stan programs in
  ``symlib/inference/stan_models`` (build once per machine, sample, ``log_prob`` /
  ``grad_log_prob``) (chapter 4). It needs the ``stan`` extra and is not imported here: use
  ``from symlib.inference import stan``.
"""

from symlib.inference import advi, compact, ensemble, hmc, mfvi, posteriors, sgm, vi_classifier

__all__ = ["advi", "compact", "ensemble", "hmc", "mfvi", "posteriors", "sgm", "stan", "vi_classifier"]

"""Convergence diagnostics of MCMC draws: rank-normalised split R-hat, bulk and tail ESS.

Vehtari, Gelman, Simpson, Carpenter & Buerkner (2021), "Rank-normalization, folding, and
localization: an improved R-hat for assessing convergence of MCMC", Bayesian Analysis 16(2),
computed by ArviZ; the functions here only fix the array layout and the single-chain case:

* ``split_rhat``: the larger of the bulk R-hat (split chains, rank-normalised) and the folded
  R-hat (the same on ``|x - median(x)|``), ArviZ's ``rhat(method="rank")``. The folded part is
  what flags chains that agree in location but differ in scale;
* ``bulk_ess``: effective sample size of the rank-normalised split chains;
* ``tail_ess``: the smaller effective sample size of the indicators ``x <= q_5%`` and
  ``x <= q_95%``, i.e. how well the 5% and 95% quantiles are estimated.

Array layout of every function: ``(chains, draws)`` for one scalar quantity (a float comes back),
``(chains, draws, *shape)`` for several (an array of ``shape`` comes back, one value per
quantity), or ``(draws,)`` for a single chain.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

__all__ = ["Summary", "bulk_ess", "split_rhat", "summary", "tail_ess"]


class Summary(NamedTuple):
    """Worst case over all quantities of an array of draws.

    A quantity whose R-hat or ESS cannot be computed (ArviZ returns NaN when every draw of every
    chain is the same value: a stuck sampler) makes the worst case NaN too, so a precondition on
    it fails instead of the stuck quantity being skipped.
    """

    rhat_max: float
    bulk_ess_min: float
    tail_ess_min: float


def split_rhat(x: np.ndarray) -> float | np.ndarray:
    """Rank-normalised split R-hat, max of bulk and folded (``arviz.rhat(method="rank")``).

    Args:
        x: draws ``(chains, draws[, *shape])`` or ``(draws,)``. ArviZ needs two chains, so a
            single chain is first cut into its two halves, which are then split again (R-hat
            over four quarters).

    Returns:
        R-hat (1 at convergence; above 1.01 is suspect), a float or one per quantity.
    """
    az = _arviz()

    def rhat(chains: np.ndarray) -> float:
        if len(chains) == 1:
            half = chains.shape[1] // 2
            chains = np.stack([chains[0, :half], chains[0, -half:]])
        return az.rhat(chains, method="rank")

    return _per_quantity(rhat, x)


def bulk_ess(x: np.ndarray) -> float | np.ndarray:
    """Bulk effective sample size (``arviz.ess(method="bulk")``) of draws laid out as in :func:`split_rhat`."""
    az = _arviz()
    return _per_quantity(lambda chains: az.ess(chains, method="bulk"), x)


def tail_ess(x: np.ndarray) -> float | np.ndarray:
    """Tail effective sample size (``arviz.ess(method="tail")``), min over the 5% and 95% quantiles."""
    az = _arviz()
    return _per_quantity(lambda chains: az.ess(chains, method="tail"), x)


def summary(x: np.ndarray) -> Summary:
    """Max R-hat, min bulk ESS and min tail ESS over the quantities of ``x`` (layout as above).

    NaN wherever one quantity's value is NaN (see :class:`Summary`): a worst case that skipped it
    would report mixed chains for draws that never moved.
    """
    return Summary(_worst(split_rhat(x), np.max), _worst(bulk_ess(x), np.min), _worst(tail_ess(x), np.min))


def _worst(values, reduce) -> float:
    """``reduce`` over ``values``, NaN if any value is NaN (``np.max`` / ``np.min`` propagate it)."""
    return float(reduce(np.asarray(values, dtype=float)))


def _per_quantity(fn, x: np.ndarray) -> float | np.ndarray:
    """``fn`` of each ``(chains, draws)`` slice of ``x``, a float for a single quantity."""
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[None]
    chains, draws = x.shape[:2]
    if draws < 4 * (2 if chains == 1 else 1):
        raise ValueError(f"need at least 4 draws per chain (8 for a single chain), got {x.shape}")
    flat = x.reshape(chains, draws, -1)
    out = np.array([float(fn(flat[..., j])) for j in range(flat.shape[-1])])
    return float(out[0]) if x.ndim == 2 else out.reshape(x.shape[2:])


def _arviz():
    """ArviZ, imported on first use: it pulls in xarray (about 1.5 s), which most callers skip."""
    with warnings.catch_warnings():  # its once-a-day banner about a coming refactor
        warnings.filterwarnings("ignore", category=FutureWarning, module="arviz")
        import arviz
    return arviz

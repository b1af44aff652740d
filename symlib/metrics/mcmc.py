"""Convergence diagnostics of MCMC draws: split R-hat and bulk effective sample size.

Vehtari, Gelman, Simpson, Carpenter & Buerkner (2021), "Rank-normalization, folding, and
localization: an improved R-hat for assessing convergence of MCMC", Bayesian Analysis 16(2),
as implemented in Stan and ArviZ, without the dependency:

* draws ``(chains, n)`` are split into halves (``2 * chains`` sequences of ``n // 2``), so a
  single chain still has a between-sequence variance;
* *rank normalisation*: every draw is replaced by ``Phi^{-1}((rank - 3/8) / (S + 1/4))`` over
  all ``S`` pooled draws, which makes both statistics robust to heavy tails;
* ``R-hat = sqrt(var_plus / W)``, ``var_plus = (n-1)/n W + B/n`` (B between, W within);
* ``ESS = M n / tau`` with ``tau = -1 + 2 sum_t rho_t``, the autocorrelations ``rho_t``
  combined over sequences as in Stan and truncated by Geyer's initial monotone positive sequence.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = ["autocovariance", "bulk_ess", "split_rhat"]


def _split(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[None]
    n = x.shape[1] // 2
    if n < 2:
        raise ValueError("need at least 4 draws per chain")
    return np.concatenate([x[:, :n], x[:, -n:]], axis=0)


def _rank_normalise(x: np.ndarray) -> np.ndarray:
    r = stats.rankdata(x, method="average").reshape(x.shape)
    return stats.norm.ppf((r - 0.375) / (x.size + 0.25))


def autocovariance(x: np.ndarray) -> np.ndarray:
    """Biased autocovariance of each row of ``x`` at lags ``0..n-1`` (via the FFT)."""
    x = np.asarray(x, dtype=float)
    n = x.shape[-1]
    c = x - x.mean(-1, keepdims=True)
    f = np.fft.rfft(c, n=2 * n, axis=-1)
    return np.fft.irfft(f * np.conj(f), axis=-1)[..., :n] / n


def split_rhat(x: np.ndarray) -> float:
    """Rank-normalised split R-hat of draws ``(chains, n)`` (or ``(n,)``: one chain)."""
    z = _rank_normalise(_split(x))
    n = z.shape[1]
    w = z.var(axis=1, ddof=1).mean()
    b = n * z.mean(axis=1).var(ddof=1)
    if w == 0:
        return float("nan")
    return float(np.sqrt(((n - 1) / n * w + b / n) / w))


def bulk_ess(x: np.ndarray) -> float:
    """Bulk effective sample size of draws ``(chains, n)`` (or ``(n,)``), rank-normalised."""
    z = _rank_normalise(_split(x))
    m, n = z.shape
    acov = autocovariance(z)
    chain_var = acov[:, 0] * n / (n - 1)
    mean_var = chain_var.mean()
    var_plus = mean_var * (n - 1) / n + (z.mean(1).var(ddof=1) if m > 1 else 0.0)
    if var_plus <= 0:
        return float("nan")
    rho = 1.0 - (mean_var - acov.mean(0)) / var_plus
    rho[0] = 1.0
    # Geyer: sum pairs P_k = rho_{2k} + rho_{2k+1} while positive, forced monotone.
    pairs = rho[: 2 * (n // 2)].reshape(-1, 2).sum(1)
    stop = np.argmax(pairs <= 0) if np.any(pairs <= 0) else len(pairs)
    pairs = np.minimum.accumulate(pairs[:stop])
    tau = -1.0 + 2.0 * pairs.sum()
    tau = max(tau, 1.0 / np.log10(m * n))            # Stan's cap: ESS <= S log10(S)
    return float(m * n / tau)

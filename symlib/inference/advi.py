"""Automatic differentiation variational inference (ADVI) on an unconstrained space.

Kucukelbir et al. (2017, JMLR 18(14)), the ADVI of Stan that Pourzanjani et al. (2017) run
beside NUTS: the model's parameters are first mapped to an unconstrained vector ``z`` in
``R^d`` (:mod:`symlib.transforms`, log-Jacobians included in ``log p``), and a Gaussian

    mean-field:  q(z) = N(mu, diag(exp(omega))^2),
    full-rank:   q(z) = N(mu, L L^T),  L lower triangular, diag(L) = exp(omega) > 0,

is fitted by maximising the evidence lower bound

    ELBO(q) = E_q[log p(z)] + H[q],    H[q] = d/2 (1 + log 2 pi) + sum_i log L_ii,

with the entropy in closed form and the expectation by the reparameterisation ``z = mu + L e``,
``e ~ N(0, I)``: each step draws ``n_mc`` values of ``e``, evaluates ``log p`` on all of them in
one batched call, and takes an Adam step (Kingma & Ba 2015) on the gradient of the Monte Carlo
ELBO. Adam's steps keep a size of about ``lr`` however noisy the gradient, so with a constant
rate the parameters jitter around the optimum; by default the rate follows a cosine from ``lr``
to 0 over ``n_steps`` so the last iterates settle (Stan's ADVI instead uses its own adaptive
sequence decaying like ``t^(-1/2)``; the optimum is the same).

Stopping: after ``n_steps``, or earlier when ``tol_rel_obj`` is set and the mean ELBO of the
last ``eval_every`` steps changes by less than that fraction from the previous window's (the
idea of Stan's ``tol_rel_obj``, on window means rather than Stan's extra ELBO evaluations).

Randomness is explicit: every draw comes from the ``torch.Generator`` passed in.

Speed: each step is a handful of tiny tensor operations, so for the small models of chapter 4
Python overhead dominates (about 1.5 ms a step on one CPU core); on a loaded machine, extra
intra-op threads only spin and made a step ten times slower in the tests, so callers on the CPU
should run it under ``torch.set_num_threads(1)``.

Public: :class:`Family`, :class:`ADVIResult`, :func:`fit`, :func:`sample`, :func:`entropy`,
:func:`elbo`.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor
from tqdm import tqdm

__all__ = ["ADVIResult", "Family", "elbo", "entropy", "fit", "sample"]

LogDensity = Callable[[Tensor], Tensor]
"""``log p(z)`` up to a constant: ``(..., d) -> (...)``, vectorised over leading axes."""


class Family(str, enum.Enum):
    """The Gaussian variational family."""

    MEANFIELD = "meanfield"
    """``N(mu, diag(exp(omega))^2)``: ``2d`` parameters, independent coordinates."""
    FULLRANK = "fullrank"
    """``N(mu, L L^T)``: ``d + d(d+1)/2`` parameters, any correlation."""


class ADVIResult(NamedTuple):
    """The fitted ``q = N(mean, scale_tril scale_tril^T)`` and how the fit went."""

    family: Family
    mean: Tensor
    """``mu``, ``(d,)``."""
    scale_tril: Tensor
    """``L``, ``(d, d)`` lower triangular with positive diagonal (diagonal for mean-field)."""
    elbo_trace: Tensor
    """Monte Carlo ELBO estimate (``n_mc`` draws) at every step taken, float64 on the CPU."""
    converged: bool
    """Whether the ``tol_rel_obj`` criterion stopped the fit before ``n_steps``."""

    def sample(self, n: int, generator: torch.Generator) -> Tensor:
        """``n`` draws from ``q``, ``(n, d)``; see :func:`sample`."""
        return sample(self, n, generator)


def fit(
    log_density: LogDensity,
    dim: int,
    family: Family | str = Family.MEANFIELD,
    *,
    generator: torch.Generator,
    n_steps: int = 5000,
    lr: float = 0.01,
    n_mc: int = 10,
    init_mean: Tensor | None = None,
    init_scale: float = 1.0,
    anneal: bool = True,
    tol_rel_obj: float | None = None,
    eval_every: int = 100,
    progress: bool = False,
) -> ADVIResult:
    """Fit a Gaussian ``q`` to ``exp(log_density)`` on ``R^dim`` by maximising the ELBO.

    Args:
        log_density: unnormalised log density on the unconstrained space, batched over leading
            axes (it receives ``(n_mc, dim)`` and must return ``(n_mc,)``).
        dim: ``d``, the number of unconstrained parameters.
        family: mean-field or full-rank.
        generator: source of every draw (its device may differ from the parameters').
        n_steps: maximum number of Adam steps.
        lr: Adam learning rate.
        n_mc: draws of ``e`` per gradient step (Stan's ``grad_samples`` is 1).
        init_mean: initial ``mu`` (default zeros, float64 on the CPU); its dtype and device are
            those of the whole fit.
        init_scale: initial ``L = init_scale * I`` (Stan starts at 1).
        anneal: decay the learning rate from ``lr`` to 0 along a cosine over ``n_steps``
            (``False``: constant ``lr``).
        tol_rel_obj: relative change of the windowed mean ELBO that stops the fit (``None``:
            always run ``n_steps``).
        eval_every: window length for ``tol_rel_obj`` and the progress bar's ELBO.
        progress: show a ``tqdm`` progress bar.
    """
    family = Family(family)
    if init_mean is None:
        init_mean = torch.zeros(dim, dtype=torch.float64)
    mean = init_mean.detach().clone().requires_grad_(True)
    log_diag = torch.full_like(mean, math.log(init_scale)).requires_grad_(True)
    params = [mean, log_diag]
    off_diag = None
    if family is Family.FULLRANK:
        off_diag = mean.new_zeros(dim, dim).requires_grad_(True)
        params.append(off_diag)
    optimizer = torch.optim.Adam(params, lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, n_steps) if anneal else None
    trace = torch.empty(n_steps, dtype=torch.float64)
    converged, previous, step = False, None, 0
    bar = tqdm(range(n_steps), disable=not progress, desc=f"ADVI ({family.value})")
    for step in bar:
        eps = _standard_normal((n_mc, dim), mean, generator)
        z = mean + eps * torch.exp(log_diag)  # mean-field: L e elementwise, no d x d product
        if off_diag is not None:
            z = z + eps @ torch.tril(off_diag, diagonal=-1).T
        value = log_density(z).mean() + _gaussian_entropy(log_diag)
        if not torch.isfinite(value):
            raise FloatingPointError(f"non-finite ELBO estimate at step {step}")
        optimizer.zero_grad()
        (-value).backward()
        optimizer.step()
        if schedule is not None:
            schedule.step()
        trace[step] = value.detach().double().cpu()
        if (step + 1) % eval_every == 0:
            current = trace[step + 1 - eval_every : step + 1].mean().item()
            bar.set_postfix(elbo=f"{current:.4g}")
            change = math.inf if previous is None else abs(current - previous)
            if tol_rel_obj is not None and change <= tol_rel_obj * abs(current):
                converged = True
                break
            previous = current
    with torch.no_grad():
        scale_tril = _scale_tril(log_diag, off_diag)
    return ADVIResult(family, mean.detach(), scale_tril, trace[: step + 1], converged)


def sample(q: ADVIResult, n: int, generator: torch.Generator) -> Tensor:
    """``n`` draws ``mu + L e``, ``e ~ N(0, I)``, from the fitted ``q``: ``(n, d)``."""
    eps = _standard_normal((n, q.mean.shape[-1]), q.mean, generator)
    return q.mean + eps @ q.scale_tril.T


def entropy(scale_tril: Tensor) -> Tensor:
    """Entropy of ``N(mu, L L^T)``: ``d/2 (1 + log 2 pi) + sum_i log L_ii``."""
    return _gaussian_entropy(torch.log(torch.diagonal(scale_tril, dim1=-2, dim2=-1)))


def elbo(
    q: ADVIResult,
    log_density: LogDensity,
    n: int,
    generator: torch.Generator,
    batch_size: int = 1000,
) -> Tensor:
    """Monte Carlo ELBO of ``q`` with ``n`` draws (Stan's ``elbo_samples``), a scalar.

    ``log_density`` sees at most ``batch_size`` draws at a time, to bound memory.
    """
    with torch.no_grad():
        z = sample(q, n, generator)
        total = sum(log_density(chunk).sum() for chunk in z.split(batch_size))
        return total / n + entropy(q.scale_tril)


def _scale_tril(log_diag: Tensor, off_diag: Tensor | None) -> Tensor:
    """``L = diag(exp(omega))`` plus the strictly lower triangle of ``off_diag`` (full-rank)."""
    diag = torch.diag(torch.exp(log_diag))
    return diag if off_diag is None else diag + torch.tril(off_diag, diagonal=-1)


def _gaussian_entropy(log_diag: Tensor) -> Tensor:
    return 0.5 * log_diag.shape[-1] * (1 + math.log(2 * math.pi)) + log_diag.sum(dim=-1)


def _standard_normal(shape: tuple[int, ...], like: Tensor, generator: torch.Generator) -> Tensor:
    z = torch.randn(shape, generator=generator, dtype=like.dtype, device=generator.device)
    return z.to(like.device)

"""Reverse-KL Gaussian fits to a two-component mixture: mean- vs mode-seeking (Gelberg et al., Sec. 3).

The target is the equal mixture of two isotropic Gaussians a distance ``a`` apart,

    p_a(x) = (1/2) N(x; 0, s^2 I) + (1/2) N(x; a u, s^2 I),    x in R^D,  |u| = 1,

and ``q(x) = N(x; mu, diag(sigma^2))`` is fitted by minimising the reverse KL

    KL(q || p_a) = E_q[log q(x) - log p_a(x)]

with ``n_samples`` reparameterised draws ``x = mu + sigma * eps`` per step and Adam, starting
from ``q = N(0, I)`` (Gelberg et al., App. A: 5,000 samples, 3,000 steps, learning rate 1e-2;
the authors' notebook: Adam, diagonal covariance, ``u = e_1``). The optimum's mode lies on the
segment from 0 to ``a u``, so the *interpolation ratio* ``|mu*| / a`` measures mean-seeking: 1/2 is the midpoint,
0 the component the fit started on. :func:`mode_seeking_threshold` reads the threshold ``a*``
off a grid of ``a``.

Every function is batched over independent problems (leading axes of ``a`` and ``s``), so a
whole figure is one optimisation. :func:`fit_reverse_kl` runs in the loop of
:mod:`symlib.inference.loop`: given ``save`` it hands its state (step, ``mu``, ``log sigma``, Adam's
state, the generator's state, the loss so far) out at most every ``every_s`` seconds and, at
``budget_s``, a last time before it raises :class:`~symlib.inference.loop.BudgetExhausted`; called
again with that state it continues to the numbers of an uninterrupted fit, bit for bit.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from symlib.inference import loop

__all__ = [
    "DIRECTIONS",
    "ReverseKLFit",
    "direction",
    "fit_reverse_kl",
    "interpolation_ratio",
    "mixture_log_prob",
    "mode_seeking_threshold",
    "reverse_kl",
]

_LOG_2PI = math.log(2.0 * math.pi)


class ReverseKLFit(NamedTuple):
    """Result of :func:`fit_reverse_kl`, each with the problems' batch shape ``P``."""

    mean: Tensor
    """``mu*``, ``(*P, D)``."""
    sd: Tensor
    """``sigma*``, ``(*P, D)``."""
    kl: Tensor
    """Monte Carlo ``KL(q || p_a)`` at the end (fresh draws), ``P``."""
    ratio: Tensor
    """``|mu*| / a``, ``P`` (NaN where ``a = 0``)."""
    loss_history: Tensor
    """The Monte Carlo KL at every step, averaged over the problems, ``(n_steps,)``: the loss
    curve whose plateau tells whether the fits have converged."""


DIRECTIONS = ("axis", "diagonal")
"""The readings of the paper's "u is a unit vector" (Sec. 3): ``"axis"``, the first standard
basis vector ``e_1`` (the authors' notebook), and ``"diagonal"``, ``(1, ..., 1) / sqrt(D)``."""


def direction(dim: int, dtype=torch.float32, kind: str = "axis") -> Tensor:
    """The unit vector ``u`` of the second component.

    ``kind="axis"``: ``u = e_1``, as in the authors' notebook; the separation lies along one
    coordinate, so a diagonal covariance can align with it and the other ``D - 1`` coordinates
    are fitted exactly. ``kind="diagonal"``: ``u = (1, ..., 1) / sqrt(D)``; every coordinate sees
    the separation, so a diagonal covariance cannot align with it. For ``D = 1`` both are ``u = 1``.

    Raises:
        ValueError: ``kind`` is not one of :data:`DIRECTIONS`.
    """
    if kind == "axis":
        u = torch.zeros(dim, dtype=dtype)
        u[0] = 1.0
        return u
    if kind == "diagonal":
        return torch.full((dim,), 1.0 / math.sqrt(dim), dtype=dtype)
    raise ValueError(f"direction kind must be one of {DIRECTIONS}, got {kind!r}")


def mixture_log_prob(x: Tensor, a: Tensor, u: Tensor, component_sd: Tensor) -> Tensor:
    """``log p_a(x)`` for ``x`` of shape ``(*P, n, D)``, ``a`` and ``component_sd`` of shape ``P``."""
    s = component_sd[..., None]
    d = x.shape[-1]
    base = -0.5 * d * _LOG_2PI - d * torch.log(s)
    first = base - 0.5 * (x / s[..., None]).square().sum(-1)
    shifted = x - (a[..., None, None] * u)
    second = base - 0.5 * (shifted / s[..., None]).square().sum(-1)
    return torch.logaddexp(first, second) - math.log(2.0)


def reverse_kl(mean: Tensor, log_sd: Tensor, eps: Tensor, a: Tensor, u: Tensor,
               component_sd: Tensor) -> Tensor:
    """Monte Carlo ``E_q[log q - log p_a]`` with the given standard normal draws ``eps (*P, n, D)``.

    ``log q(x)`` at ``x = mu + sigma * eps`` is ``-sum log sigma - |eps|^2 / 2 - D/2 log 2 pi``.
    """
    x = mean[..., None, :] + torch.exp(log_sd)[..., None, :] * eps
    log_q = -log_sd.sum(-1)[..., None] - 0.5 * eps.square().sum(-1) - 0.5 * eps.shape[-1] * _LOG_2PI
    return (log_q - mixture_log_prob(x, a, u, component_sd)).mean(-1)


def fit_reverse_kl(
    a: Tensor,
    component_sd: Tensor,
    *,
    dim: int,
    n_samples: int,
    n_steps: int,
    lr: float,
    generator: torch.Generator,
    u: Tensor | None = None,
    init_sd: Tensor | float = 1.0,
    state: dict | None = None,
    save: Callable[[dict], None] | None = None,
    every_s: float = 120.0,
    budget_s: float | None = None,
) -> ReverseKLFit:
    """Minimise ``KL(N(mu, diag sigma^2) || p_a)`` from ``mu = 0, sigma = init_sd`` with Adam.

    Args:
        a: mode distances, any batch shape ``P``.
        component_sd: the mixture components' standard deviation ``s``, broadcastable to ``P``.
        dim: ``D``.
        n_samples: reparameterised draws per step (fresh each step).
        n_steps, lr: Adam iterations and step size.
        generator: the only source of randomness; the fit runs on its device.
        u: unit direction of the second component; default :func:`direction` (``u = e_1``).
        init_sd: the starting sd of ``q``, broadcastable to ``P`` (default 1: ``q = N(0, I)``).
        state: a state ``save`` was given by an earlier call with the same arguments and a
            generator seeded as then: the fit continues from it (the generator takes the
            state's).
        save: ``save(state)`` keeps the fit's state (a dict of CPU tensors) at most every
            ``every_s`` seconds, when ``budget_s`` is spent, and once more after the last step.
            None: no state is kept and there is no budget.
        every_s, budget_s: see :func:`symlib.inference.loop.run` (``budget_s`` None: no limit).

    Raises:
        BudgetExhausted: ``budget_s`` was spent first; ``save`` has the state to continue from.
    """
    device = generator.device
    a = torch.as_tensor(a, dtype=torch.float32).to(device)
    s = torch.as_tensor(component_sd, dtype=torch.float32).to(device).expand_as(a)
    u = (direction(dim) if u is None else u.to(torch.float32)).to(device)
    mean = torch.zeros(a.shape + (dim,), device=device, requires_grad=True)
    start = torch.as_tensor(init_sd, dtype=torch.float32).to(device).expand_as(a)
    log_sd = torch.log(start)[..., None].expand(a.shape + (dim,)).clone().requires_grad_(True)
    opt = torch.optim.Adam([mean, log_sd], lr=lr)
    history = torch.empty(n_steps, device=device)
    done = 0
    if state is not None:
        with torch.no_grad():
            mean.copy_(state["mean"])
            log_sd.copy_(state["log_sd"])
            history[:state["step"]] = state["history"].to(device)
        opt.load_state_dict(state["opt"])
        generator.set_state(state["generator"])
        done = state["step"]

    def step(k: int) -> int:
        eps = torch.randn(a.shape + (n_samples, dim), generator=generator, device=device)
        loss = reverse_kl(mean, log_sd, eps, a, u, s).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        history[k] = loss.detach() / max(a.numel(), 1)
        return k + 1

    def keep(k: int, _seconds: float = 0.0) -> None:
        save({"step": k, "mean": mean.detach().cpu().clone(), "log_sd": log_sd.detach().cpu().clone(),
              "opt": copy.deepcopy(opt.state_dict()), "generator": generator.get_state(), "history": history[:k].cpu().clone()})

    piece = loop.run(done, step, done=lambda k: k, total=n_steps, save=keep if save is not None else None,
                     every_s=every_s, budget_s=budget_s if save is not None else None)
    if piece.stopped:
        raise loop.BudgetExhausted(f"reverse-KL fit stopped at its time budget after {piece.state:,} of "
                                   f"{n_steps:,} steps; run again to continue from its checkpoint")
    if save is not None and done < n_steps:
        keep(n_steps)   # finished: a caller that stops later need not fit this again
    with torch.no_grad():
        eps = torch.randn(a.shape + (n_samples, dim), generator=generator, device=device)
        kl = reverse_kl(mean, log_sd, eps, a, u, s)
        m = mean.detach()
        return ReverseKLFit(m.cpu(), torch.exp(log_sd.detach()).cpu(), kl.cpu(),
                            interpolation_ratio(m, a).cpu(), history.cpu())


def interpolation_ratio(mean: Tensor, a: Tensor) -> Tensor:
    """``|mu| / a`` (Gelberg et al., Fig. 3); NaN where ``a = 0``."""
    a = torch.as_tensor(a, dtype=mean.dtype)
    norm = torch.linalg.vector_norm(mean, dim=-1)
    return torch.where(a > 0, norm / torch.where(a > 0, a, torch.ones_like(a)), torch.nan)


def mode_seeking_threshold(a, ratio, *, band: float = 0.25) -> float:
    """The smallest grid ``a`` whose fit has left the midpoint band, ``|ratio - 1/2| > band``.

    Args:
        a: increasing grid of mode distances.
        ratio: :func:`interpolation_ratio` at each ``a`` (NaNs are skipped).
        band: half-width of the band around the midpoint 1/2 that counts as interpolating.

    Returns:
        ``a*``, or NaN if every fit on the grid interpolates.
    """
    a, ratio = np.asarray(a, dtype=float), np.asarray(ratio, dtype=float)
    outside = np.isfinite(ratio) & (np.abs(ratio - 0.5) > band)
    return float(a[outside][0]) if outside.any() else float("nan")

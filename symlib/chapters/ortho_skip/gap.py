"""The ELBO gap between a diagonal Gaussian and its symmetric mixture (Kurle et al., 2021, Sec. 2.2).

For a diagonal Gaussian ``q0 = N(mu, diag(sigma^2))`` over the weights of an MLP, the symmetric
mixture ``q_mix = (1/N) sum_n q_n`` puts one copy ``q_n = N(P_n mu, diag(P_n sigma^2))`` at each
of the ``N`` permutation-equivalent modes. Likelihood and (zero-centred, isotropic) prior terms
are equal under every copy, so the two ELBOs differ only in the entropy (Kurle et al., Eq. 6):

    L_MoG - L_Gauss = KL[q0 || q_mix] = E_{w ~ q0}[log q0(w) - log (1/N) sum_n q_n(w)],

with ``0 <= KL <= log N``: the upper bound because ``q_mix >= q0 / N`` (``q0`` is one of the
copies), the lower because KL is non-negative. The gap is 0 when all copies coincide (e.g.
``mu = 0``: every weight at the prior) and tends to ``log N`` when they are well separated.

**Which layers permute.** In the pre-activation MLP ``h_l = W_l f_l(h_{l-1}) + b_l`` every hidden
layer ``l = 1..L`` can be permuted (rows of ``W_l``, ``b_l``, columns of ``W_{l+1}``), so
``N = prod_{l=1}^L N_l!`` (Kurle et al. count it so in Sec. 2.1). Their bound after Eq. 6 is
written over ``l = 2..L``, which leaves out the first hidden layer; :func:`log_group_order`
computes both and chapter 1 shows which one the gap actually reaches.

The estimator (:func:`mixture_gap`) is plain Monte Carlo over ``w ~ q0`` with all ``N`` copies
enumerated, in float64. Every per-sample term is ``<= log N`` exactly, so the estimate never
exceeds the upper bound; it can dip below 0 by Monte Carlo error (it is reported with its
standard error).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from symlib.nn.mlp import MLPSpec, Params
from symlib.symmetry import GroupElement, apply_group_element

__all__ = [
    "CollapseCurve",
    "GapCurve",
    "GapEstimate",
    "collapse_curve",
    "flatten_params",
    "gap_curve",
    "log_group_order",
    "mixture_gap",
    "permutation_indices",
    "unflatten_params",
]

MAX_GROUP_ORDER = 2_000_000
"""Refuse to enumerate larger groups (the estimator's cost is samples x N x D)."""


class GapEstimate(NamedTuple):
    """A Monte Carlo estimate of ``KL[q0 || q_mix]`` in nats."""

    estimate: float
    standard_error: float


class GapCurve(NamedTuple):
    """``KL[q0 || q_mix]`` along ``mu = scale * direction`` with fixed ``sigma``."""

    scales: Tensor
    gap: Tensor
    standard_error: Tensor
    log_n: float
    """``log N``, ``N`` the number of mixture components (all enumerated permutations)."""


class CollapseCurve(NamedTuple):
    """The gap when only ``k`` units per hidden layer are active and the rest sit at the prior."""

    n_active: Tensor
    gap: Tensor
    standard_error: Tensor
    limit: Tensor
    """``log prod_l N_l! / (N_l - k)!``: the log-number of *distinct* copies, the gap's limit
    when the active units are well separated."""


def flatten_params(params: Params, spec: MLPSpec) -> Tensor:
    """Concatenate ``W1, b1, W2, ...`` (order of ``spec.shapes()``), row-major, into ``(..., D)``."""
    parts = []
    for key, shape in spec.shapes().items():
        t = params[key]
        parts.append(t.reshape(t.shape[: t.ndim - len(shape)] + (-1,)))
    return torch.cat(parts, dim=-1)


def unflatten_params(flat: Tensor, spec: MLPSpec) -> Params:
    """Inverse of :func:`flatten_params`."""
    out, start = {}, 0
    for key, shape in spec.shapes().items():
        size = math.prod(shape)
        out[key] = flat[..., start: start + size].reshape(flat.shape[:-1] + shape)
        start += size
    return out


def log_group_order(spec: MLPSpec, layers: Sequence[int] | None = None) -> float:
    """``log prod_l N_l!`` over the hidden ``layers`` (default all, ``1..L``)."""
    layers = _layers(spec, layers)
    return sum(math.lgamma(spec.widths[l] + 1) for l in layers)


def permutation_indices(spec: MLPSpec, layers: Sequence[int] | None = None) -> Tensor:
    """Flat index maps of every element of the hidden-unit permutation group.

    Row ``n`` is ``pi_n`` with ``(P_n w)[d] = w[pi_n[d]]`` for flat weight vectors ``w``
    (:func:`flatten_params`), so ``w[perms]`` holds all ``N`` permuted copies. Row 0 is the
    identity.

    Args:
        spec: the MLP.
        layers: the hidden layers to permute (1-based, default all ``1..L``); the others stay.

    Returns:
        LongTensor ``(N, D)``, ``N = prod_{l in layers} N_l!``.

    Raises:
        ValueError: if ``N`` exceeds :data:`MAX_GROUP_ORDER`.
    """
    layers = _layers(spec, layers)
    order = math.prod(math.factorial(spec.widths[l]) for l in layers)
    if order > MAX_GROUP_ORDER:
        raise ValueError(f"the group has {order} elements; at most {MAX_GROUP_ORDER} are enumerated")
    n_params = spec.n_params
    index = unflatten_params(torch.arange(n_params), spec)
    rows = []
    for choice in itertools.product(*(itertools.permutations(range(spec.widths[l])) for l in layers)):
        g = GroupElement({f"P{l}": torch.tensor(p) for l, p in zip(layers, choice)})
        rows.append(flatten_params(apply_group_element(index, spec, g), spec))
    return torch.stack(rows)


def mixture_gap(
    mean: Tensor, sd: Tensor, perms: Tensor, n_samples: int, generator: torch.Generator,
    *, chunk: int = 1024,
) -> GapEstimate:
    """Monte Carlo ``KL[q0 || q_mix]``, ``q_mix = (1/N) sum_n N(mean[pi_n], diag(sd[pi_n]^2))``.

    Args:
        mean, sd: flat ``(D,)`` mean and standard deviation of ``q0``.
        perms: ``(N, D)`` index maps (:func:`permutation_indices`); must contain the identity
            for the ``log N`` bound to hold.
        n_samples: draws ``w ~ q0``.
        generator: CPU generator, the only source of randomness.
        chunk: samples per block (memory is ``chunk x N`` doubles).

    Per sample ``w = mean + sd * eps``: ``log q0(w) - logmeanexp_n log q_n(w)``, where the
    quadratic forms of all copies come from two matrix products,
    ``sum_d (w_d - m_nd)^2 / s_nd^2 = (w^2) . (1/s_n^2) - 2 w . (m_n / s_n^2) + sum_d m_d^2/s_d^2``,
    and the ``log s`` normalisers cancel (every copy has the same multiset of ``s``).
    """
    mean = mean.to(torch.float64)
    sd = sd.to(torch.float64)
    precision = sd.pow(-2)
    a = precision[perms]  # (N, D)
    b = (mean * precision)[perms]
    c = (mean.square() * precision).sum()
    log_n = math.log(perms.shape[0])
    terms = []
    remaining = n_samples
    while remaining > 0:
        m = min(chunk, remaining)
        remaining -= m
        eps = torch.randn(m, mean.shape[-1], generator=generator, dtype=torch.float64)
        w = mean + sd * eps
        quad = w.square() @ a.T - 2.0 * (w @ b.T) + c  # (m, N)
        log_q0 = -0.5 * eps.square().sum(-1)
        log_mix = torch.logsumexp(-0.5 * quad, dim=-1) - log_n
        terms.append(log_q0 - log_mix)
    t = torch.cat(terms)
    se = t.std(correction=1).item() / math.sqrt(len(t)) if len(t) > 1 else float("nan")
    return GapEstimate(t.mean().item(), se)


def gap_curve(
    spec: MLPSpec,
    scales: Sequence[float],
    n_samples: int,
    generator: torch.Generator,
    *,
    sd: float = 1.0,
    layers: Sequence[int] | None = None,
) -> GapCurve:
    """The gap as the means move from the prior (``scale = 0``) to well separated.

    ``mu = scale * d`` with one direction ``d ~ N(0, I)`` drawn from ``generator`` (generic, so
    no two permuted copies of ``d`` coincide), ``sigma = sd`` for every weight. At ``scale = 0``
    with ``sd = 1``, ``q0`` is the ``N(0, I)`` prior: every weight collapsed.
    """
    perms = permutation_indices(spec, layers)
    direction = torch.randn(spec.n_params, generator=generator, dtype=torch.float64)
    sd_vec = torch.full((spec.n_params,), float(sd), dtype=torch.float64)
    gaps, ses = [], []
    for scale in scales:
        est = mixture_gap(float(scale) * direction, sd_vec, perms, n_samples, generator)
        gaps.append(est.estimate)
        ses.append(est.standard_error)
    return GapCurve(
        torch.tensor([float(s) for s in scales], dtype=torch.float64),
        torch.tensor(gaps, dtype=torch.float64),
        torch.tensor(ses, dtype=torch.float64),
        math.log(perms.shape[0]),
    )


def collapse_curve(
    spec: MLPSpec,
    n_active: Sequence[int],
    n_samples: int,
    generator: torch.Generator,
    *,
    scale: float = 10.0,
    sd: float = 1.0,
) -> CollapseCurve:
    """The gap as more units collapse onto the prior (Kurle et al.'s mechanism, Sec. 2.2).

    In every hidden layer the first ``k`` units are active (incoming weights, bias and outgoing
    weights centred at ``scale * d``, ``d ~ N(0, I)``: well separated for a large ``scale``) and
    the other ``N_l - k`` are collapsed (those entries centred at 0); every sd is ``sd``. Copies
    that only permute collapsed units coincide, so the gap tends to
    ``log prod_l N_l! / (N_l - k)!`` instead of ``log N``: each collapsed unit lowers the
    entropy penalty a unimodal ``q`` pays, which is why VI favours collapse.
    """
    perms = permutation_indices(spec)
    direction = torch.randn(spec.n_params, generator=generator, dtype=torch.float64)
    sd_vec = torch.full((spec.n_params,), float(sd), dtype=torch.float64)
    gaps, ses, limits = [], [], []
    for k in n_active:
        mean = unflatten_params(float(scale) * direction, spec)
        mean = {key: v.clone() for key, v in mean.items()}
        for l, width in enumerate(spec.hidden_widths, start=1):
            if not 0 <= k <= width:
                raise ValueError(f"n_active must lie in 0..{width}; got {k}")
            mean[f"W{l}"][k:, :] = 0.0
            mean[f"b{l}"][k:] = 0.0
            mean[f"W{l + 1}"][:, k:] = 0.0
        est = mixture_gap(flatten_params(mean, spec), sd_vec, perms, n_samples, generator)
        gaps.append(est.estimate)
        ses.append(est.standard_error)
        limits.append(sum(math.lgamma(w + 1) - math.lgamma(w - k + 1) for w in spec.hidden_widths))
    return CollapseCurve(
        torch.tensor([int(k) for k in n_active]),
        torch.tensor(gaps, dtype=torch.float64),
        torch.tensor(ses, dtype=torch.float64),
        torch.tensor(limits, dtype=torch.float64),
    )


def _layers(spec: MLPSpec, layers: Sequence[int] | None) -> tuple[int, ...]:
    n_hidden = len(spec.hidden_widths)
    layers = tuple(range(1, n_hidden + 1)) if layers is None else tuple(int(l) for l in layers)
    if any(not 1 <= l <= n_hidden for l in layers):
        raise ValueError(f"hidden layers are 1..{n_hidden}; got {layers}")
    return layers

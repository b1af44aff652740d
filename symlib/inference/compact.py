"""Compact (diagonal Gaussian) summaries of weight samples, before and after rebasin, and pruning.

Xiao et al. (2023, Sec. 3) summarise a set of weight samples ``{W^(k)}`` (HMC samples, ensemble
members) by a fully factorised Gaussian, the same family as mean-field VI:

- ``q_d = N(mu_d, diag sigma_d^2)``: per-weight sample mean and variance of the raw samples
  ("direct"); every sample may sit in a different permutation mode, so ``mu_d`` averages
  unrelated units (:func:`moments`);
- ``q_r = N(mu_r, diag sigma_r^2)``: the same after rebasing every sample to one shared
  reference sample ``W^ref``, i.e. replacing ``W^(k)`` by ``g_k . W^(k)`` with ``g_k`` from
  weight or activation matching (:func:`rebased_moments`, :mod:`symlib.symmetry.rebasin`).

Variances use the unbiased ``1/(K-1)`` normalisation. Everything streams over batches of
samples (an iterable of parameter dicts with a leading sample axis), so a sample set that lives
on disk (:class:`symlib.inference.hmc.SampleStore`) is never loaded whole.

Pruning (Xiao et al., Fig. 3 right): keep the share ``rho`` of weights with the *lowest*
``sigma`` at their mean and set the others to zero (:func:`prune_by_sd`). Means of one method can
be combined with sigmas of another once both live in the same basin (:func:`align`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import NamedTuple

import torch
from torch import Tensor

from symlib.nn.mlp import MLPSpec, Params, mlp_forward
from symlib.symmetry import GroupElement, apply_group_element
from symlib.symmetry.rebasin import (
    activation_matching,
    hidden_activations,
    total_not,
    weight_matching,
)

__all__ = [
    "DiagonalGaussian",
    "Matching",
    "RunningMoments",
    "align",
    "diagonal_predictive",
    "moments",
    "prune_by_sd",
    "rebase",
    "rebased_moments",
    "sample_diagonal",
    "samples_predictive",
]


class Matching(str, enum.Enum):
    """How samples are rebased onto the reference."""

    WEIGHT = "weight"
    """Weight matching (git re-basin coordinate descent; exact for one hidden layer)."""
    ACTIVATION = "activation"
    """Activation matching on a set of inputs (what Xiao et al. use for Table 1)."""


class DiagonalGaussian(NamedTuple):
    """``N(mean, diag sd^2)`` over every parameter, as two params dicts."""

    mean: Params
    sd: Params


class RunningMoments:
    """Streaming per-entry mean and variance (float64 shifted sums, numerically safe)."""

    def __init__(self):
        self.count = 0
        self._shift: Params | None = None
        self._sum: Params = {}
        self._sq: Params = {}

    def update(self, batch: Params) -> None:
        """Add ``S`` samples given with a leading sample axis."""
        if self._shift is None:  # shift by the first sample: avoids cancellation in E[x^2] - E[x]^2
            self._shift = {k: v[0].detach().to(torch.float64) for k, v in batch.items()}
            self._sum = {k: torch.zeros_like(v) for k, v in self._shift.items()}
            self._sq = {k: torch.zeros_like(v) for k, v in self._shift.items()}
        for k, v in batch.items():
            d = v.detach().to(torch.float64) - self._shift[k]
            self._sum[k] += d.sum(0)
            self._sq[k] += d.square().sum(0)
        self.count += next(iter(batch.values())).shape[0]

    def result(self, dtype=torch.float32) -> DiagonalGaussian:
        if self.count < 2:
            raise ValueError("need at least two samples for a variance")
        mean, sd = {}, {}
        for k in self._sum:
            m = self._sum[k] / self.count
            var = (self._sq[k] - self.count * m.square()) / (self.count - 1)
            mean[k] = (m + self._shift[k]).to(dtype)
            sd[k] = var.clamp_min(0.0).sqrt().to(dtype)
        return DiagonalGaussian(mean, sd)


def moments(samples: Params | Iterable[Params]) -> DiagonalGaussian:
    """``q_d``: mean and sd of the raw samples (a batched dict, or an iterable of batches)."""
    acc = RunningMoments()
    for batch in _batches(samples):
        acc.update(batch)
    return acc.result()


def rebase(
    samples: Params,
    reference: Params,
    spec: MLPSpec,
    method: Matching | str = Matching.ACTIVATION,
    *,
    x: Tensor | None = None,
    reference_activations: list[Tensor] | None = None,
) -> tuple[Params, GroupElement]:
    """Match every sample of a batch (leading axis ``S``) to ``reference``; returns the matched
    samples and the batched permutations ``g`` (``x``: matching inputs, activation matching only)."""
    method = Matching(method)
    if method is Matching.ACTIVATION:
        if x is None:
            raise ValueError("activation matching needs inputs x")
        g = activation_matching(reference, samples, spec, x, reference_activations=reference_activations)
    else:
        g = weight_matching(reference, samples, spec)
    return apply_group_element(samples, spec, g), g


def rebased_moments(
    samples: Params | Iterable[Params],
    reference: Params,
    spec: MLPSpec,
    method: Matching | str = Matching.ACTIVATION,
    *,
    x: Tensor | None = None,
) -> tuple[DiagonalGaussian, list[int]]:
    """``q_r``: moments after rebasing each sample onto ``reference``, and each sample's NoT."""
    method = Matching(method)
    acc, nots = RunningMoments(), []
    ref_act = None
    if method is Matching.ACTIVATION and x is not None:
        with torch.no_grad():
            ref_act = hidden_activations(reference, x, spec)
    for batch in _batches(samples):
        matched, g = rebase(batch, reference, spec, method, x=x, reference_activations=ref_act)
        acc.update(matched)
        n = next(iter(batch.values())).shape[0]
        nots += [total_not(GroupElement({k: p[i] for k, p in g.perms.items()})) for i in range(n)]
    return acc.result(), nots


def align(q: DiagonalGaussian, reference_mean: Params, spec: MLPSpec,
          method: Matching | str = Matching.ACTIVATION, *, x: Tensor | None = None) -> DiagonalGaussian:
    """Permute a compact representation (mean and sd together) into the basin of ``reference_mean``."""
    one = {k: v.unsqueeze(0) for k, v in q.mean.items()}
    _, g = rebase(one, reference_mean, spec, method, x=x)
    g = GroupElement({k: p[0] for k, p in g.perms.items()})
    return DiagonalGaussian(apply_group_element(q.mean, spec, g), apply_group_element(q.sd, spec, g))


def sample_diagonal(q: DiagonalGaussian, n: int, generator: torch.Generator) -> Params:
    """``n`` draws ``w = mean + sd * eps`` with a leading sample axis (noise from ``generator``)."""
    out = {}
    for k, m in q.mean.items():
        eps = torch.randn((n, *m.shape), generator=generator, dtype=m.dtype, device=generator.device)
        out[k] = m + q.sd[k] * eps.to(m.device)
    return out


@torch.no_grad()
def diagonal_predictive(q: DiagonalGaussian, x: Tensor, spec: MLPSpec, n_samples: int,
                        generator: torch.Generator, *, chunk: int = 25) -> Tensor:
    """Monte Carlo predictive ``(1/S) sum_s softmax(f(x; w_s))``, ``w_s ~ q``: ``(n, K)``."""
    batches = (sample_diagonal(q, min(chunk, n_samples - lo), generator) for lo in range(0, n_samples, chunk))
    return samples_predictive(batches, x, spec)


@torch.no_grad()
def samples_predictive(samples: Params | Iterable[Params], x: Tensor, spec: MLPSpec) -> Tensor:
    """``(1/S) sum_s softmax(f(x; w_s))`` over every sample of a batched dict / iterable of batches."""
    total, count = None, 0
    forward = torch.func.vmap(mlp_forward, in_dims=(0, None, None))
    for batch in _batches(samples):
        probs = torch.softmax(forward(batch, x, spec), -1).to(torch.float64).sum(0)
        total = probs if total is None else total + probs
        count += next(iter(batch.values())).shape[0]
    return (total / count).to(x.dtype)


def prune_by_sd(mean: Params, sd: Params, keep: float, *, keys: Iterable[str] | None = None) -> Params:
    """``mean`` with all but the share ``keep`` of lowest-``sd`` entries set to zero.

    The ranking is global over the entries of ``keys`` (default: the weight matrices ``W*``;
    biases are kept). Exactly ``round(keep * count)`` entries survive (ties broken by position).
    """
    if not 0.0 <= keep <= 1.0:
        raise ValueError(f"keep must be in [0, 1]; got {keep}")
    keys = [k for k in mean if k.startswith("W")] if keys is None else list(keys)
    flat = torch.cat([sd[k].reshape(-1) for k in keys])
    n_keep = round(keep * flat.numel())
    mask = torch.zeros(flat.numel(), dtype=torch.bool, device=flat.device)
    mask[torch.argsort(flat, stable=True)[:n_keep]] = True
    out, lo = dict(mean), 0
    for k in keys:
        size = mean[k].numel()
        out[k] = torch.where(mask[lo: lo + size].reshape(mean[k].shape), mean[k], torch.zeros_like(mean[k]))
        lo += size
    return out


def _batches(samples: Params | Iterable[Params]) -> Iterable[Params]:
    return [samples] if isinstance(samples, dict) else samples

"""Symmetrised mean-field VI: the symmetric Gaussian mixture (SGM) of Gelberg et al. (2024).

Let ``G`` be the group of hidden-unit permutations, acting on the weight vector ``w`` by
orthogonal matrices, and ``q(w) = N(w; mu, diag(sigma^2))`` a mean-field Gaussian. Its
*symmetrisation* (Gelberg et al., Eq. 4) is the uniform mixture over the orbit,

    q^G(w) = |G|^-1 sum_g q(g^-1 w),    component g = N(g mu, diag(g sigma^2)),

i.e. ``mu`` and ``sigma`` permuted along the hidden units exactly as weights are
(:func:`permute_mean_field`). For a ``G``-invariant prior and likelihood, **Theorem 4.1**:

    ELBO(q^G) = ELBO(q) + H(q^G) - H(q) = ELBO(q) + I(g; w),    0 <= I <= log |G|,

so only the prior-KL term changes. **Theorem 4.3** estimates ``H(q^G)`` with ``S`` draws
``w_i ~ q`` and ``K - 1`` permutations ``g_j`` uniform on ``G`` (the identity allowed):

    H_K = -(1/S) sum_i log[(1/K) (q(w_i) + sum_j q(g_j^-1 w_i))],    E[H_K] <= H(q^G),

tighter as ``K`` grows, at ``O(K)`` cost. Writing ``d_ij = log q(g_j^-1 w_i) - log q(w_i)``,

    H_K = -(1/S) sum_i log q(w_i) + I_K,    I_K = log K - (1/S) sum_i logsumexp(0, d_i1, ..., d_i,K-1),

and ``I_K <= log K`` always (the InfoNCE form, Gelberg et al., App. E). Because a permutation
only reorders the entries of each tensor, ``sum log sigma`` is the same for every component and
``d_ij = (1/2) sum (z^2 - z_g^2)`` with ``z = (w - mu)/sigma``, ``z_g = (w - g mu)/(g sigma)``:
computed entry-wise as differences, it is exact to rounding however far apart the copies are.

**Training objective** (Gelberg et al., Sec. 4; the printed VI line has a sign typo on KL):

    L^G_K = (N/M)(1/S) sum_i log p(y_B | x_B, w_i) - KL(q || p) - H(q) + H_K.

:func:`objective` evaluates it as ``ELL - KL + I_K``: this drops the term
``-(1/S) sum_i log q(w_i) - H(q)``, which has mean zero and, under the reparameterisation
``w = mu + sigma * eps``, gradient exactly zero (``log q(w_i) = -sum log sigma - |eps|^2/2 + c``),
so the gradients are the paper's and the value has less noise. ``K = 1`` gives ``I_1 = 0``:
plain mean-field VI on the same code path. Predictions sample ``q``: ``q`` and ``q^G`` induce
the same distribution over functions (Gelberg et al., App. C).

**Exact reference** (:func:`exact_mutual_information`, :func:`exact_symmetrised_entropy`): for a
group small enough to enumerate (:func:`enumerate_group`), ``H(q^G) = H(q) + I`` with
``I = E_{w~q}[log |G| - logsumexp_g d_g(w)]``, a Monte Carlo average over ``w`` of the mixture
density computed exactly over all ``|G|`` components (``E_{q^G} = E_q`` here because
``log q^G`` is ``G``-invariant).

Layout. Variational parameters are a :class:`symlib.inference.mfvi.MeanField` (``mean`` and
``log_sd`` dicts). Which tensors exist and how the group acts on them is data: a
:class:`symlib.symmetry.PermutationSpec` whose ``param_ndims`` lists every variational tensor
and its event rank (extra leading axes are a batch of independent models, e.g. seeds). Weight
samples carry one more axis ``S`` after the batch axes. The prior is ``N(0, prior_sd^2 I)``,
which is ``G``-invariant. Randomness comes only from the generators passed in.

Public functions: :func:`mean_field`, :func:`sample_weights`, :func:`log_prob`,
:func:`gaussian_entropy`, :func:`kl_to_prior`, :func:`restrict_permutation_spec`,
:func:`group_order`, :func:`sample_permutations`, :func:`enumerate_group`, :func:`permute_mean_field`,
:func:`log_density_ratios`, :func:`entropy_estimate`, :func:`mutual_information_estimate`,
:func:`mixture_log_prob`, :func:`exact_mutual_information`, :func:`exact_symmetrised_entropy`,
:func:`objective`, :func:`fit`, :func:`predictive_probs`; :class:`RatioPath` chooses how the
density ratios are computed (same values, different cost), :func:`choose_ratio_path` by a cost
model.
"""

from __future__ import annotations

import enum
import itertools
import math
import warnings
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor
from torch.autograd.function import once_differentiable
from tqdm import tqdm

from symlib.inference.mfvi import BayesMLP, MeanField, sample_outputs
from symlib.nn.mlp import MLPSpec, Params
from symlib.symmetry import GroupElement, PermutationSpec, apply_group_element

__all__ = [
    "UNIT_PAIR_MEMORY",
    "FitResult",
    "MeanField",
    "ObjectiveParts",
    "RatioPath",
    "choose_ratio_path",
    "entropy_estimate",
    "enumerate_group",
    "exact_mutual_information",
    "exact_symmetrised_entropy",
    "fit",
    "gaussian_entropy",
    "group_order",
    "kl_to_prior",
    "log_density_ratios",
    "log_prob",
    "mean_field",
    "mixture_log_prob",
    "mutual_information_estimate",
    "objective",
    "permute_mean_field",
    "predictive_probs",
    "restrict_permutation_spec",
    "sample_permutations",
    "sample_weights",
]

UNIT_PAIR_MEMORY = 2**30
"""Bytes above which :func:`choose_ratio_path` never forms dense unit-pair matrices."""

_HALF_LOG_2PI_E = 0.5 * (1.0 + math.log(2.0 * math.pi))
_LOG_2PI = math.log(2.0 * math.pi)


class RatioPath(str, enum.Enum):
    """How :func:`log_density_ratios` evaluates ``log q(g^-1 w) - log q(w)`` (same values)."""

    AUTO = "auto"
    """Per perm, the cheaper of the two below by :func:`choose_ratio_path`'s cost model."""
    UNIT_PAIRS = "unit_pairs"
    """Per-perm dense ``N_l x N_l`` matrices of all unit pairs, then one gather per element:
    cost flat in K, quadratic in ``N_l``. Needs every touched tensor to be touched by a single
    perm."""
    DIRECT = "direct"
    """Only the unit pairs the elements use (``N_l`` per element): cost linear in K, as the
    formula reads. Tensors touched by several perms materialise every permuted component."""


class ObjectiveParts(NamedTuple):
    """One Monte Carlo evaluation of the (symmetrised) ELBO, each of the batch shape."""

    objective: Tensor
    """``expected_log_likelihood - kl + mutual_information``."""
    expected_log_likelihood: Tensor
    """``(N/M)(1/S) sum_i log p(y_B | x_B, w_i)``."""
    kl: Tensor
    """Closed-form ``KL(q || p)``."""
    mutual_information: Tensor
    """``I_K`` (zero for ``K = 1``)."""


class FitResult(NamedTuple):
    """Output of :func:`fit`."""

    q: MeanField
    """Final variational parameters (detached)."""
    history: dict[str, np.ndarray]
    """Per epoch, ``(*B, epochs)``: ``objective`` (per data point), ``expected_log_likelihood``,
    ``kl`` and ``mutual_information`` (epoch means of the minibatch estimates, in nats)."""


# --------------------------------------------------------------------------- the mean field


def mean_field(means: Params, init_sd: float | Tensor) -> MeanField:
    """A mean-field state with the given means (copied) and every standard deviation ``init_sd``."""
    mean = {k: v.detach().clone() for k, v in means.items()}
    log_sd = {k: torch.log(torch.as_tensor(init_sd, dtype=v.dtype, device=v.device)).expand_as(v).clone()
              for k, v in mean.items()}
    return MeanField(mean, log_sd)


def sample_weights(q: MeanField, pspec: PermutationSpec, n_samples: int,
                   generator: torch.Generator) -> Params:
    """Reparameterised draws ``w = mu + sigma * eps``, each tensor ``(*B, S, *event)``."""
    nb = _batch_ndim(q, pspec)
    out = {}
    for key, mean in q.mean.items():
        mean = mean.unsqueeze(nb)
        shape = mean.shape[:nb] + (n_samples,) + mean.shape[nb + 1:]
        eps = torch.randn(shape, generator=generator, dtype=mean.dtype, device=mean.device)
        out[key] = mean + torch.exp(q.log_sd[key]).unsqueeze(nb) * eps
    return out


def log_prob(q: MeanField, pspec: PermutationSpec, w: Params) -> Tensor:
    """``log q(w)`` for samples ``w`` of shape ``(*B, S, *event)``; returns ``(*B, S)``."""
    nb = _batch_ndim(q, pspec)
    total = 0.0
    for key, mean in q.mean.items():
        log_sd = q.log_sd[key].unsqueeze(nb)
        z = (w[key] - mean.unsqueeze(nb)) * torch.exp(-log_sd)
        dens = -0.5 * z.square() - log_sd - 0.5 * _LOG_2PI
        total = total + dens.flatten(start_dim=nb + 1).sum(-1)
    return total


def gaussian_entropy(q: MeanField, pspec: PermutationSpec) -> Tensor:
    """Closed-form ``H(q) = sum (log sigma + (1 + log 2 pi)/2)``, of the batch shape."""
    nb = _batch_ndim(q, pspec)
    return sum((s + _HALF_LOG_2PI_E).flatten(start_dim=nb).sum(-1) for s in q.log_sd.values())


def kl_to_prior(q: MeanField, pspec: PermutationSpec, prior_sd: float = 1.0) -> Tensor:
    """``KL(q || N(0, prior_sd^2 I)) = sum [log(p/s) + (s^2 + m^2)/(2 p^2) - 1/2]``."""
    nb = _batch_ndim(q, pspec)
    log_p = math.log(prior_sd)
    total = 0.0
    for key, mean in q.mean.items():
        log_sd = q.log_sd[key]
        kl = log_p - log_sd + (torch.exp(2.0 * log_sd) + mean.square()) / (2.0 * prior_sd**2) - 0.5
        total = total + kl.flatten(start_dim=nb).sum(-1)
    return total


# --------------------------------------------------------------------------- the group


def restrict_permutation_spec(pspec: PermutationSpec, keys) -> PermutationSpec:
    """The action of ``pspec``'s group on the tensors ``keys`` only.

    For models where some parameters are fixed (not variational) and themselves invariant
    under the group, e.g. the output weights ``W2 = (1, 1)`` of Gelberg et al.'s two-parameter
    BNN. Perms that touch none of ``keys`` are dropped.
    """
    keys = set(keys)
    axes, sizes, incoming = {}, {}, {}
    for name, entries in pspec.perm_to_axes.items():
        kept = tuple(e for e in entries if e[0] in keys)
        if kept:
            axes[name] = kept
            sizes[name] = pspec.perm_sizes[name]
            incoming[name] = tuple(e for e in pspec.incoming.get(name, ()) if e[0] in keys)
    ndims = {k: v for k, v in pspec.param_ndims.items() if k in keys}
    missing = keys - set(ndims)
    if missing:
        raise ValueError(f"keys {sorted(missing)} have no event rank in pspec.param_ndims")
    return PermutationSpec(axes, sizes, incoming, ndims)


def group_order(pspec: PermutationSpec) -> int:
    """``|G| = prod_l N_l!``."""
    return math.prod(math.factorial(n) for n in pspec.perm_sizes.values())


def sample_permutations(pspec: PermutationSpec, shape: tuple[int, ...],
                        generator: torch.Generator) -> GroupElement:
    """``prod(shape)`` independent elements uniform on ``G``: perms of shape ``(*shape, N_l)``.

    Each perm is the argsort of i.i.d. uniforms, which is uniform over all ``N_l!`` orders
    (ties have probability zero), so the identity is drawn with probability ``1/|G|``.
    """
    shape = tuple(shape)
    return GroupElement({
        name: torch.rand(shape + (n,), generator=generator).argsort(-1)
        for name, n in pspec.perm_sizes.items()
    })


def enumerate_group(pspec: PermutationSpec, *, max_order: int = 50_000) -> GroupElement:
    """All of ``G`` as one batched element with perms ``(|G|, N_l)``; the identity first.

    Raises:
        ValueError: if ``|G|`` exceeds ``max_order``.
    """
    order = group_order(pspec)
    if order > max_order:
        raise ValueError(f"|G| = {order} exceeds max_order = {max_order}; use the estimator H_K")
    names = list(pspec.perm_sizes)
    per_layer = [list(itertools.permutations(range(pspec.perm_sizes[n]))) for n in names]
    combos = list(itertools.product(*per_layer))
    return GroupElement({n: torch.tensor([c[i] for c in combos], dtype=torch.long)
                         for i, n in enumerate(names)})


def permute_mean_field(q: MeanField, pspec: PermutationSpec, g: GroupElement) -> MeanField:
    """The components ``N(g mu, diag(g sigma^2))`` for a batch of ``m`` group elements.

    Args:
        q: batch shape ``B``.
        pspec: the group's action on the variational tensors.
        g: perms of shape ``(m, N_l)`` (the same elements for every model) or ``(*B, m, N_l)``.

    Returns:
        A state of batch shape ``(*B, m)``: ``mu`` and ``log sigma`` transformed by ``g`` exactly
        as weights are (:func:`symlib.symmetry.apply_group_element`).
    """
    nb = _batch_ndim(q, pspec)
    m = next(iter(g.perms.values())).shape[-2]
    expanded = MeanField(*({k: _insert(v, nb, m) for k, v in d.items()} for d in q))
    return MeanField(apply_group_element(expanded.mean, pspec, g),
                     apply_group_element(expanded.log_sd, pspec, g))


def log_density_ratios(q: MeanField, pspec: PermutationSpec, w: Params, g: GroupElement,
                       path: RatioPath | str = RatioPath.AUTO) -> Tensor:
    """``d[..., i, j] = log q(g_j^-1 w_i) - log q(w_i)``, shape ``(*B, S, m)``.

    Equal to ``(1/2) sum (z^2 - z_g^2)`` over the tensors some perm touches (the others, and
    every ``log sigma`` term, cancel exactly). The tensors touched by one perm only (one hidden
    layer, or any net's first and last layers) are laid out as rows of unit vectors,
    ``w[i, r]`` with ``r`` running over the tensors' other axes, and summed through *unit-pair*
    distances

        C[i, k] = sum_r (w[i, r] - mu[k, r])^2 / sigma[k, r]^2,

    so ``sum z_g^2 = sum_i C[i, pi(i)]`` (new unit ``i`` is old unit ``pi(i)``).
    :attr:`RatioPath.UNIT_PAIRS` forms all of ``C`` with one matmul (cost independent of
    ``m``), expanded as ``w^2 A^T - 2 w (mu A)^T`` with ``A = sigma^-2`` in float64 so that the
    cancellation stays exact to rounding when ``sigma << |mu|``. :attr:`RatioPath.DIRECT`
    forms only the ``N_l m`` entries the elements use (sampled matmuls; cost linear in ``m``)
    in the weights' dtype, the diagonal entry by entry and the rest expanded around the
    units' mean (:class:`_SampledPairs`). :attr:`RatioPath.AUTO` picks per perm with
    :func:`choose_ratio_path`. The two give the same values and gradients up to rounding.
    Tensors touched by two perms (the middle layers of deeper nets) materialise every
    permuted component, entry by entry.
    """
    nb = _batch_ndim(q, pspec)
    owners: dict[str, list[tuple[str, int]]] = {}
    for name, axes in pspec.perm_to_axes.items():
        for key, axis in axes:
            owners.setdefault(key, []).append((name, axis))
    path = RatioPath(path)
    multi = [k for k, v in owners.items() if len(v) > 1]
    if path is RatioPath.UNIT_PAIRS and multi:
        raise ValueError(f"tensors {multi} are touched by several perms; use path='auto' or 'direct'")
    by_perm: dict[str, list[tuple[str, int]]] = {}
    for key, entries in owners.items():
        if len(entries) == 1:
            by_perm.setdefault(entries[0][0], []).append((key, entries[0][1]))
    total = 0.0
    for name, entries in by_perm.items():
        rows = _unit_rows(q, w, entries, nb)
        perm = g.perms[name].to(rows[0][0].device)
        chosen = path
        if path is RatioPath.AUTO:
            wr = rows[0][0]
            chosen = choose_ratio_path(wr.shape[-2], perm.shape[-2], row_size=sum(t[0].shape[-1] for t in rows),
                                       n_rows=math.prod(wr.shape[:-2]), dtype=wr.dtype)
        ratios = _ratios_by_unit_pairs if chosen is RatioPath.UNIT_PAIRS else _ratios_by_sampled_pairs
        total = total + ratios(rows, perm, nb)
    if multi:
        total = total + _ratios_elementwise(q, pspec, w, g, multi, nb)
    return total


def choose_ratio_path(n_units: int, n_elements: int, *, row_size: int = 1, n_rows: int = 1,
                      dtype: torch.dtype = torch.float32) -> RatioPath:
    """The cheaper way to sum one perm's unit-pair distances (:func:`log_density_ratios`).

    For ``m = n_elements`` perms of ``N = n_units`` units, unit rows of ``R = row_size``
    entries (all tensors the perm touches) and ``P = n_rows`` rows of weights (models x
    samples), forward plus backward cost about::

        unit pairs: 12 P N^2 R flops of dense float64 matmul, at F_64 = 40 GFLOP/s;
        direct:     12 P m N R flops of sampled matmul and weighted row sums in the weights'
                    dtype, at F_d = 27 GFLOP/s (float32) or 5.7 GFLOP/s (float64), plus
                    T_d = 0.5 ms of index bookkeeping,

    (single-thread CPU-time rates measured on the project's machine, AMD EPYC with AVX-512
    and MKL; the elementwise work, linear in ``P N R``, is about the same for both). The
    cheaper estimate wins: for float32 weights away from tiny sizes, ``DIRECT`` while
    ``m < 0.68 N`` (e.g. every ``K <= 20`` from ``N = 30`` up), for float64 while
    ``m < 0.14 N``. Memory: unit pairs hold ``C`` and its gradient, ``16 P N^2`` bytes, direct
    about ``40 P m N``; unit pairs is never chosen above :data:`UNIT_PAIR_MEMORY` bytes.
    """
    f_64, t_direct = 40e9, 5e-4
    f_direct = 5.7e9 if dtype == torch.float64 else 27e9
    work = 12.0 * n_rows * n_units * row_size
    unit_pairs = work * n_units / f_64
    direct = work * n_elements / f_direct + t_direct
    if 16 * n_rows * n_units**2 > UNIT_PAIR_MEMORY or direct < unit_pairs:
        return RatioPath.DIRECT
    return RatioPath.UNIT_PAIRS


def mutual_information_estimate(q: MeanField, pspec: PermutationSpec, w: Params,
                                g: GroupElement, path: RatioPath | str = RatioPath.AUTO) -> Tensor:
    """``I_K = log K - (1/S) sum_i logsumexp(0, d_i1, ..., d_i,K-1)`` with ``K = m + 1``.

    The InfoNCE estimate of ``I(g; w) = H(q^G) - H(q)`` (Gelberg et al., Thm. 4.3 / App. E);
    never above ``log K``. Shape: the batch shape.
    """
    d = log_density_ratios(q, pspec, w, g, path)
    zero = torch.zeros(d.shape[:-1] + (1,), dtype=d.dtype, device=d.device)
    k = d.shape[-1] + 1
    return math.log(k) - torch.logsumexp(torch.cat([zero, d], -1), -1).mean(-1)


def entropy_estimate(q: MeanField, pspec: PermutationSpec, w: Params, g: GroupElement) -> Tensor:
    """Theorem 4.3's ``H_K = -(1/S) sum_i log[(1/K)(q(w_i) + sum_j q(g_j^-1 w_i))]``.

    Args:
        q: batch shape ``B``.
        w: draws from ``q``, ``(*B, S, *event)`` (:func:`sample_weights`).
        g: the ``K - 1`` sampled elements, perms ``(K-1, N_l)`` or ``(*B, K-1, N_l)``.
    """
    return -log_prob(q, pspec, w).mean(-1) + mutual_information_estimate(q, pspec, w, g)


def mixture_log_prob(q: MeanField, pspec: PermutationSpec, w: Params, *,
                     elements: GroupElement | None = None, chunk: int = 256) -> Tensor:
    """``log q^G(w) = log q(w) + logsumexp_g d_g(w) - log |G|`` over all of ``G``, ``(*B, S)``.

    ``w`` need not come from ``q`` (e.g. a grid). ``elements`` defaults to
    :func:`enumerate_group`; it must hold the whole group.
    """
    elements = elements if elements is not None else enumerate_group(pspec)
    lse = _logsumexp_over_group(q, pspec, w, elements, chunk)
    n = next(iter(elements.perms.values())).shape[-2]
    return log_prob(q, pspec, w) + lse - math.log(n)


def exact_mutual_information(q: MeanField, pspec: PermutationSpec, n_samples: int,
                             generator: torch.Generator, *, chunk: int = 256) -> Tensor:
    """``I(g; w) = H(q^G) - H(q) = E_{w~q}[log |G| - logsumexp_{g in G} d_g(w)]`` by enumeration.

    Monte Carlo over ``n_samples`` draws ``w ~ q``; the mixture density at each draw is exact
    (all ``|G|`` components). In ``[0, log |G|]`` up to Monte Carlo error.
    """
    elements = enumerate_group(pspec)
    n = next(iter(elements.perms.values())).shape[-2]
    w = sample_weights(q, pspec, n_samples, generator)
    return math.log(n) - _logsumexp_over_group(q, pspec, w, elements, chunk).mean(-1)


def exact_symmetrised_entropy(q: MeanField, pspec: PermutationSpec, n_samples: int,
                              generator: torch.Generator, *, chunk: int = 256) -> Tensor:
    """``H(q^G) = H(q) + I(g; w)`` (:func:`exact_mutual_information`)."""
    return gaussian_entropy(q, pspec) + exact_mutual_information(q, pspec, n_samples, generator,
                                                                 chunk=chunk)


# --------------------------------------------------------------------------- training


def objective(
    q: MeanField,
    pspec: PermutationSpec,
    log_likelihood: Callable[[Params], Tensor],
    *,
    k: int,
    n_samples: int,
    prior_sd: float,
    generator: torch.Generator,
    perm_generator: torch.Generator | None = None,
    scale: float = 1.0,
    path: RatioPath | str = RatioPath.AUTO,
) -> ObjectiveParts:
    """Monte Carlo ``L^G_K = scale * (1/S) sum_i log p(batch | w_i) - KL(q || p) + I_K``.

    Args:
        q: the state, batch shape ``B`` (independent models).
        pspec: the group's action on the variational tensors.
        log_likelihood: ``w (*B, S, *event) -> (*B, S)``, the minibatch log-likelihood sum.
        k: ``K``; 1 is plain mean-field VI (no permutation is drawn, ``I_1 = 0``).
        n_samples: ``S`` weight draws, shared by the likelihood and the entropy estimator.
        prior_sd: the isotropic Gaussian prior's standard deviation.
        generator: weight noise.
        perm_generator: the permutations (default ``generator``). A separate stream lets MFVI
            and SGM runs share their weight noise.
        scale: ``N / M`` for a minibatch of ``M`` out of ``N`` points.
        path: how the density ratios are computed (:class:`RatioPath`); the value is the same.
    """
    if k < 1:
        raise ValueError(f"K must be >= 1, got {k}")
    w = sample_weights(q, pspec, n_samples, generator)
    ell = scale * log_likelihood(w).mean(-1)
    kl = kl_to_prior(q, pspec, prior_sd)
    if k > 1:
        batch = q.mean[next(iter(q.mean))].shape[: _batch_ndim(q, pspec)]
        g = sample_permutations(pspec, tuple(batch) + (k - 1,), perm_generator or generator)
        mi = mutual_information_estimate(q, pspec, w, g, path)
    else:
        mi = torch.zeros_like(kl)
    return ObjectiveParts(ell - kl + mi, ell, kl, mi)


def fit(
    q: MeanField,
    pspec: PermutationSpec,
    batch_log_likelihood: Callable[[Params, Tensor], Tensor],
    *,
    n_data: int,
    batch_size: int,
    epochs: int,
    lr: float,
    k: int,
    n_samples: int,
    prior_sd: float,
    generator: torch.Generator,
    perm_generator: torch.Generator | None = None,
    order_generator: torch.Generator | None = None,
    progress: bool = False,
    desc: str = "SGM",
) -> FitResult:
    """Maximise :func:`objective` by minibatch Adam (``K = 1``: MFVI; ``K > 1``: SGM).

    Each model of the batch gets its own shuffle every epoch; Adam acts element-wise, so a
    batch of models trains exactly as separate runs would. The loss is ``-L^G_K / N``.

    Args:
        q: initial state (not modified), batch shape ``B``.
        pspec: the group's action on the variational tensors.
        batch_log_likelihood: ``(w (*B, S, *event), idx (*B, M)) -> (*B, S)``: the
            log-likelihood summed over the data points ``idx`` of each model.
        n_data, batch_size, epochs, lr: data size ``N``, minibatch ``M``, Adam settings.
        k, n_samples, prior_sd: see :func:`objective`.
        generator: weight noise. ``perm_generator`` / ``order_generator``: permutations and
            shuffles (default ``generator``).
    """
    nb = _batch_ndim(q, pspec)
    batch = tuple(q.mean[next(iter(q.mean))].shape[:nb])
    mean = {key: v.detach().clone().requires_grad_(True) for key, v in q.mean.items()}
    log_sd = {key: v.detach().clone().requires_grad_(True) for key, v in q.log_sd.items()}
    state = MeanField(mean, log_sd)
    optimiser = torch.optim.Adam(list(mean.values()) + list(log_sd.values()), lr=lr)
    order_generator = order_generator or generator
    device = q.mean[next(iter(q.mean))].device
    names = ("objective", "expected_log_likelihood", "kl", "mutual_information")
    history: dict[str, list] = {n: [] for n in names}
    for _ in tqdm(range(epochs), desc=desc, disable=not progress, mininterval=2.0):
        order = torch.rand(batch + (n_data,), generator=order_generator).argsort(-1).to(device)
        sums = {n: 0.0 for n in names}
        n_steps = 0
        for lo in range(0, n_data, batch_size):
            idx = order[..., lo: lo + batch_size]
            parts = objective(
                state, pspec, lambda w, idx=idx: batch_log_likelihood(w, idx), k=k,
                n_samples=n_samples, prior_sd=prior_sd, generator=generator,
                perm_generator=perm_generator, scale=n_data / idx.shape[-1])
            loss = -parts.objective.sum() / n_data
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            for n, v in zip(names, parts):
                sums[n] = sums[n] + v.detach()
            n_steps += 1
        for n in names:
            value = sums[n] / n_steps
            history[n].append((value / n_data if n == "objective" else value).cpu().numpy())
    hist = {n: np.moveaxis(np.asarray(v), 0, -1) for n, v in history.items()}
    final = MeanField({key: v.detach() for key, v in mean.items()},
                      {key: v.detach() for key, v in log_sd.items()})
    return FitResult(final, hist)


@torch.no_grad()
def predictive_probs(q: MeanField, spec: MLPSpec, x: Tensor, n_samples: int,
                     generator: torch.Generator, *, chunk: int = 250) -> Tensor:
    """Class probabilities ``(1/S) sum_s softmax(f(x; w_s))``, ``w_s ~ q``, shape ``(*B, n, C)``.

    Outputs are drawn with the local reparameterisation trick
    (:func:`symlib.inference.mfvi.sample_outputs`), which samples the exact marginal of
    ``f(x; w)`` under ``q`` at each input; the predictive probabilities depend on nothing else.
    """
    model = BayesMLP(spec)
    parts = []
    for lo in range(0, x.shape[0], chunk):
        logits = sample_outputs(q, model, x[lo: lo + chunk], n_samples, generator)
        parts.append(torch.softmax(logits, -1).mean(-3))
    return torch.cat(parts, -2)


# --------------------------------------------------------------------------- internals


def _batch_ndim(q: MeanField, pspec: PermutationSpec) -> int:
    key = next(iter(q.mean))
    if key not in pspec.param_ndims:
        raise ValueError(f"pspec.param_ndims has no event rank for {key!r}")
    return q.mean[key].ndim - pspec.param_ndims[key]


def _insert(t: Tensor, nb: int, m: int) -> Tensor:
    """``t`` with a new axis of size ``m`` after its ``nb`` batch axes (a view)."""
    t = t.unsqueeze(nb)
    return t.expand(t.shape[:nb] + (m,) + t.shape[nb + 1:])


def _logsumexp_over_group(q: MeanField, pspec: PermutationSpec, w: Params,
                          elements: GroupElement | None, chunk: int) -> Tensor:
    """``logsumexp_{g in elements} d_g(w)``, ``(*B, S)``, in chunks of group elements."""
    elements = elements if elements is not None else enumerate_group(pspec)
    n = next(iter(elements.perms.values())).shape[-2]
    parts = []
    for lo in range(0, n, chunk):
        sub = GroupElement({k: v[..., lo: lo + chunk, :] for k, v in elements.perms.items()})
        parts.append(torch.logsumexp(log_density_ratios(q, pspec, w, sub), -1))
    return torch.logsumexp(torch.stack(parts, -1), -1)


def _ratios_elementwise(q, pspec, w, g, keys, nb) -> Tensor:
    """``(1/2) sum (z^2 - z_g^2)`` over ``keys``, materialising every permuted component."""
    sub = restrict_permutation_spec(pspec, keys)
    qg = permute_mean_field(MeanField({k: q.mean[k] for k in keys}, {k: q.log_sd[k] for k in keys}),
                            sub, GroupElement({k: v for k, v in g.perms.items() if k in sub.perm_sizes}))
    total = 0.0
    for key in keys:
        wk = w[key].unsqueeze(nb + 1)                                          # (*B, S, 1, *ev)
        inv = torch.exp(-q.log_sd[key]).unsqueeze(nb).unsqueeze(nb)
        z = (wk - q.mean[key].unsqueeze(nb).unsqueeze(nb)) * inv
        zg = (wk - qg.mean[key].unsqueeze(nb)) * torch.exp(-qg.log_sd[key]).unsqueeze(nb)
        total = total + (0.5 * (z.square() - zg.square())).flatten(start_dim=nb + 2).sum(-1)
    return total


def _unit_rows(q, w, entries, nb) -> list[tuple[Tensor, Tensor, Tensor]]:
    """Per tensor of ``entries`` (``(key, axis)`` pairs of one perm), its unit rows:
    ``w (*B, S, N, R)``, ``mu (*B, N, R)`` and ``log sigma (*B, N, R)``, the unit axis moved
    first and the tensor's other axes flattened into ``R``."""
    def rows(t, unit_axis, lead):
        t = t.movedim(unit_axis, lead)
        return t.reshape(t.shape[: lead + 1] + (-1,))

    return [(rows(w[k], nb + 1 + a, nb + 1), rows(q.mean[k], nb + a, nb), rows(q.log_sd[k], nb + a, nb))
            for k, a in entries]


def _ratios_by_unit_pairs(rows, perm, nb) -> Tensor:
    """``(1/2) sum_i (C[i, i] - C[i, pi(i)])`` from the dense ``C`` (see :func:`log_density_ratios`).

    ``C = x y^T`` with ``x = [w^2, w]`` and ``y = [A, -2 mu A]`` (``A = sigma^-2``) in float64,
    all tensors of the perm joined along ``R``: ``C`` up to ``sum_r mu[k, r]^2 A[k, r]``, which
    every permutation sums to the same total and so cancels from the ratios.
    """
    w, mu, log_sd = (torch.cat(t, -1).double() for t in zip(*rows))
    a = torch.exp(-2.0 * log_sd)
    x, y = torch.cat([w * w, w], -1), torch.cat([a, -2.0 * a * mu], -1)
    cmat = x @ y.unsqueeze(nb).transpose(-1, -2)                                 # (*B, S, n, n)
    n, m = cmat.shape[-1], perm.shape[-2]
    diag = torch.diagonal(cmat, dim1=-2, dim2=-1).sum(-1, keepdim=True)          # (*B, S, 1)
    # C[i, pi_j(i)] read from the flattened C (a gather of m n entries, whose backward scatters
    # into one n x n matrix per sample, not into m of them)
    flat = torch.arange(n, device=perm.device) * n + perm                      # (*E, m, n)
    flat = flat.reshape(flat.shape[:-2] + (1, m * n))
    while flat.ndim < cmat.ndim - 1:
        flat = flat.unsqueeze(0)
    permuted = torch.take_along_dim(cmat.flatten(-2), flat, dim=-1)
    permuted = permuted.unflatten(-1, (m, n)).sum(-1)
    return (0.5 * (diag - permuted)).to(rows[0][0].dtype)


def _ratios_by_sampled_pairs(rows, perm, nb) -> Tensor:
    """As :func:`_ratios_by_unit_pairs`, forming only the entries of ``C`` the perms use."""
    if len(rows) > 2:
        # every tensor costs a few dozen small kernels: join all but the widest (cheap copies)
        rows = sorted(rows, key=lambda t: t[0].shape[-1])
        rows = [tuple(torch.cat(t, -1) for t in zip(*rows[:-1])), rows[-1]]
    w = rows[0][0]
    batch, (s, n), m = w.shape[:nb], w.shape[nb: nb + 2], perm.shape[-2]
    b = math.prod(batch)
    flat = [t.reshape((b, s, n, -1) if i == 0 else (b, n, -1))
            for triple in rows for i, t in enumerate(triple)]
    d = _SampledPairs.apply(perm.expand(batch + (m, n)).reshape(b, m, n), *flat)
    return d.reshape(batch + (s, m))


class _SampledPairs(torch.autograd.Function):
    """``d[b, s, j] = (1/2) sum_i (C[i, i] - C[i, pi_bj(i)])`` for model ``b``, sample ``s``.

    ``C[i, k] = sum_r A[k, r] (w[i, r] - mu[k, r])^2`` (``A = sigma^-2``, summed over the
    perm's tensors, given as ``(w, mu, log sigma)`` unit rows) is needed only at the ``N m``
    unit pairs ``(i, pi_j(i))``: the forward evaluates them with sampled matmuls, never forming
    ``C`` or a permuted copy of the weights. ``C[i, i]`` is summed entry by entry, and fixed
    points ``pi_j(i) = i`` read it, so they cancel exactly. Off the diagonal the sampled matmuls
    expand ``C = w'^2 A^T - 2 w' (mu' A)^T + sum mu'^2 A`` around ``c``, the mean of ``mu``
    over the units (``w' = w - c``, ``mu' = mu - c``): the rounding error is then relative to
    ``|w_i - c|^2 + |mu_k - c|^2`` rather than ``|w_i|^2 + |mu_k|^2``, small against ``C[i, k]``
    unless units ``i`` and ``k`` nearly coincide far from the others (and then the other units
    the perm moves make ``d`` so negative that it does not count). Working dtype throughout.

    The backward is written out because autograd would form dense matrices: with
    ``gamma_j = dL/dt_j`` on ``t_j = sum_i C[i, pi_j(i)]`` and ``k = pi_j(i)``,

        dL/dw[i] = 2 sum_j gamma_j A[k] (w[i] - mu[k]),
        dL/dmu[k] = -2 A[k] sum_j gamma_j (w[i] - mu[k]),
        dL/dA[k] = sum_j gamma_j (w[i] - mu[k])^2,

    the diagonal's term from ``w - mu`` directly, the permuted terms expanded (centred as
    above) into weighted sums of the rows of ``A``, ``mu' A``, ``w'^2`` and ``w'``
    (``embedding_bag``).
    """

    @staticmethod
    def forward(ctx, perms, *rows):
        b, _, n = perms.shape
        s = rows[0].shape[1]
        dev = perms.device
        cols = (torch.arange(b, device=dev) * n).view(b, 1, 1) + perms                # (b, m, n)
        unit_rows = torch.arange(b * s * n, device=dev).view(b, s, 1, n)
        # unique pairs, sorted by (row, col): the CSR order; slot maps (b, s, j, i) to its pair
        pairs, slot = torch.unique(unit_rows * (b * n) + cols.unsqueeze(1), return_inverse=True)
        row, col = pairs.div(b * n, rounding_mode="floor"), pairs.remainder(b * n)
        crow = torch.zeros(b * s * n + 1, dtype=torch.long, device=dev)
        crow[1:] = torch.bincount(row, minlength=b * s * n).cumsum(0)
        vals, diag, saved = 0.0, 0.0, []
        for w, mu, log_sd in zip(rows[0::3], rows[1::3], rows[2::3]):
            # few full-size temporaries: each new one costs page faults as well as a pass
            r = w.shape[-1]
            a = log_sd.mul(-2.0).exp_()
            delta = w - mu.unsqueeze(1)
            diag = diag + _row_dot(a.unsqueeze(1) * delta, delta)                      # (b, s, n)
            centre = mu.mean(1, keepdim=True)
            wc, muc = w - centre.unsqueeze(1), mu - centre
            bc = a * muc
            wc2 = wc * wc
            const = _row_dot(bc, muc).reshape(b * n)
            with warnings.catch_warnings():  # "sparse CSR support is in beta": two kernels used
                warnings.simplefilter("ignore", UserWarning)
                acc = torch.sparse_csr_tensor(crow, col, vals + const[col], (b * s * n, b * n))
                acc = torch.sparse.sampled_addmm(acc, wc2.reshape(-1, r), a.reshape(-1, r).T)
                acc = torch.sparse.sampled_addmm(acc, wc.reshape(-1, r), bc.reshape(-1, r).T, alpha=-2.0)
            vals = acc.values()
            saved += [a, delta, wc, muc, bc, wc2]
        diag = diag.reshape(-1)
        vals = torch.where(row.remainder(n) == col.remainder(n), diag[row], vals)
        ctx.save_for_backward(perms, *saved)
        return 0.5 * (diag.view(b, s, 1, n) - vals[slot]).sum(-1)                  # (b, s, m)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        perms, *saved = ctx.saved_tensors
        b, m, n = perms.shape
        s = saved[1].shape[1]
        dev = perms.device
        gamma = -0.5 * grad                                              # on t_j: (b, s, m)
        gamma0 = (0.5 * grad.sum(-1)).view(b, s, 1, 1)                   # on sum_i C[i, i]
        total = gamma.sum((1, 2)).view(b, 1, 1)
        # rows (b, s, i) take the bag {(b, pi_j(i))}_j; rows (b, k) take {(b, s, pi_j^-1(k))}_{s, j}
        fwd_idx = ((torch.arange(b, device=dev) * n).view(b, 1, 1) + perms).transpose(1, 2)
        fwd_idx = fwd_idx.unsqueeze(1).expand(b, s, n, m)
        fwd_wts = 2.0 * gamma.unsqueeze(2).expand(b, s, n, m)
        inverse = torch.empty_like(perms).scatter_(-1, perms, torch.arange(n, device=dev).expand(b, m, n))
        inv_idx = (torch.arange(b * s, device=dev) * n).view(b, s, 1, 1) + inverse.unsqueeze(1)
        inv_idx = inv_idx.permute(0, 3, 1, 2).reshape(b, n, s * m)
        inv_wts = -2.0 * gamma.unsqueeze(1).expand(b, n, s, m).reshape(b, n, s * m)
        grads = [None]
        for i in range(0, len(saved), 6):
            a, delta, wc, muc, bc, wc2 = saved[i: i + 6]
            h = (a.unsqueeze(1) * delta).mul_(2.0 * gamma0)                # 2 gamma_0 A delta
            # dL/dw[i] = 2 gamma_0 A delta + w' sum_j 2 gamma_j A[k] - sum_j 2 gamma_j (mu' A)[k]
            grad_w = wc * _bag_sums(a, fwd_idx, fwd_wts)
            grad_w.sub_(_bag_sums(bc, fwd_idx, fwd_wts)).add_(h)
            # over (s, j) with k fixed, W1 = sum gamma w'[i], W2 = sum gamma w'[i]^2 (here times -2)
            # and u = W1 - total mu': sum gamma (w'[i] - mu'[k]) = u and
            # sum gamma (w'[i] - mu'[k])^2 = W2 - mu' (W1 + u)
            w1 = _bag_sums(wc, inv_idx, inv_wts)
            u = torch.addcmul(w1, 2.0 * total, muc)
            grad_mu = (a * u).sub_(_sum_samples(h))
            grad_log_sd = _bag_sums(wc2, inv_idx, inv_wts).sub_(muc * w1.add_(u)).mul_(a)
            grad_log_sd.sub_(_sum_samples(h.mul_(delta)))                      # dA/dlog sigma = -2 A
            grads += [grad_w, grad_mu, grad_log_sd]
        return tuple(grads)


def _row_dot(x: Tensor, y: Tensor) -> Tensor:
    """``(x * y).sum(-1)`` as a batched matmul, without a full-size temporary."""
    return (x.unsqueeze(-2) @ y.unsqueeze(-1)).squeeze(-1).squeeze(-1)


def _sum_samples(t: Tensor) -> Tensor:
    """``t.sum(1)`` without a copy when there is one sample."""
    return t.squeeze(1) if t.shape[1] == 1 else t.sum(1)


def _bag_sums(table: Tensor, idx: Tensor, weights: Tensor) -> Tensor:
    """``out[..., :] = sum_t weights[..., t] rows[idx[..., t]]`` (the last axis of ``idx``),
    ``rows`` being ``table`` flattened to its last axis; shape ``idx.shape[:-1] + (R,)``."""
    r = table.shape[-1]
    out = torch.nn.functional.embedding_bag(idx.reshape(-1, idx.shape[-1]), table.reshape(-1, r),
                                            mode="sum", per_sample_weights=weights.reshape(-1, idx.shape[-1]))
    return out.view(idx.shape[:-1] + (r,))

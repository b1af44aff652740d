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
density ratios are computed (same values, different cost).
"""

from __future__ import annotations

import enum
import itertools
import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor
from tqdm import tqdm

from symlib.inference.mfvi import BayesMLP, MeanField, sample_outputs
from symlib.nn.mlp import MLPSpec, Params
from symlib.symmetry import GroupElement, PermutationSpec, apply_group_element

__all__ = [
    "FitResult",
    "MeanField",
    "ObjectiveParts",
    "RatioPath",
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

_HALF_LOG_2PI_E = 0.5 * (1.0 + math.log(2.0 * math.pi))
_LOG_2PI = math.log(2.0 * math.pi)


class RatioPath(str, enum.Enum):
    """How :func:`log_density_ratios` evaluates ``log q(g^-1 w) - log q(w)``."""

    AUTO = "auto"
    """Unit-pair matrices for every tensor one perm touches, direct for the rest."""
    UNIT_PAIRS = "unit_pairs"
    """Per-perm ``N_l x N_l`` matrices, then one gather per element: cost nearly flat in K.
    Needs every touched tensor to be touched by a single perm."""
    DIRECT = "direct"
    """Materialise every permuted component ``(g mu, g sigma)``: cost linear in K, as the
    formula reads."""


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
    every ``log sigma`` term, cancel exactly). When each touched tensor is touched by one perm
    only (one hidden layer, or any net's first and last layers), the sum is computed through
    per-perm *unit-pair* matrices,

        C[i, j] = sum_r (w[i, r] - mu[j, r])^2 / sigma[j, r]^2   (r: the tensor's other axes),

    so ``sum z_g^2 = sum_i C[i, pi(i)]`` (new unit ``i`` is old unit ``pi(i)``). ``C`` is a
    matmul whose cost does not depend on ``m``; each element then costs a gather of ``N_l``
    entries. ``C`` is expanded as ``w^2 A^T - 2 w (mu A)^T + sum mu^2 A`` with ``A = sigma^-2``,
    in float64 so that the cancellation stays exact to rounding when ``sigma << |mu|``. Tensors
    touched by two perms (the middle layers of deeper nets) use the direct, elementwise path.
    """
    nb = _batch_ndim(q, pspec)
    owners: dict[str, list[tuple[str, int]]] = {}
    for name, axes in pspec.perm_to_axes.items():
        for key, axis in axes:
            owners.setdefault(key, []).append((name, axis))
    path = RatioPath(path)
    single = {k: v[0] for k, v in owners.items() if len(v) == 1}
    multi = [k for k, v in owners.items() if len(v) > 1]
    if path is RatioPath.DIRECT:
        single, multi = {}, list(owners)
    elif path is RatioPath.UNIT_PAIRS and multi:
        raise ValueError(f"tensors {multi} are touched by several perms; use path='auto' or 'direct'")
    total = 0.0
    if single:
        total = total + _ratios_by_unit_pairs(q, pspec, w, g, single, nb)
    if multi:
        total = total + _ratios_elementwise(q, pspec, w, g, multi, nb)
    return total


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


def _ratios_by_unit_pairs(q, pspec, w, g, owner: dict[str, tuple[str, int]], nb) -> Tensor:
    """``(1/2) sum_perm sum_i (C[i, i] - C[i, pi(i)])`` (see :func:`log_density_ratios`)."""
    pair: dict[str, Tensor] = {}
    for key, (name, axis) in owner.items():
        mu = q.mean[key].double().movedim(nb + axis, nb)
        a = torch.exp(-2.0 * q.log_sd[key].double()).movedim(nb + axis, nb)
        wk = w[key].double().movedim(nb + 1 + axis, nb + 1)
        n = mu.shape[nb]
        mu, a = mu.reshape(mu.shape[:nb] + (n, -1)), a.reshape(a.shape[:nb] + (n, -1))
        wk = wk.reshape(wk.shape[: nb + 1] + (n, -1))                           # (*B, S, n, r)
        b = mu * a
        c = (mu * b).sum(-1)                                                     # (*B, n)
        cmat = (wk.square() @ a.unsqueeze(nb).transpose(-1, -2)
                - 2.0 * wk @ b.unsqueeze(nb).transpose(-1, -2) + c.unsqueeze(nb).unsqueeze(-2))
        pair[name] = pair[name] + cmat if name in pair else cmat                 # (*B, S, n, n)
    total = 0.0
    for name, cmat in pair.items():
        perm = g.perms[name].to(cmat.device)                                     # (*E, m, n)
        diag = torch.diagonal(cmat, dim1=-2, dim2=-1).sum(-1, keepdim=True)      # (*B, S, 1)
        # idx[..., s, j, i, 0] = pi_j(i); cmat[..., s, None, i, :] gathered along the last axis
        idx = perm.unsqueeze(-1)
        idx = idx.reshape(idx.shape[:-3] + (1,) + idx.shape[-3:])                 # (*E', 1, m, n, 1)
        while idx.ndim < cmat.ndim + 1:
            idx = idx.unsqueeze(0)
        permuted = torch.take_along_dim(cmat.unsqueeze(-3), idx, dim=-1).squeeze(-1).sum(-1)
        total = total + 0.5 * (diag - permuted)
    return total.to(q.mean[next(iter(q.mean))].dtype)

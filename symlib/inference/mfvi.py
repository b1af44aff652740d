"""Mean-field Gaussian variational inference for MLPs, with the local reparameterisation trick.

The approximate posterior is a diagonal Gaussian over every weight and bias (Blundell et al.,
2015, "Bayes by Backprop"),

    q(w) = prod_i N(w_i; mu_i, sigma_i^2),    sigma_i = exp(rho_i),

held in a :class:`MeanField` state (two parameter dicts with the keys of
:meth:`symlib.nn.mlp.MLPSpec.shapes`). The prior is the isotropic ``N(0, 1)`` of Kurle et al.
(2021, Sec. 4). Inference maximises the evidence lower bound with an annealed KL weight
``beta_t`` (linear from 0 to 1 over the first ``anneal_fraction`` of the steps, Kurle et al.):

    ELBO_beta(q) = E_q[log p(D | w)] - beta_t * KL[q || p].

**Local reparameterisation** (Kingma, Salimans & Welling, 2015). Given the layer input ``a``
(one row per data point and MC sample), the pre-activation ``z = W a + b`` under ``q`` is
Gaussian with independent units,

    E[z_j] = sum_i mu_W[j, i] a_i + mu_b[j],   Var[z_j] = sum_i sigma_W[j, i]^2 a_i^2 + sigma_b[j]^2,

so ``z`` is sampled directly, with fresh noise per data point. Drawn layer after layer, this
reproduces the exact marginal distribution of the network output at each input, with much lower
gradient variance than sampling the weights.

**Orthogonal skips** (:mod:`symlib.nn.orthoskip`): a fixed ``O_l`` adds ``O_l h_{l-1}`` to the mean;
it is not random, so the variance is unchanged.

**Ordered biases** (Kurle et al., Sec. 3; :mod:`symlib.transforms`): when
``BayesMLP.ordered_biases`` is set, the biases of every *hidden* layer are
``b = ordered(u)`` (``b_1 = u_1``, ``b_k = b_{k-1} + exp(u_k)``) and the mean-field Gaussian is
over ``u`` (stored under the key ``b{l}``). ``b`` is then not Gaussian, so it is sampled per MC
sample (shared by all data points, as it should be) while the weights keep the local trick.
The prior on ``u`` is the pull-back of the book's ``N(0, I)`` bias prior restricted to the
ordered cone, ``p(b) = K! prod_k N(b_k; 0, 1) 1[b_1 < ... < b_K]``, through the transform:

    log p(u) = log K! + sum_k log N(b_k(u); 0, 1) + sum_{k>=2} u_k.

It is the same prior as the unconstrained model's, folded onto one of the ``K!`` permutation
chambers, so the constrained and plain models differ only in the symmetry. Its KL has a closed
form because ``b_k = u_1 + sum_{j=2}^k exp(u_j)`` is a sum of a Gaussian and independent
log-normals, whose first two moments are known (:func:`ordered_normal_kl`).

**Batches of models.** Every tensor of the state may carry leading batch axes ``B`` (the same
for all keys): then ``B`` independent models are trained at once, e.g. the four variants of
chapter 1. Skip matrices may be shared (2-D) or batched (zeros mean "no skip"), and
``ordered_biases`` may be a bool tensor of shape ``B``. Adam acts element-wise, so batched
training equals separate training.

**Likelihood.** Gaussian, ``y ~ N(f(x; w), sigma_n^2)``; ``sigma_n`` is either fixed or learned
as a point estimate by maximising the ELBO (:func:`fit`). The predictive variance splits into
the epistemic part (variance of ``f(x; w)`` under ``q``) and the aleatoric ``sigma_n^2``.

Public functions: :func:`mean_field_from_params`, :func:`init_mean_field`, :func:`sample_outputs`,
:func:`sample_weights`, :func:`sample_functions`, :func:`kl_divergence`, :func:`kl_terms`, :func:`gaussian_kl`,
:func:`ordered_normal_kl`, :func:`gaussian_log_likelihood`, :func:`elbo`, :func:`kl_weight`,
:func:`predict`, :func:`predictive_log_likelihood`, :func:`fit`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor
from torch.autograd.function import once_differentiable
from tqdm import tqdm

from symlib.nn.mlp import Activation, MLPSpec, Params, activation_fn, init_mlp
from symlib.nn.orthoskip import orthoskip_forward
from symlib.symmetry import GroupElement, apply_group_element
from symlib.transforms import ordered_from_unconstrained, unconstrained_from_ordered

__all__ = [
    "BayesMLP",
    "ELBOParts",
    "FitResult",
    "MeanField",
    "Predictive",
    "elbo",
    "fit",
    "gaussian_kl",
    "gaussian_log_likelihood",
    "init_mean_field",
    "kl_divergence",
    "kl_terms",
    "kl_weight",
    "mean_field_from_params",
    "ordered_normal_kl",
    "predict",
    "predictive_log_likelihood",
    "sample_functions",
    "sample_outputs",
    "sample_weights",
]

_LOG_2PI = math.log(2.0 * math.pi)


class MeanField(NamedTuple):
    """State of a mean-field Gaussian: ``q(w_i) = N(mean_i, exp(log_sd_i)^2)`` per entry.

    For hidden-layer biases of a model with ordered biases, ``mean["b{l}"]`` and
    ``log_sd["b{l}"]`` describe the unconstrained ``u`` (first bias, then log-gaps).
    """

    mean: dict[str, Tensor]
    log_sd: dict[str, Tensor]


@dataclass(frozen=True, eq=False)
class BayesMLP:
    """The likelihood side of a Bayesian MLP: architecture, fixed skips, bias constraint.

    Attributes:
        spec: the pre-activation MLP.
        skips: fixed matrices ``{"O{l}": (..., N_l, N_{l-1})}`` (:func:`symlib.nn.orthoskip.skip_matrices`);
            layers without a key have no skip. Never trained.
        ordered_biases: order the biases of every hidden layer (``False``/``True``, or a bool
            tensor of the state's batch shape to choose per model).
    """

    spec: MLPSpec
    skips: Mapping[str, Tensor] = field(default_factory=dict)
    ordered_biases: bool | Tensor = False


class ELBOParts(NamedTuple):
    """ELBO estimate and its parts, each of the state's batch shape."""

    elbo: Tensor
    """``expected_log_likelihood - kl_weight * kl``."""
    expected_log_likelihood: Tensor
    """Monte Carlo estimate of ``E_q[log p(D | w)]`` (summed over data points)."""
    kl: Tensor
    """Closed-form ``KL[q || p]``."""


class Predictive(NamedTuple):
    """Predictive moments at ``n`` inputs, each ``(*B, n, out)``, and the output samples."""

    mean: Tensor
    epistemic_var: Tensor
    """Variance of ``f(x; w)`` over ``w ~ q``: uncertainty about the weights."""
    aleatoric_var: Tensor
    """``sigma_n^2``: the noise model's variance."""
    samples: Tensor
    """``f(x; w_s)``, ``(*B, S, n, out)``."""

    @property
    def total_var(self) -> Tensor:
        return self.epistemic_var + self.aleatoric_var


class FitResult(NamedTuple):
    """Output of :func:`fit`."""

    q: MeanField
    """Final variational parameters (detached)."""
    log_noise_sd: Tensor
    """Final ``log sigma_n`` (learned or fixed), of the batch shape."""
    history: dict[str, np.ndarray]
    """``step`` (T,), and per model ``(*B, T)``: ``elbo`` (at weight 1), ``objective`` (at the
    annealed weight), ``expected_log_likelihood``, ``kl``, ``noise_sd``, ``kl_weight`` (T,)."""


# --------------------------------------------------------------------------- construction


def mean_field_from_params(
    model: BayesMLP, params: Params, *, init_sd: float = 1e-2
) -> MeanField:
    """A mean-field state centred at ``params`` with every standard deviation ``init_sd``.

    For models with ordered biases the hidden units of each layer are first sorted by their
    bias (a permutation of ``params``: the same network function when there are no skips) and
    the biases mapped to the unconstrained ``u``. With a per-model mask, only the masked models
    are sorted. Biases must be distinct within a layer (true for random initialisations).

    Args:
        model: the model (its ``ordered_biases`` decides the transform).
        params: point values with the keys of ``model.spec.shapes()``, optionally batched.
        init_sd: initial posterior standard deviation of every entry (of ``u`` for ordered biases).
    """
    spec = model.spec
    mean = {k: v.detach().clone() for k, v in params.items()}
    mask = _ordered_mask(model)
    if mask is not None:
        nb = _batch_ndim(mean, spec)
        perms = {f"P{l}": torch.argsort(mean[f"b{l}"], dim=-1) for l in _hidden_layers(spec)}
        ordered = apply_group_element(mean, spec, GroupElement(perms))
        for l in _hidden_layers(spec):
            ordered[f"b{l}"] = unconstrained_from_ordered(ordered[f"b{l}"])
        if mask is True:
            mean = ordered
        else:
            mean = {k: torch.where(_expand_mask(mask, mean[k].ndim - nb), ordered[k], mean[k]) for k in mean}
    log_sd = {k: torch.full_like(v, math.log(init_sd)) for k, v in mean.items()}
    return MeanField(mean, log_sd)


def init_mean_field(
    model: BayesMLP, generator: torch.Generator, *, init_sd: float = 1e-2, dtype=torch.float32
) -> MeanField:
    """Means from :func:`symlib.nn.mlp.init_mlp` (``W ~ N(0, 1/fan_in)``), sds ``init_sd``."""
    return mean_field_from_params(model, init_mlp(model.spec, generator, dtype), init_sd=init_sd)


# --------------------------------------------------------------------------- sampling


def sample_outputs(
    q: MeanField, model: BayesMLP, x: Tensor, n_samples: int, generator: torch.Generator
) -> Tensor:
    """Network outputs ``f(x; w)``, ``w ~ q``, by the local reparameterisation trick.

    Args:
        q: the state, batch shape ``B``.
        model: architecture, skips and bias constraint.
        x: inputs ``(n, N_0)``, shared by all models of the batch.
        n_samples: Monte Carlo samples ``S``.
        generator: source of all noise (on ``x``'s device).

    Returns:
        ``(*B, S, n, N_{L+1})``. Samples at different inputs are not jointly those of one
        weight draw (the noise is per data point); each input's marginal is exact.
    """
    spec = model.spec
    batch = _batch_shape(q.mean, spec)
    n_models = math.prod(batch)
    mask = _ordered_mask(model)
    if isinstance(mask, Tensor):
        mask = mask.expand(batch).reshape(n_models, 1, 1)
    hidden = set(_hidden_layers(spec))
    n, n_in = x.shape[-2], x.shape[-1]
    # Internally every tensor is 3-D, (models, rows, units) with rows = samples x points, so
    # each layer is one batched matmul per model (baddbmm fuses the bias and skip additions).
    x_rows = x.expand(n_models, n, n_in)
    h = x_rows
    for l in range(1, spec.n_layers + 1):
        width, fan_in = spec.widths[l], spec.widths[l - 1]
        w_mean = q.mean[f"W{l}"].reshape(n_models, width, fan_in).transpose(1, 2)
        w_var = torch.exp(2.0 * q.log_sd[f"W{l}"]).reshape(n_models, width, fan_in).transpose(1, 2)
        b_mean = q.mean[f"b{l}"].reshape(n_models, 1, width)
        b_log_sd = q.log_sd[f"b{l}"].reshape(n_models, 1, width)
        b_var = torch.exp(2.0 * b_log_sd)
        b_sample = None
        if mask is not None and l in hidden:
            # ordered biases: b = ordered(u), u ~ q, one draw per sample shared by all points
            eps_b = torch.randn((n_models, n_samples, width), generator=generator,
                                device=x.device, dtype=x.dtype)
            b_sample = ordered_from_unconstrained(b_mean + torch.exp(b_log_sd) * eps_b)
            if mask is True:
                b_mean, b_var = torch.zeros_like(b_mean), torch.zeros_like(b_var)
            else:
                b_sample = torch.where(mask, b_sample, torch.zeros_like(b_sample))
                b_mean = torch.where(mask, torch.zeros_like(b_mean), b_mean)
                b_var = torch.where(mask, torch.zeros_like(b_var), b_var)
        eps = torch.randn((n_models, n_samples, n, width), generator=generator,
                          device=x.device, dtype=x.dtype)
        skip = model.skips.get(f"O{l}")
        if skip is not None:
            skip = skip.expand(*batch, width, fan_in).reshape(n_models, width, fan_in)
        if l > 1:
            h = _LocalReparameterisation.apply(h, w_mean, w_var, b_mean, b_var, b_sample, skip, eps,
                                               Activation(spec.activation))
            continue
        # layer 1 sees the same x in every sample: moments (models, n, units), then broadcast
        # over samples. The clamp keeps sqrt's gradient finite where var = 0 (x = 0 with
        # ordered biases, which have no variance term here).
        mu = torch.baddbmm(b_mean, h, w_mean)
        var = torch.baddbmm(b_var, h.square(), w_var)
        if skip is not None:
            mu = torch.baddbmm(mu, h, skip.transpose(1, 2))
        std = var.clamp_min(torch.finfo(var.dtype).tiny).sqrt().unsqueeze(1)
        mu = mu.unsqueeze(1)
        if b_sample is not None:
            mu = mu + b_sample.unsqueeze(2)
        h = torch.addcmul(mu, std, eps).reshape(n_models, n_samples * n, width)
    return h.reshape(*batch, n_samples, n, spec.widths[-1])


class _LocalReparameterisation(torch.autograd.Function):
    """One layer ``l >= 2`` of :func:`sample_outputs`: ``h_l = mu + sqrt(var) * eps`` with

        mu = a W_mu^T + b_mu (+ b_sample) (+ h_{l-1} O^T),   var = a^2 W_var^T + b_var,

    ``a = f(h_{l-1})`` and all tensors 3-D, (models, samples x points, units). The arithmetic
    autograd would do, with the backward spelled out,

        dL/dvar = dL/dh_l eps / (2 sqrt(var)),   dL/da = dL/dh_l W_mu + 2 a (dL/dvar W_var),
        dL/dh_{l-1} = f'(h_{l-1}) dL/da + dL/dh_l O,

    and the weights' gradients ``a^T dL/dh_l`` and ``(a^2)^T dL/dvar``, so that a step allocates
    a few full-size tensors per layer instead of a dozen (at chapter 1's paper size each 4 MB
    allocation costs about as much as the arithmetic on it). Every rounding is autograd's,
    except that the two terms of ``dL/da`` and of ``dL/dh_{l-1}`` are summed inside the second
    matmul (``beta = 1``) rather than after it: at chapter 1's quick and paper sizes, and for
    chapter 5's classifier, that gives the same bits on the project's CPU; at tiny sizes it can
    differ in the last bit.
    """

    @staticmethod
    def forward(ctx, h, w_mean, w_var, b_mean, b_var, b_sample, skip, eps, activation):
        n_models, n_samples, n, width = eps.shape
        a = activation_fn(activation)(h)
        a_sq = a.square()
        mu = torch.baddbmm(b_mean, a, w_mean)
        std = torch.baddbmm(b_var, a_sq, w_var).sqrt_()
        if skip is not None:
            mu.baddbmm_(h, skip.transpose(1, 2))
        out = mu.view(n_models, n_samples, n, width)
        if b_sample is not None:
            out.add_(b_sample.unsqueeze(2))
        out.addcmul_(std.view_as(out), eps)
        ctx.activation = activation
        ctx.save_for_backward(h, a, a_sq, w_mean, w_var, skip, std, eps)
        return mu

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        h, a, a_sq, w_mean, w_var, skip, std, eps = ctx.saved_tensors
        need = ctx.needs_input_grad
        grad = grad.contiguous()
        grad4 = grad.view(eps.shape)
        # twice dL/dvar; the factors 1/2 and 2 below are exact, so the bits are autograd's
        grad_var2 = (grad4 * eps).div_(std.view_as(grad4)).view_as(grad)
        grad_h = grad_w_mean = grad_w_var = grad_b_mean = grad_b_var = grad_b_sample = None
        if need[0]:
            grad_a = torch.bmm(grad_var2, w_var.transpose(1, 2)).mul_(a)
            grad_a.baddbmm_(grad, w_mean.transpose(1, 2))
            grad_h = _activation_backward(ctx.activation, grad_a, h, a)
            if skip is not None:
                grad_h.baddbmm_(grad, skip)
        if need[1]:
            grad_w_mean = torch.bmm(a.transpose(1, 2), grad)
        if need[2]:
            grad_w_var = torch.bmm(a_sq.transpose(1, 2), grad_var2).mul_(0.5)
        if need[3]:
            grad_b_mean = grad.sum(1, keepdim=True)
        if need[4]:
            grad_b_var = grad_var2.sum(1, keepdim=True).mul_(0.5)
        if need[5]:
            grad_b_sample = grad4.sum(2)
        return grad_h, grad_w_mean, grad_w_var, grad_b_mean, grad_b_var, grad_b_sample, None, None, None


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _activation_backward(activation: Activation, grad: Tensor, h: Tensor, a: Tensor) -> Tensor:
    """``f'(h) * grad`` for ``a = f(h)``, by the kernels autograd itself uses for ``f`` (``grad``
    itself for the identity: the caller owns it)."""
    if activation is Activation.SELU:
        return torch.ops.aten.elu_backward(grad, _SELU_ALPHA, _SELU_SCALE, 1.0, False, h)
    if activation is Activation.RELU:
        return torch.ops.aten.threshold_backward(grad, a, 0)
    if activation is Activation.TANH:
        return torch.ops.aten.tanh_backward(grad, a)
    return grad


def sample_weights(
    q: MeanField, model: BayesMLP, n_samples: int, generator: torch.Generator
) -> Params:
    """Whole-network weight draws ``w ~ q`` as a params dict with axes ``(*B, S, ...)``.

    Ordered biases are returned in the constrained space (``b``, not ``u``), so the result can
    be fed to :func:`symlib.nn.orthoskip.orthoskip_forward` / :func:`symlib.nn.mlp.mlp_forward`.
    """
    spec = model.spec
    nb = _batch_ndim(q.mean, spec)
    mask = _ordered_mask(model)
    hidden_biases = {f"b{l}" for l in _hidden_layers(spec)}
    out = {}
    for key, mean in q.mean.items():
        mean = mean.unsqueeze(nb)
        shape = mean.shape[:nb] + (n_samples,) + mean.shape[nb + 1:]
        eps = torch.randn(shape, generator=generator, device=mean.device, dtype=mean.dtype)
        w = mean + torch.exp(q.log_sd[key]).unsqueeze(nb) * eps
        if mask is not None and key in hidden_biases:
            w_ordered = ordered_from_unconstrained(w)
            w = w_ordered if mask is True else torch.where(_expand_mask(mask, 2), w_ordered, w)
        out[key] = w
    return out


def sample_functions(
    q: MeanField, model: BayesMLP, x: Tensor, n_samples: int, generator: torch.Generator
) -> Tensor:
    """``f(x; w_s)`` for whole-network draws ``w_s ~ q`` (:func:`sample_weights`), ``(*B, S, n, out)``.

    Unlike :func:`sample_outputs`, each sample is one network evaluated at every input, so
    samples are coherent across inputs (memory: ``S`` copies of the weights).
    """
    weights = sample_weights(q, model, n_samples, generator)
    skips = {k: (v.unsqueeze(-3) if v.ndim > 2 else v) for k, v in model.skips.items()}
    return orthoskip_forward(weights, x, model.spec, skips)


# --------------------------------------------------------------------------- KL and ELBO


def gaussian_kl(mean: Tensor, log_sd: Tensor) -> Tensor:
    """Element-wise ``KL[N(mean, sd^2) || N(0, 1)] = (sd^2 + mean^2 - 1) / 2 - log sd``."""
    return 0.5 * (torch.exp(2.0 * log_sd) + mean.square() - 1.0) - log_sd


def ordered_normal_kl(mean: Tensor, log_sd: Tensor) -> Tensor:
    """``KL[q(u) || p(u)]`` for one ordered vector, summed over the last axis (length ``K``).

    ``q(u) = N(mean, diag(exp(2 log_sd)))`` on the unconstrained ``u``; ``p(u)`` is the
    pull-back of ``K! prod_k N(b_k; 0, 1)`` on the ordered cone (module docstring). With
    ``b_k = u_1 + sum_{j=2}^k e^{u_j}`` and independent log-normals ``e^{u_j}``,

        E[b_k] = m_1 + sum_{j=2}^k e^{m_j + s_j^2/2},
        Var[b_k] = s_1^2 + sum_{j=2}^k (e^{s_j^2} - 1) e^{2 m_j + s_j^2},

    so ``KL = -H[q] - log K! + K/2 log 2 pi + sum_k (Var[b_k] + E[b_k]^2)/2 - sum_{k>=2} m_k``.
    For ``K = 1`` this is :func:`gaussian_kl`.
    """
    k = mean.shape[-1]
    var = torch.exp(2.0 * log_sd)
    neg_entropy = -(log_sd + 0.5 * (1.0 + _LOG_2PI)).sum(-1)
    lognormal_mean = torch.exp(mean[..., 1:] + 0.5 * var[..., 1:])
    lognormal_var = torch.expm1(var[..., 1:]) * lognormal_mean.square()
    b_mean = torch.cat([mean[..., :1], mean[..., :1] + lognormal_mean.cumsum(-1)], dim=-1)
    b_var = torch.cat([var[..., :1], var[..., :1] + lognormal_var.cumsum(-1)], dim=-1)
    expected_log_prior = (
        math.lgamma(k + 1) - 0.5 * k * _LOG_2PI - 0.5 * (b_var + b_mean.square()).sum(-1)
        + mean[..., 1:].sum(-1)
    )
    return neg_entropy - expected_log_prior


def kl_terms(q: MeanField, model: BayesMLP) -> dict[str, Tensor]:
    """``KL[q || p]`` per parameter tensor (summed over its entries), each of batch shape ``B``."""
    spec = model.spec
    nb = _batch_ndim(q.mean, spec)
    mask = _ordered_mask(model)
    hidden_biases = {f"b{l}" for l in _hidden_layers(spec)}
    out = {}
    for key, mean in q.mean.items():
        log_sd = q.log_sd[key]
        kl = gaussian_kl(mean, log_sd).flatten(start_dim=nb).sum(-1)
        if mask is not None and key in hidden_biases:
            kl_ordered = ordered_normal_kl(mean, log_sd)
            kl = kl_ordered if mask is True else torch.where(mask, kl_ordered, kl)
        out[key] = kl
    return out


def kl_divergence(q: MeanField, model: BayesMLP) -> Tensor:
    """Closed-form ``KL[q || p]`` to the ``N(0, I)`` prior (ordered-cone prior for ordered biases)."""
    return sum(kl_terms(q, model).values())


def gaussian_log_likelihood(y: Tensor, f: Tensor, noise_sd: Tensor | float) -> Tensor:
    """``sum_n log N(y_n; f_n, sigma_n^2)`` over data points and outputs.

    Args:
        y: targets ``(n, out)``.
        f: outputs ``(*B, S, n, out)``.
        noise_sd: ``sigma_n``, a float, a 0-d tensor or a tensor of batch shape ``B``.

    Returns:
        ``(*B, S)``.
    """
    noise_sd = torch.as_tensor(noise_sd, dtype=f.dtype, device=f.device)
    sd = noise_sd.reshape(noise_sd.shape + (1, 1, 1))
    log_density = -0.5 * ((y - f) / sd).square() - torch.log(sd) - 0.5 * _LOG_2PI
    return log_density.sum(dim=(-1, -2))


def elbo(
    q: MeanField,
    model: BayesMLP,
    x: Tensor,
    y: Tensor,
    noise_sd: Tensor | float,
    n_samples: int,
    generator: torch.Generator,
    *,
    kl_weight: float = 1.0,
) -> ELBOParts:
    """Monte Carlo ELBO ``E_q[log p(y | x, w)] - kl_weight * KL[q || p]`` (local reparameterisation).

    Full batch: the expected log-likelihood is summed over all ``n`` points.
    """
    outputs = sample_outputs(q, model, x, n_samples, generator)
    expected = gaussian_log_likelihood(y, outputs, noise_sd).mean(-1)
    kl = kl_divergence(q, model)
    return ELBOParts(expected - kl_weight * kl, expected, kl)


def kl_weight(step: int, n_steps: int, anneal_fraction: float = 0.5) -> float:
    """Linear KL annealing: ``beta = min(1, step / (anneal_fraction * n_steps))``.

    ``step`` counts from 0, so ``beta`` rises from 0 and reaches 1 after the first
    ``anneal_fraction`` of the steps (Kurle et al.: the first half). ``anneal_fraction = 0``
    means no annealing.
    """
    warmup = anneal_fraction * n_steps
    return 1.0 if warmup <= 0 else min(1.0, step / warmup)


# --------------------------------------------------------------------------- prediction


@torch.no_grad()
def predict(
    q: MeanField,
    model: BayesMLP,
    x: Tensor,
    n_samples: int,
    generator: torch.Generator,
    noise_sd: Tensor | float,
    *,
    whole_functions: bool = False,
) -> Predictive:
    """Predictive mean and variance split at inputs ``x`` (``(n, N_0)``).

    ``Var[y | x] = Var_q[f(x; w)] + sigma_n^2``: epistemic (sample variance over ``S`` draws,
    ``1/S`` normalisation) plus aleatoric.

    Args:
        whole_functions: draw whole networks (:func:`sample_functions`), so each sample is one
            function of ``x`` (smooth curves for figures); default: the cheaper local trick
            (:func:`sample_outputs`). The per-input marginals are the same.
    """
    sampler = sample_functions if whole_functions else sample_outputs
    samples = sampler(q, model, x, n_samples, generator)
    mean = samples.mean(-3)
    epistemic = samples.var(-3, correction=0)
    noise_sd = torch.as_tensor(noise_sd, dtype=samples.dtype, device=samples.device)
    aleatoric = noise_sd.reshape(noise_sd.shape + (1, 1)).square().expand_as(mean)
    return Predictive(mean, epistemic, aleatoric, samples)


def predictive_log_likelihood(samples: Tensor, y: Tensor, noise_sd: Tensor | float) -> Tensor:
    """Mean over points of ``log (1/S) sum_s N(y_n; f_s(x_n), sigma_n^2)`` (outputs summed).

    Args:
        samples: ``(*B, S, n, out)`` from :func:`sample_outputs` / :attr:`Predictive.samples`.
        y: ``(n, out)``.
        noise_sd: as in :func:`gaussian_log_likelihood`.

    Returns:
        ``(*B,)``: the average test log-likelihood per point (nats).
    """
    noise_sd = torch.as_tensor(noise_sd, dtype=samples.dtype, device=samples.device)
    sd = noise_sd.reshape(noise_sd.shape + (1, 1, 1))
    log_density = (-0.5 * ((y - samples) / sd).square() - torch.log(sd) - 0.5 * _LOG_2PI).sum(-1)
    n_samples = samples.shape[-3]
    per_point = torch.logsumexp(log_density, dim=-2) - math.log(n_samples)
    return per_point.mean(-1)


# --------------------------------------------------------------------------- training


def fit(
    model: BayesMLP,
    q: MeanField,
    x: Tensor,
    y: Tensor,
    *,
    n_steps: int,
    n_samples: int,
    lr: float,
    generator: torch.Generator,
    noise_sd: float | Tensor = 0.2,
    learn_noise: bool = False,
    anneal_fraction: float = 0.5,
    record_every: int = 100,
    average_records: bool = False,
    progress: bool = True,
    desc: str = "MFVI",
) -> FitResult:
    """Maximise the annealed ELBO with full-batch Adam.

    Per step ``t``: ``beta_t = kl_weight(t, n_steps, anneal_fraction)``, loss
    ``-ELBO_beta / n`` summed over the batch of models (Adam is element-wise, so the models do
    not interact), one Adam step on ``(mean, log_sd)`` and, if ``learn_noise``, on
    ``log sigma_n`` (a point estimate without prior: type-II maximum likelihood inside the ELBO).

    Args:
        model, q: the model and the initial state (not modified).
        x, y: training data ``(n, N_0)``, ``(n, out)``.
        n_steps: Adam iterations.
        n_samples: MC samples of the expected log-likelihood per iteration.
        lr: Adam step size.
        generator: source of all Monte Carlo noise.
        noise_sd: fixed ``sigma_n`` or its initial value; float or tensor of batch shape.
        learn_noise: learn ``log sigma_n`` jointly with ``q``.
        anneal_fraction: fraction of the steps over which the KL weight rises from 0 to 1.
        record_every: record the ELBO parts every this many steps (and at the last step).
        average_records: record, for the ELBO parts, the mean of the per-step estimates since
            the previous record instead of the one estimate at the recorded step. A single
            estimate from a few Monte Carlo samples is noisy and heavy-tailed (lone values at
            twice the typical ELBO), which a plateau test on the curve reads as movement.
        progress: show a plain ``tqdm`` bar on stderr.
        desc: the bar's label.
    """
    spec = model.spec
    batch = _batch_shape(q.mean, spec)
    mean = {k: v.detach().clone().requires_grad_(True) for k, v in q.mean.items()}
    log_sd = {k: v.detach().clone().requires_grad_(True) for k, v in q.log_sd.items()}
    ref = q.mean["W1"]
    log_noise = torch.log(torch.as_tensor(noise_sd, dtype=ref.dtype, device=ref.device))
    log_noise = log_noise.expand(batch).clone().requires_grad_(learn_noise)
    leaves = list(mean.values()) + list(log_sd.values()) + ([log_noise] if learn_noise else [])
    optimiser = torch.optim.Adam(leaves, lr=lr, fused=True)
    state = MeanField(mean, log_sd)
    n = x.shape[-2]
    records: dict[str, list] = {k: [] for k in ("step", "kl_weight", "elbo", "objective",
                                                "expected_log_likelihood", "kl", "noise_sd")}
    sums: dict[str, Tensor] = {}  # running sums since the last record (average_records)
    n_summed = 0
    for step in tqdm(range(n_steps), desc=desc, disable=not progress, mininterval=1.0):
        beta = kl_weight(step, n_steps, anneal_fraction)
        parts = elbo(state, model, x, y, log_noise.exp(), n_samples, generator, kl_weight=beta)
        loss = -parts.elbo.sum() / n
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()
        record = step % record_every == 0 or step == n_steps - 1
        if not (record or average_records):
            continue
        with torch.no_grad():
            now = {"elbo": parts.expected_log_likelihood - parts.kl, "objective": parts.elbo,
                   "expected_log_likelihood": parts.expected_log_likelihood, "kl": parts.kl}
            if average_records:
                sums = {k: sums.get(k, 0.0) + v for k, v in now.items()}
                n_summed += 1
            if record:
                if average_records:
                    now, sums, n_summed = {k: v / n_summed for k, v in sums.items()}, {}, 0
                records["step"].append(step)
                records["kl_weight"].append(beta)
                for k, v in now.items():
                    records[k].append(v.cpu().numpy())
                records["noise_sd"].append(log_noise.exp().cpu().numpy())
    history = {
        k: (np.asarray(v) if k in ("step", "kl_weight") else np.moveaxis(np.asarray(v), 0, -1))
        for k, v in records.items()
    }
    final = MeanField({k: v.detach() for k, v in mean.items()}, {k: v.detach() for k, v in log_sd.items()})
    return FitResult(final, log_noise.detach(), history)


# --------------------------------------------------------------------------- internals


def _hidden_layers(spec: MLPSpec) -> range:
    return range(1, len(spec.hidden_widths) + 1)


def _batch_ndim(params: Mapping[str, Tensor], spec: MLPSpec) -> int:
    return params["W1"].ndim - 2


def _batch_shape(params: Mapping[str, Tensor], spec: MLPSpec) -> torch.Size:
    return params["W1"].shape[: _batch_ndim(params, spec)]


def _ordered_mask(model: BayesMLP) -> Tensor | bool | None:
    """``None`` (no model ordered), ``True`` (all) or a bool tensor of batch shape."""
    flag = model.ordered_biases
    if isinstance(flag, Tensor):
        return flag.to(torch.bool)
    return True if flag else None


def _expand_mask(mask: Tensor, n_trailing: int) -> Tensor:
    """``mask`` of batch shape with ``n_trailing`` singleton axes appended."""
    return mask.reshape(mask.shape + (1,) * n_trailing)

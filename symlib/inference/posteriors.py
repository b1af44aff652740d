"""Weight-space posterior approximations of Laurent et al. (2024), Sec. 4 and App. B.

Each method turns ``M`` trained networks (every tensor of a params dict carries a leading model
axis; ``M = 1`` is the "one mode" row of Table 1, ``M = 10`` its "multi mode" row) into weight
samples: a params dict whose tensors lead with ``(M, S)``, ``S`` samples per mode. Every method
is generic in the network: it takes ``forward(params_one_net, x) -> logits`` (``torch.func``
vmappable), runs all ``M`` modes in one vmapped computation, and draws all randomness from the
``torch.Generator`` passed in. Deep ensembles need nothing here: their samples are the trained
networks themselves.

Shared model: the training objective of :mod:`symlib.nn.training` is the mean
cross-entropy plus weight decay ``wd`` (``wd/2 ||w||^2``), i.e. ``1/N`` times the negative log
posterior ``sum_i CE(f(x_i; w), y_i) + (N wd / 2) ||w||^2``: a Gaussian prior of precision
``N * wd`` (:func:`prior_precision_from_weight_decay`; OptuNet: ``4000 * 2e-4 = 0.8``).

* **SWAG** (Maddox et al. 2019): SGD continues at a constant learning rate from the trained
  weights; every ``snapshot_every`` epochs the iterate ``w_t`` updates the running moments
  ``mean``, ``sq_mean`` and the last ``K`` deviations ``d_t = w_t - mean_t`` (columns of
  ``D``). Samples, as in the authors' ``sample(scale)``::

      w = mean + sqrt(scale) * (sqrt(diag_var) z1 + D z2 / sqrt(K - 1)) / sqrt(2),
      diag_var = max(sq_mean - mean^2, 1e-30),   z1 ~ N(0, I_P), z2 ~ N(0, I_K),

  so ``scale`` multiplies the *covariance* ``(diag_var + D D^T / (K - 1)) / 2`` (its square
  root multiplies the sd). Laurent et al. use 20 snapshots 10 epochs apart, ``K = 20``,
  ``scale = 0.1``.
* **Laplace** (MacKay 1992; Ritter et al. 2018): ``w ~ N(w*, (H + N wd I)^-1)`` with ``H`` the
  Hessian of the summed training NLL at the trained weights ``w*``: the exact Hessian
  (``"full"``, Laurent et al.'s choice for OptuNet; its negative eigenvalues, possible away
  from a strict minimum, are clipped to zero and counted) or the generalised Gauss-Newton
  ``sum_i J_i^T (diag p_i - p_i p_i^T) J_i`` (``"ggn"``, positive semi-definite; the default,
  since the authors' ``laplace-torch`` computes its ``hessian_structure="full"`` matrix with a
  GGN backend unless told otherwise). Samples are ``w* + L^-T z`` with ``L L^T`` the Cholesky
  factor of the precision. Predictions (:func:`linearised_predictive_probs`) use the network
  linearised at ``w*``, ``f(x; w*) + J(x; w*)(w - w*)``, the GLM predictive of MacKay (1992) and
  Immer et al. (2021) that laplace-torch uses by default: pushed through the network itself,
  the samples are near chance level wherever the data leave directions flat (the posterior there
  is the prior, whose sd can exceed the weights), while the GLM predictive's mean logits are
  the trained network's.
* **SGHMC** (Chen et al. 2014), in its SGD-with-momentum form for ``U(w) = N * mean minibatch
  NLL + prior``::

      v <- (1 - alpha) v - lr grad U~(w) + N(0, 2 alpha lr),     w <- w + v,

  (the gradient-noise estimate ``beta^`` taken as 0), ``burn_in`` steps, then one sample every
  ``thin`` steps; each mode is one chain started at its trained weights.
* **MC dropout** (Gal & Ghahramani 2016), last layer, ``p = 0.2``: inverted dropout on the
  input of the last linear layer, in training and at test time. One test-time draw equals the
  network whose last weight matrix has input column ``j`` multiplied by ``m_j / (1 - p)``,
  ``m_j ~ Bernoulli(1 - p)``: that masked matrix is the weight-space sample.
* **Mean-field VI** (Bayes by backprop, Blundell et al. 2015): ``q(w) = prod N(mu, sigma^2)``
  over every parameter, prior ``N(0, prior_sd^2)``, maximising
  ``ELBO = N * E_q[mean minibatch log-lik] - KL(q || p)`` with Adam, the expectation by the
  reparameterisation trick with 3 samples per step (App. B), the KL in closed form.

Public: :class:`SWAGState`, :class:`Hessian`, :class:`LaplaceState`, :class:`SGHMCConfig`,
:class:`VIConfig`, :class:`MeanField`, :func:`prior_precision_from_weight_decay`,
:func:`swag_init`, :func:`swag_collect`, :func:`train_swag`, :func:`swag_sample`,
:func:`fit_laplace`, :func:`laplace_sample`, :func:`nll_potential`, :func:`sghmc`,
:func:`dropout_forward`, :func:`train_dropout`, :func:`dropout_samples`,
:func:`fit_mean_field`, :func:`mean_field_sample`, :func:`predictive_probs`,
:func:`linearised_predictive_probs`.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.func import grad, jacrev, jvp, vmap

from symlib.nn.mlp import Params
from symlib.nn.training import (
    SGDConfig,
    minibatches,
    optimizer_state,
    optimizer_step,
    train_batched,
)

__all__ = [
    "Hessian",
    "LaplaceState",
    "MeanField",
    "SGHMCConfig",
    "SWAGState",
    "VIConfig",
    "dropout_forward",
    "dropout_samples",
    "fit_laplace",
    "fit_mean_field",
    "laplace_sample",
    "linearised_predictive_probs",
    "mean_field_sample",
    "nll_potential",
    "predictive_probs",
    "prior_precision_from_weight_decay",
    "sghmc",
    "swag_collect",
    "swag_init",
    "swag_sample",
    "train_dropout",
    "train_swag",
]

Forward = Callable[[Params, Tensor], Tensor]
Shapes = dict[str, tuple[int, ...]]


def prior_precision_from_weight_decay(weight_decay: float, n_data: int) -> float:
    """Gaussian prior precision ``N * wd`` implied by weight decay on a mean-loss objective."""
    return weight_decay * n_data


def _randn(shape, generator: torch.Generator, like: Tensor) -> Tensor:
    """Standard normals drawn on ``generator``'s device, returned on ``like``'s device and dtype
    (a CPU generator may drive a GPU run: the same draws, then moved)."""
    z = torch.randn(shape, generator=generator, device=generator.device, dtype=like.dtype)
    return z.to(like.device)


def _rand(shape, generator: torch.Generator, like: Tensor) -> Tensor:
    """Uniforms on [0, 1), drawn as :func:`_randn` draws its normals."""
    return torch.rand(shape, generator=generator, device=generator.device).to(like.device)


# --- flat parameter vectors ----------------------------------------------------------------


def _shapes(params: Params, n_lead: int) -> Shapes:
    return {k: tuple(v.shape[n_lead:]) for k, v in params.items()}


def _flatten(params: Params, n_lead: int) -> Tensor:
    """``(*lead, P)``: every tensor's trailing axes flattened and concatenated in dict order."""
    return torch.cat([v.reshape(*v.shape[:n_lead], -1) for v in params.values()], dim=-1)


def _unflatten(flat: Tensor, shapes: Shapes) -> Params:
    lead, out, i = flat.shape[:-1], {}, 0
    for k, s in shapes.items():
        n = math.prod(s)
        out[k] = flat[..., i:i + n].reshape((*lead, *s))
        i += n
    return out


# --- SWAG ----------------------------------------------------------------------------------


class SWAGState(NamedTuple):
    """Running SWAG moments of ``M`` modes over flat weight vectors of length ``P``."""

    mean: Tensor
    """``(M, P)`` mean of the snapshots."""
    sq_mean: Tensor
    """``(M, P)`` mean of their squares."""
    deviations: Tensor
    """``(M, K, P)`` the last ``K <= max_rank`` deviations ``w_t - mean_t`` (oldest first)."""
    n_snapshots: int
    """Snapshots collected."""
    max_rank: int
    """Deviations kept (the low-rank part's rank)."""
    shapes: Shapes
    """Shape of each parameter tensor of one network."""


def swag_init(params: Params, max_rank: int = 20) -> SWAGState:
    """Empty SWAG state for batched ``params`` (leading model axis ``M``)."""
    flat = _flatten(params, 1).detach()
    m, p = flat.shape
    return SWAGState(torch.zeros_like(flat), torch.zeros_like(flat), flat.new_zeros(m, 0, p), 0,
                     max_rank, _shapes(params, 1))


def swag_collect(state: SWAGState, params: Params) -> SWAGState:
    """Add one snapshot (batched ``params``) to the moments and the deviation buffer."""
    w = _flatten(params, 1).detach()
    n = state.n_snapshots + 1
    mean = state.mean + (w - state.mean) / n
    sq_mean = state.sq_mean + (w * w - state.sq_mean) / n
    dev = torch.cat([state.deviations, (w - mean)[:, None]], dim=1)[:, -state.max_rank:]
    return state._replace(mean=mean, sq_mean=sq_mean, deviations=dev, n_snapshots=n)


def train_swag(
    loss_fn: Callable[[Params, Tensor, Tensor], Tensor],
    params: Params,
    x: Tensor,
    y: Tensor,
    config: SGDConfig,
    generator: torch.Generator,
    *,
    n_snapshots: int = 20,
    snapshot_every: int = 10,
    max_rank: int = 20,
) -> SWAGState:
    """Continue SGD from trained ``params`` and collect a snapshot every ``snapshot_every`` epochs.

    Runs :func:`symlib.nn.training.train_batched` for ``n_snapshots * snapshot_every``
    epochs (``config.epochs`` is overridden; give no milestones for SWAG's constant rate).
    """
    config = replace(config, epochs=n_snapshots * snapshot_every)
    every = snapshot_every * (x.shape[0] // config.batch_size)
    state = swag_init(params, max_rank)

    def on_step(step: int, p: Params) -> None:
        nonlocal state
        if step % every == 0:
            state = swag_collect(state, p)

    train_batched(loss_fn, params, x, y, config, generator, on_step=on_step)
    return state


def swag_sample(state: SWAGState, n_samples: int, generator: torch.Generator,
                scale: float = 0.1) -> Params:
    """``(M, S, ...)`` samples of the SWAG Gaussian with covariance multiplied by ``scale``."""
    m, k, p = state.deviations.shape
    var = (state.sq_mean - state.mean**2).clamp_min(1e-30)
    z1 = _randn((m, n_samples, p), generator, var)
    eps = var.sqrt()[:, None] * z1
    if k > 1:  # the low-rank part needs two snapshots (K - 1 in its normaliser)
        z2 = _randn((m, n_samples, k), generator, var)
        eps = eps + torch.einsum("msk,mkp->msp", z2, state.deviations) / math.sqrt(k - 1)
    w = state.mean[:, None] + math.sqrt(scale / 2) * eps
    return _unflatten(w, state.shapes)


# --- Laplace -------------------------------------------------------------------------------


class Hessian(str, enum.Enum):
    """Curvature of the summed NLL used by :func:`fit_laplace`."""

    FULL = "full"
    """Exact Hessian (forward-over-reverse); negative eigenvalues clipped to 0 and counted."""
    GGN = "ggn"
    """Generalised Gauss-Newton ``sum_i J_i^T (diag p_i - p_i p_i^T) J_i``: PSD, ~P/C cheaper."""


class LaplaceState(NamedTuple):
    """Gaussian ``N(mean, precision^-1)`` for each of ``M`` modes."""

    mean: Tensor
    """``(M, P)`` the trained (MAP) weights, flat."""
    precision: Tensor
    """``(M, P, P)`` float64 posterior precision ``H + prior_precision I``."""
    n_negative: Tensor
    """``(M,)`` negative Hessian eigenvalues clipped to 0 (always 0 for ``"ggn"``)."""
    shapes: Shapes
    """Shape of each parameter tensor of one network."""


def fit_laplace(
    forward: Forward,
    params: Params,
    x: Tensor,
    y: Tensor,
    prior_precision: float,
    hessian: Hessian | str = Hessian.GGN,
    chunk_size: int = 16,
    n_data: int | None = None,
) -> LaplaceState:
    """Laplace approximation at batched trained ``params`` on the data ``(x, y)``.

    With ``n_data`` given, ``(x, y)`` is a random subset of the ``n_data`` training points and
    its summed curvature is multiplied by ``n_data / len(x)`` (an unbiased estimate of the
    full sum; the exact Hessian costs about ``P`` gradient passes per example).

    The curvature is accumulated over chunks of ``chunk_size`` examples, each chunk vmapped
    over the ``M`` modes: memory grows with ``M * P * chunk_size`` activations for ``"full"``
    (OptuNet, ``M = 4``, chunk 16: about 1.5 GB) and ``M * C * chunk_size`` for ``"ggn"``.
    """
    hessian = Hessian(hessian)
    shapes = _shapes(params, 1)
    theta = _flatten(params, 1).detach()
    m, p = theta.shape

    def nll_sum(t: Tensor, xb: Tensor, yb: Tensor) -> Tensor:
        return F.cross_entropy(forward(_unflatten(t, shapes), xb), yb, reduction="sum")

    def ggn(t: Tensor, xb: Tensor) -> Tensor:
        def one(tt: Tensor, xi: Tensor) -> Tensor:
            return forward(_unflatten(tt, shapes), xi[None])[0]
        jac = vmap(jacrev(one), in_dims=(None, 0))(t, xb)  # (B, C, P)
        probs = torch.softmax(forward(_unflatten(t, shapes), xb), dim=-1)  # (B, C)
        jp = torch.einsum("bc,bcp->bp", probs, jac)
        return torch.einsum("bc,bcp,bcq->pq", probs, jac, jac) - jp.T @ jp

    if hessian is Hessian.FULL:
        # reverse-over-reverse: ~15x faster than forward-over-reverse for the unfold convnet
        curvature = vmap(jacrev(grad(nll_sum)), in_dims=(0, None, None))
    else:
        curvature = vmap(lambda t, xb, yb: ggn(t, xb), in_dims=(0, None, None))
    h = theta.new_zeros(m, p, p)
    with torch.no_grad():
        for i in range(0, x.shape[0], chunk_size):
            h += curvature(theta, x[i:i + chunk_size], y[i:i + chunk_size])
    h = h.double() * (1.0 if n_data is None else n_data / x.shape[0])
    h = (h + h.mT) / 2
    n_negative = torch.zeros(m, dtype=torch.long)
    if hessian is Hessian.FULL:
        evals, evecs = torch.linalg.eigh(h)
        n_negative = (evals < 0).sum(-1)
        h = evecs @ torch.diag_embed(evals.clamp_min(0)) @ evecs.mT
    precision = h + prior_precision * torch.eye(p, dtype=h.dtype, device=h.device)
    return LaplaceState(theta, precision, n_negative, shapes)


def laplace_sample(state: LaplaceState, n_samples: int, generator: torch.Generator) -> Params:
    """``(M, S, ...)`` samples ``mean + L^-T z`` where ``L L^T = precision``."""
    chol = torch.linalg.cholesky(state.precision)
    m, p = state.mean.shape
    z = _randn((m, p, n_samples), generator, chol)
    eps = torch.linalg.solve_triangular(chol.mT, z, upper=True).mT  # (M, S, P)
    return _unflatten(state.mean[:, None] + eps.to(state.mean.dtype), state.shapes)


# --- SGHMC ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SGHMCConfig:
    """SGHMC in the SGD-with-momentum form (Chen et al. 2014, Eq. 15).

    Attributes:
        lr: ``eta``, the learning rate on ``U`` (a *sum* over the data: ``lr * N`` is the
            equivalent rate on the mean loss).
        alpha: friction ``1 - momentum``.
        batch_size: examples per stochastic gradient.
        burn_in: steps discarded before the first sample.
        thin: steps between kept samples.
        n_samples: samples ``S`` kept per chain.
        crop_padding: random-crop augmentation as in training (0: none).
    """

    lr: float
    alpha: float
    batch_size: int
    burn_in: int
    thin: int
    n_samples: int
    crop_padding: int = 0


def nll_potential(forward: Forward, n_data: int,
                  prior_precision: float) -> Callable[[Params, Tensor, Tensor], Tensor]:
    """``U~(w) = N * mean_batch CE(f(x; w), y) + prior_precision/2 ||w||^2`` for one network."""
    def potential(params: Params, xb: Tensor, yb: Tensor) -> Tensor:
        prior = sum((v**2).sum() for v in params.values())
        return n_data * F.cross_entropy(forward(params, xb), yb) + 0.5 * prior_precision * prior
    return potential


def sghmc(
    potential: Callable[[Params, Tensor, Tensor], Tensor],
    params: Params,
    x: Tensor,
    y: Tensor,
    config: SGHMCConfig,
    generator: torch.Generator,
) -> Params:
    """One SGHMC chain per mode of batched ``params``: ``(M, S, ...)`` samples.

    ``potential(params_one_net, xb, yb)`` is the minibatch estimate of ``U`` (e.g.
    :func:`nll_potential`); each chain reshuffles the data every epoch.
    """
    w = {k: v.detach().clone() for k, v in params.items()}
    v = {k: torch.zeros_like(t) for k, t in w.items()}
    m = next(iter(w.values())).shape[0]
    step_grad = vmap(grad(potential), in_dims=(0, 0, 0))
    noise_sd = math.sqrt(2 * config.alpha * config.lr)
    n_steps = config.burn_in + config.thin * config.n_samples
    samples: list[Params] = []
    batches = minibatches(m, x, y, config.batch_size, generator,
                          crop_padding=config.crop_padding)
    for step, (_, xb, yb) in zip(range(n_steps), batches):
        g = step_grad(w, xb, yb)
        with torch.no_grad():
            for k, wk in w.items():
                noise = _randn(wk.shape, generator, wk)
                v[k] = (1 - config.alpha) * v[k] - config.lr * g[k] + noise_sd * noise
                w[k] = wk + v[k]
        if step >= config.burn_in and (step - config.burn_in + 1) % config.thin == 0:
            samples.append(dict(w))
    return {k: torch.stack([s[k] for s in samples], dim=1) for k in w}


# --- MC dropout ----------------------------------------------------------------------------


def _mask_weight(params: Params, mask: Tensor, p: float, weight_key: str) -> Params:
    return {**params, weight_key: params[weight_key] * mask / (1 - p)}


def dropout_forward(forward: Forward, params: Params, x: Tensor, mask: Tensor, p: float = 0.2,
                    weight_key: str = "W4") -> Tensor:
    """Logits of one network with inverted dropout on the last layer's input, per example.

    ``mask (B, H)`` (1 keep, 0 drop) multiplies example ``i``'s ``H`` last-layer inputs by
    ``mask[i] / (1 - p)``, i.e. the columns of ``params[weight_key] (C, H)``.
    """
    def one(xi: Tensor, mi: Tensor) -> Tensor:
        return forward(_mask_weight(params, mi, p, weight_key), xi[None])[0]
    return vmap(one)(x, mask)


def train_dropout(
    forward: Forward,
    params: Params,
    x: Tensor,
    y: Tensor,
    config: SGDConfig,
    generator: torch.Generator,
    *,
    p: float = 0.2,
    weight_key: str = "W4",
) -> Params:
    """Train batched ``params`` with last-layer dropout: :func:`train_batched`'s optimiser (SGD
    or Adam, :func:`symlib.nn.training.optimizer_step`), with a fresh Bernoulli(1 - p)
    mask per network, example and step drawn from ``generator``."""
    params = {k: v.detach().clone() for k, v in params.items()}
    state = optimizer_state(params)
    m = next(iter(params.values())).shape[0]
    h = params[weight_key].shape[-1]

    def loss(prm: Params, xb: Tensor, yb: Tensor, mask: Tensor) -> Tensor:
        return F.cross_entropy(dropout_forward(forward, prm, xb, mask, p, weight_key), yb)

    step_grad = vmap(grad(loss))
    lr, last_epoch = config.lr, -1
    for epoch, xb, yb in minibatches(m, x, y, config.batch_size, generator,
                                     crop_padding=config.crop_padding, epochs=config.epochs):
        if epoch != last_epoch:
            last_epoch = epoch
            if epoch in config.milestones:
                lr *= config.gamma
        mask = (_rand((m, config.batch_size, h), generator, xb) >= p).to(xb.dtype)
        params = optimizer_step(params, step_grad(params, xb, yb, mask), state, config, lr)
    return params


def dropout_samples(params: Params, n_samples: int, generator: torch.Generator, p: float = 0.2,
                    weight_key: str = "W4") -> Params:
    """``(M, S, ...)`` weight samples: ``params[weight_key]``'s input columns masked and scaled
    by ``1/(1 - p)`` (one Bernoulli mask per sample), the other tensors repeated."""
    w = params[weight_key]
    m, h = w.shape[0], w.shape[-1]
    mask = (_rand((m, n_samples, h), generator, w) >= p).to(w.dtype)
    # the unchanged tensors are expanded views, not copies
    out = {k: v[:, None].expand(v.shape[0], n_samples, *v.shape[1:]) for k, v in params.items()}
    out[weight_key] = w[:, None] * mask[..., None, :] / (1 - p)
    return out


# --- mean-field VI -------------------------------------------------------------------------


class MeanField(NamedTuple):
    """Factorised Gaussian ``q``; every tensor leads with the model axis ``M``."""

    mean: Params
    log_sd: Params


@dataclass(frozen=True)
class VIConfig:
    """Bayes-by-backprop optimisation.

    Attributes:
        lr: Adam learning rate.
        epochs: passes over the data.
        batch_size: examples per step.
        n_mc: reparameterised samples per step (Laurent et al.: 3).
        prior_sd: sd of the ``N(0, prior_sd^2)`` prior on every weight.
        init_sd: initial sd of every factor.
        crop_padding: random-crop augmentation (0: none).
    """

    lr: float
    epochs: int
    batch_size: int
    n_mc: int = 3
    prior_sd: float = 1.0
    init_sd: float = 1e-3
    crop_padding: int = 0


def fit_mean_field(
    log_lik: Callable[[Params, Tensor, Tensor], Tensor],
    params: Params,
    x: Tensor,
    y: Tensor,
    config: VIConfig,
    generator: torch.Generator,
) -> MeanField:
    """Maximise the ELBO of ``M`` independent mean-field posteriors, means started at ``params``.

    ``log_lik(params_one_net, xb, yb)`` is the *mean* log-likelihood of a minibatch (e.g.
    ``-F.cross_entropy(forward(p, xb), yb)``). The summed negative ELBOs (divided by ``N``)
    are minimised by one Adam; Adam acts element-wise, so the modes stay independent.
    """
    mean = {k: v.detach().clone().requires_grad_() for k, v in params.items()}
    log_sd = {k: torch.full_like(v, math.log(config.init_sd)).requires_grad_()
              for k, v in params.items()}
    opt = torch.optim.Adam([*mean.values(), *log_sd.values()], lr=config.lr)
    n, bs, s2 = x.shape[0], config.batch_size, config.prior_sd**2

    def neg_elbo(mu: Params, ls: Params, eps: Params, xb: Tensor, yb: Tensor) -> Tensor:
        w = {k: mu[k] + ls[k].exp() * eps[k] for k in mu}  # (n_mc, ...)
        ll = vmap(log_lik, in_dims=(0, None, None))(w, xb, yb).mean()
        kl = sum((math.log(config.prior_sd) - ls[k] + ((2 * ls[k]).exp() + mu[k]**2) / (2 * s2)
                  - 0.5).sum() for k in mu)
        return -ll + kl / n

    batched = vmap(neg_elbo)
    m = next(iter(mean.values())).shape[0]
    for _, xb, yb in minibatches(m, x, y, bs, generator, crop_padding=config.crop_padding,
                                 epochs=config.epochs):
        eps = {k: _randn((m, config.n_mc, *v.shape[1:]), generator, v) for k, v in mean.items()}
        opt.zero_grad()
        batched(mean, log_sd, eps, xb, yb).sum().backward()
        opt.step()
    return MeanField({k: v.detach() for k, v in mean.items()},
                     {k: v.detach() for k, v in log_sd.items()})


def mean_field_sample(q: MeanField, n_samples: int, generator: torch.Generator) -> Params:
    """``(M, S, ...)`` samples of ``q``."""
    out = {}
    for k, mu in q.mean.items():
        z = _randn((mu.shape[0], n_samples, *mu.shape[1:]), generator, mu)
        out[k] = mu[:, None] + q.log_sd[k].exp()[:, None] * z
    return out


# --- predictions ---------------------------------------------------------------------------


def predictive_probs(forward: Forward, samples: Params, x: Tensor, batch_size: int = 256,
                     nets_per_chunk: int = 64) -> Tensor:
    """Class probabilities ``(M, S, B, C)`` of every weight sample on ``x (B, ...)``.

    The ``M * S`` networks are vmapped in groups of ``nets_per_chunk`` over chunks of
    ``batch_size`` inputs, bounding memory by ``nets_per_chunk * batch_size`` activations.
    """
    lead = next(iter(samples.values())).shape[:2]
    flat = {k: v.reshape(-1, *v.shape[2:]) for k, v in samples.items()}
    n_nets = lead[0] * lead[1]
    f = vmap(forward, in_dims=(0, None))
    with torch.no_grad():
        rows = [
            torch.cat([torch.softmax(f({k: v[j:j + nets_per_chunk] for k, v in flat.items()},
                                       x[i:i + batch_size]), dim=-1)
                       for i in range(0, x.shape[0], batch_size)], dim=1)
            for j in range(0, n_nets, nets_per_chunk)
        ]
    probs = torch.cat(rows, dim=0)
    return probs.reshape(*lead, *probs.shape[1:])


def linearised_predictive_probs(forward: Forward, samples: Params, centres: Params, x: Tensor,
                                batch_size: int = 256, nets_per_chunk: int = 64) -> Tensor:
    """Class probabilities ``(M, S, B, C)`` of the network linearised at ``centres``.

    Sample ``w`` of ``samples`` predicts ``softmax(f(x; c) + J(x; c) (w - c))`` with ``c`` its
    centre, the mode its Laplace approximation is built around (``centres`` lead with
    ``(M, S)``, or ``(M, 1)`` for one centre per mode); one forward-mode pass
    (:func:`torch.func.jvp`) per network and input chunk. Chunked as :func:`predictive_probs`.
    """
    lead = next(iter(samples.values())).shape[:2]
    flat = {k: v.reshape(-1, *v.shape[2:]) for k, v in samples.items()}
    centre = {k: centres[k].expand_as(v).reshape(-1, *v.shape[2:]) for k, v in samples.items()}
    delta = {k: flat[k] - centre[k] for k in flat}
    n_nets = lead[0] * lead[1]

    def one(c: Params, d: Params, xb: Tensor) -> Tensor:
        logits, tangent = jvp(lambda p: forward(p, xb), (c,), (d,))
        return torch.softmax(logits + tangent, dim=-1)

    f = vmap(one, in_dims=(0, 0, None))
    with torch.no_grad():
        rows = [
            torch.cat([f({k: v[j:j + nets_per_chunk] for k, v in centre.items()},
                         {k: v[j:j + nets_per_chunk] for k, v in delta.items()},
                         x[i:i + batch_size])
                       for i in range(0, x.shape[0], batch_size)], dim=1)
            for j in range(0, n_nets, nets_per_chunk)
        ]
    probs = torch.cat(rows, dim=0)
    return probs.reshape(*lead, *probs.shape[1:])

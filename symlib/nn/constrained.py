"""Chapter 4's networks in torch: the log densities of the Stan programs, term for term.

Pourzanjani, Jiang & Petzold (2017) make a one-hidden-layer ReLU regression network,

    y_n = W2^T relu(W1 x_n + b1) + b2 + sigma eps_n,     eps_n ~ N(0, 1),

identifiable by constraining its parameters: ordered hidden biases ``b1_1 < ... < b1_H`` pick one
representative of every permutation of hidden units (their Theorem 3.1), and unit-norm incoming
weight vectors ``||W1[h]|| = 1`` with the last layer free remove the positive scaling of each
ReLU unit (Theorem 3.2). :data:`MODELS` names the three programs in ``symlib/inference/stan_models``.

Every function here works on a point ``z`` of the *unconstrained* space in Stan's own ordering
(declaration order; matrices column-major; arrays of vectors row by row), so that

    log_density(model, z, ...) == StanModel.log_prob(z, adjust_transform=True)

including every normalising constant and every change-of-variables term Stan adds:

* ``sigma`` (``<lower=0>``): ``sigma = exp(u)``, log-Jacobian ``u``;
* ``ordered[H] b1``: ``b1_1 = u_1``, ``b1_k = b1_{k-1} + exp(u_k)``, log-Jacobian ``sum_{k>=2} u_k``;
* angles ``t_2..t_{D-1}`` in ``(-pi/2, pi/2)``: ``t = -pi/2 + pi * logistic(u)``, log-Jacobian
  ``log(pi) + log logistic(u) + log(1 - logistic(u))``;
* the first angle ``t_1 = atan2(p_2, p_1)`` of an auxiliary point ``p ~ N(0, I_2)`` (so it wraps
  around ``+-pi`` without a boundary), and, optionally, the angle change of measure
  ``sum_{k=2}^{D-1} (k-1) log cos t_k`` that makes the implied prior of ``W1[h]`` uniform on the
  sphere (the authors' Stan file leaves it out).

Unit vector from angles (``t_1 in (-pi, pi)``, the rest in ``(-pi/2, pi/2)``):
``w_1 = prod_k cos t_k``, ``w_{k+1} = sin t_k prod_{j>k} cos t_j``.

Priors (the authors' code): Laplace or normal with scale ``w_scale`` on the weights (``W1`` and
``W2``; the constrained model has no prior on ``W1`` beyond the angles'), ``N(0, 1)`` on the
biases, half-normal ``sigma_scale`` on the noise sd.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from symlib import transforms as tf
from symlib.nn.mlp import MLPSpec

__all__ = [
    "MODELS",
    "NetPrior",
    "forward",
    "log_density",
    "n_unconstrained",
    "n_unit_vector_mlp",
    "stan_data",
    "unit_vector_mlp",
    "unpack",
]

MODELS = ("unconstrained", "ordered", "constrained")
_LOG_2PI = math.log(2 * math.pi)


@dataclass(frozen=True)
class NetPrior:
    """Prior and transform switches shared by the torch and Stan versions of the models."""

    w_laplace: bool = True
    """Laplace (True) or normal (False) prior on the weights [code: Laplace(0, 1) on Boston]."""
    w_scale: float = 1.0
    """Scale of the weight prior [code: 1 on Boston, sd 0.9 on the synthetic data]."""
    sigma_scale: float = 1.0
    """Half-normal scale of the prior on the noise sd [open]."""
    angle_jacobian: bool = True
    """Add ``sum (k-1) log cos t_k`` (uniform prior on the sphere); the authors' code does not."""


def n_unconstrained(model: str, d_in: int, hidden: int) -> int:
    """Dimension of the unconstrained space of ``model`` for ``d_in`` inputs, ``hidden`` units."""
    _check(model)
    if model == "constrained":
        return hidden * 2 + hidden * (d_in - 2) + 2 * hidden + 2
    return hidden * d_in + 2 * hidden + 2


def unpack(model: str, z: Tensor, d_in: int, hidden: int, *, angle_jacobian: bool = True
           ) -> tuple[dict[str, Tensor], Tensor]:
    """Network parameters from unconstrained ``z (..., d)``, and the log-Jacobian Stan adds.

    Returns:
        ``(params, log_jac)``: ``W1 (..., H, D)``, ``b1 (..., H)``, ``W2 (..., H)``, ``b2 (...)``,
        ``sigma (...)`` (the constrained model also ``p (..., H, 2)`` and ``t (..., H, D-2)``),
        and the sum of the transforms' log-Jacobians ``(...)``. For the constrained model this
        includes :func:`symlib.transforms.unit_vector_from_unconstrained`'s correction: the
        auxiliary points' ``N(0, I_2)`` density, the bounded angles' log-Jacobians and (when
        ``angle_jacobian``) the angle change of measure, i.e. the whole prior of ``W1``.
    """
    _check(model)
    H, D = hidden, d_in
    if z.shape[-1] != n_unconstrained(model, D, H):
        raise ValueError(f"z has {z.shape[-1]} coordinates; {model} with D={D}, H={H} needs "
                         f"{n_unconstrained(model, D, H)}")
    batch = z.shape[:-1]
    i = 0

    def take(n):
        nonlocal i
        out = z[..., i:i + n]
        i += n
        return out

    out: dict[str, Tensor] = {}
    log_jac = z.new_zeros(batch)
    if model == "constrained":
        p = take(2 * H).reshape(*batch, H, 2)                              # array[H] vector[2]
        u = take(H * (D - 2)).reshape(*batch, D - 2, H).transpose(-1, -2)  # column-major matrix
        out["W1"], corr = tf.unit_vector_from_unconstrained(
            p, u, include_angle_jacobian=angle_jacobian)
        log_jac = log_jac + corr.sum(-1)
        out["p"] = p
        out["t"] = tf.bounded_from_unconstrained(u, -math.pi / 2, math.pi / 2)
    else:
        out["W1"] = take(H * D).reshape(*batch, D, H).transpose(-1, -2)    # column-major matrix
    ub = take(H)
    if model == "unconstrained":
        out["b1"] = ub
    else:
        out["b1"] = tf.ordered_from_unconstrained(ub)
        log_jac = log_jac + tf.ordered_log_abs_det_jacobian(ub)
    out["W2"] = take(H)
    out["b2"] = take(1)[..., 0]
    us = take(1)[..., 0]
    out["sigma"] = torch.exp(us)
    log_jac = log_jac + us
    return out, log_jac


def forward(params: dict[str, Tensor], x: Tensor) -> Tensor:
    """Network output ``(..., N)`` for inputs ``x (N, D)`` and parameters with batch ``(...)``."""
    pre = torch.einsum("...hd,nd->...nh", params["W1"], x) + params["b1"][..., None, :]
    return torch.einsum("...nh,...h->...n", torch.relu(pre), params["W2"]) + params["b2"][..., None]


def _laplace(x, s):
    return -math.log(2 * s) - x.abs() / s


def _normal(x, s):
    return -0.5 * _LOG_2PI - math.log(s) - 0.5 * (x / s) ** 2


def log_density(model: str, z: Tensor, x: Tensor, y: Tensor, prior: NetPrior = NetPrior()) -> Tensor:
    """Log posterior density (up to ``log p(y)``) on the unconstrained space, as Stan computes it.

    Args:
        model: one of :data:`MODELS`.
        z: unconstrained points ``(..., d)`` in Stan's ordering.
        x, y: inputs ``(N, D)`` and targets ``(N,)``.
        prior: the prior and transform switches.
    """
    H = _hidden(model, z.shape[-1], x.shape[-1])
    params, lp = unpack(model, z, x.shape[-1], H, angle_jacobian=prior.angle_jacobian)
    wprior = _laplace if prior.w_laplace else _normal
    if model != "constrained":          # the constrained W1's prior is in unpack's correction
        lp = lp + wprior(params["W1"], prior.w_scale).sum((-1, -2))
    lp = lp + wprior(params["W2"], prior.w_scale).sum(-1)
    lp = lp + _normal(params["b1"], 1.0).sum(-1) + _normal(params["b2"], 1.0)
    lp = lp + _normal(params["sigma"], prior.sigma_scale) + math.log(2.0)
    mu = forward(params, x)
    sigma = params["sigma"][..., None]
    lp = lp + (-0.5 * _LOG_2PI - torch.log(sigma) - 0.5 * ((y - mu) / sigma) ** 2).sum(-1)
    return lp


def stan_data(model: str, x, y, hidden: int, prior: NetPrior = NetPrior()) -> dict:
    """The data block of Stan program ``model`` for inputs ``x (N, D)`` and targets ``y (N,)``."""
    _check(model)
    x = torch.as_tensor(x, dtype=torch.float64)
    data = {"N": int(x.shape[0]), "D": int(x.shape[1]), "H": int(hidden), "X": x.tolist(),
            "y": torch.as_tensor(y, dtype=torch.float64).tolist(), "w_laplace": int(prior.w_laplace),
            "w_scale": float(prior.w_scale), "sigma_scale": float(prior.sigma_scale)}
    if model == "constrained":
        data["angle_jacobian"] = int(prior.angle_jacobian)
    return data


def _hidden(model: str, d: int, d_in: int) -> int:
    per = 2 + (d_in - 2) + 2 if model == "constrained" else d_in + 2
    if (d - 2) % per:
        raise ValueError(f"{d} unconstrained coordinates do not fit {model} with {d_in} inputs")
    return (d - 2) // per


def _check(model: str) -> None:
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; valid: {', '.join(MODELS)}")


# --------------------------------------------------------------------------- any one-hidden-layer MLP


def n_unit_vector_mlp(spec: MLPSpec) -> int:
    """Unconstrained coordinates of :func:`unit_vector_mlp` for a one-hidden-layer ``spec``."""
    if len(spec.hidden_widths) != 1 or spec.widths[0] < 2:
        raise ValueError(f"unit-vector rows need one hidden layer and >= 2 inputs; got widths {spec.widths}")
    (h,) = spec.hidden_widths
    return spec.n_params - h * spec.widths[0] + h * 2 + h * (spec.widths[0] - 2)


def unit_vector_mlp(z: Tensor, spec: MLPSpec, *, prior_sd: float = 1.0) -> tuple[dict[str, Tensor], Tensor]:
    """Parameters of a one-hidden-layer :class:`~symlib.nn.mlp.MLPSpec` network whose hidden units'
    incoming weight vectors are unit vectors (Pourzanjani et al. 2017, Theorem 3.2, for any output
    layer and likelihood), from unconstrained ``z (..., d)``, and their log prior density.

    Layout of ``z``: the auxiliary points ``(H, 2)`` and angle reals ``(H, D - 2)`` of each row of
    ``W1`` (:func:`symlib.transforms.unit_vector_from_unconstrained`), then ``b1``, ``W2``, ``b2``
    flattened row-major. The prior is uniform on the sphere for each row of ``W1`` (angle
    Jacobian included) and ``N(0, prior_sd^2)`` on the rest; the returned log density on ``z``
    includes every change-of-variables term, so ``log p(data | params) + log_prior`` is the
    posterior to fit on ``z``. For a ReLU network this removes the per-unit scaling symmetry: the
    scale of a unit lives in its outgoing weights (and its bias).

    Returns:
        ``(params, log_prior)``: ``W1 (..., H, D)`` with unit rows, ``b1``, ``W2``, ``b2`` of
        the spec's shapes with batch ``(...)``, and ``log_prior (...)``.
    """
    d = n_unit_vector_mlp(spec)
    if z.shape[-1] != d:
        raise ValueError(f"z has {z.shape[-1]} coordinates; the unit-vector MLP {spec.widths} needs {d}")
    (h,) = spec.hidden_widths
    n_in = spec.widths[0]
    batch = z.shape[:-1]
    shapes = spec.shapes()
    i = 0

    def take(shape):
        nonlocal i
        n = math.prod(shape)
        out = z[..., i:i + n].reshape(*batch, *shape)
        i += n
        return out

    p = take((h, 2))
    u = take((h, n_in - 2))
    w1, log_prior = tf.unit_vector_from_unconstrained(p, u, include_angle_jacobian=True)
    params = {"W1": w1}
    log_prior = log_prior.sum(-1)
    for key in ("b1", "W2", "b2"):
        params[key] = take(shapes[key])
        log_prior = log_prior + _normal(params[key], prior_sd).flatten(len(batch)).sum(-1)
    return params, log_prior

"""Stan-style bijections between constrained and unconstrained spaces, with log-Jacobians.

Each transform is a pair of pure functions (constrained from unconstrained, and back) plus the
log absolute determinant of the Jacobian of the forward map, so a density on the constrained
space can be pulled back to the unconstrained space where variational inference or HMC act:

    p_Y(y) = p_X(x(y)) * |det dx/dy|.

So far: the *ordered* transform (Stan reference manual, "Ordered vector"), used by Kurle et al.
(2021, Sec. 3) and Pourzanjani et al. (2017) to order the biases of a hidden layer,

    x_1 = y_1,    x_k = x_{k-1} + exp(y_k)   (k >= 2),

so ``x_1 < x_2 < ... < x_K`` for every real ``y``; the inverse is ``y_1 = x_1``,
``y_k = log(x_k - x_{k-1})`` and ``log|det dx/dy| = sum_{k>=2} y_k`` (the Jacobian is lower
triangular with diagonal ``(1, exp(y_2), ..., exp(y_K))``).

All functions act on the last axis and broadcast over leading (batch) axes.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = [
    "ordered_from_unconstrained",
    "ordered_log_abs_det_jacobian",
    "unconstrained_from_ordered",
]


def ordered_from_unconstrained(y: Tensor) -> Tensor:
    """Strictly increasing ``x`` from unconstrained ``y`` along the last axis.

    ``x_1 = y_1`` and ``x_k = x_{k-1} + exp(y_k)``: the first element plus the cumulative sum
    of the exponentiated log-differences.
    """
    if y.shape[-1] == 0:
        return y.clone()
    return torch.cat([y[..., :1], torch.exp(y[..., 1:])], dim=-1).cumsum(dim=-1)


def unconstrained_from_ordered(x: Tensor) -> Tensor:
    """Inverse of :func:`ordered_from_unconstrained`: ``y_1 = x_1``, ``y_k = log(x_k - x_{k-1})``.

    Raises:
        ValueError: if ``x`` is not strictly increasing along the last axis.
    """
    gaps = x[..., 1:] - x[..., :-1]
    if bool((gaps <= 0).any()):
        raise ValueError("x must be strictly increasing along its last axis")
    return torch.cat([x[..., :1], torch.log(gaps)], dim=-1)


def ordered_log_abs_det_jacobian(y: Tensor) -> Tensor:
    """``log|det dx/dy| = sum_{k>=2} y_k`` of the forward map at ``y`` (one value per batch)."""
    return y[..., 1:].sum(dim=-1)

"""Stan-style bijections between constrained and unconstrained spaces, with log-Jacobians.

Each transform is a pair of pure functions (constrained from unconstrained, and back) plus the
log absolute determinant of the Jacobian of the forward map, so a density on the constrained
space can be pulled back to the unconstrained space where variational inference or HMC act:

    p_Y(y) = p_X(x(y)) * |det dx/dy|.

**Ordered vector** (Stan reference manual, "Ordered vector"), used by Kurle et al. (2021,
Sec. 3) and Pourzanjani et al. (2017) to order the biases of a hidden layer,

    x_1 = y_1,    x_k = x_{k-1} + exp(y_k)   (k >= 2),

so ``x_1 < x_2 < ... < x_K`` for every real ``y``; the inverse is ``y_1 = x_1``,
``y_k = log(x_k - x_{k-1})`` and ``log|det dx/dy| = sum_{k>=2} y_k`` (the Jacobian is lower
triangular with diagonal ``(1, exp(y_2), ..., exp(y_K))``).

**Lower and upper bounded scalar** (Stan reference manual, "Lower and upper bounded scalar"):
``x = lo + (hi - lo) * logistic(y)`` with ``log|dx/dy| = log(hi - lo) + log logistic(y) +
log logistic(-y)``.

**Unit vector through angles** (Pourzanjani et al. 2017, Sec. 3, the Givens transform; the
spherical coordinates of a point of the sphere ``S^{D-1}``): ``D - 1`` angles ``t`` give

    w_1 = prod_{k=1}^{D-1} cos t_k,    w_{k+1} = sin t_k prod_{j>k} cos t_j   (k = 1..D-1),

with ``t_1`` in ``(-pi, pi]`` and ``t_2, ..., t_{D-1}`` in ``(-pi/2, pi/2)``. The map covers the
sphere once (up to a null set); its surface-area element is

    dS = prod_{k=2}^{D-1} cos(t_k)^(k-1) dt,   log dS/dt = sum_{k=2}^{D-1} (k - 1) log cos t_k,

(the *last* angle carries the highest power: for ``D = 3``, ``t_2`` is the latitude and
``dS = cos t_2 dt_1 dt_2``; checked against ``sqrt(det(J^T J))`` of the autograd Jacobian in the
tests). A density on the sphere (w.r.t. surface area) times this factor is the density of the
angles; leaving it out, as the authors' Stan file does (the Jacobian line is commented out),
makes the implied prior uniform in the *angles*, whose density on the sphere is
``prod_k cos(t_k)^-(k-1)``: it diverges where some ``cos t_k`` vanishes (``k >= 2``), i.e. where
``w_1 = ... = w_k = 0``, most strongly at ``w_D = ±1`` (the last angle has the highest power).

To reach the angles from unconstrained reals, ``t_2..t_{D-1}`` use the bounded transform with
``(lo, hi) = (-pi/2, pi/2)``. The first angle wraps around at ``±pi``; bounding it too would put
a wall between two equal points of the circle, so (as Pourzanjani et al. do) it is the angle of
an auxiliary point ``p`` in the plane, ``t_1 = atan2(p_2, p_1)``, with a standard normal density
on ``p``: the angle of an isotropic 2-D Gaussian is uniform on ``(-pi, pi]`` and independent of
the radius, which the normal density keeps proper, and the unconstrained space has no boundary.
Stan's own ``unit_vector`` type uses the same idea in ``D`` dimensions: ``w = p / |p|`` for an
auxiliary ``p`` whose log density gets a standard normal ``-|p|^2 / 2`` term (Stan reference
manual, "Unit vector"), which makes ``w`` uniform on the sphere without any angles.
:func:`unit_vector_from_unconstrained` assembles the whole map with its log-density correction.

All functions act on the last axis and broadcast over leading (batch) axes.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "angle_from_point",
    "angles_from_unit_vector",
    "angles_log_abs_det_jacobian",
    "bounded_from_unconstrained",
    "bounded_log_abs_det_jacobian",
    "ordered_from_unconstrained",
    "ordered_log_abs_det_jacobian",
    "point_log_density",
    "unconstrained_from_bounded",
    "unconstrained_from_ordered",
    "unit_vector_from_angles",
    "unit_vector_from_unconstrained",
]

_UNIT_NORM_TOL = 1e-6


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


def bounded_from_unconstrained(y: Tensor, lo: float, hi: float) -> Tensor:
    """``x = lo + (hi - lo) * logistic(y)`` in ``(lo, hi)``, elementwise."""
    return lo + (hi - lo) * torch.sigmoid(y)


def unconstrained_from_bounded(x: Tensor, lo: float, hi: float) -> Tensor:
    """Inverse of :func:`bounded_from_unconstrained`: ``y = logit((x - lo) / (hi - lo))``.

    Raises:
        ValueError: if some element of ``x`` lies outside the open interval ``(lo, hi)``.
    """
    if bool(((x <= lo) | (x >= hi)).any()):
        raise ValueError(f"x must lie in the open interval ({lo}, {hi})")
    return torch.logit((x - lo) / (hi - lo))


def bounded_log_abs_det_jacobian(y: Tensor, lo: float, hi: float) -> Tensor:
    """Elementwise ``log|dx/dy| = log(hi - lo) + log logistic(y) + log logistic(-y)``.

    Written with softplus, ``log logistic(y) = -softplus(-y)``, so it stays finite for large
    ``|y|``. Sum over the last axis for the log-determinant of a vector of bounded values.
    """
    return math.log(hi - lo) - F.softplus(-y) - F.softplus(y)


def unit_vector_from_angles(theta: Tensor) -> Tensor:
    """Unit vector ``(..., D)`` from ``D - 1`` angles ``(..., D-1)`` (module docstring's map).

    ``w_1 = prod_k cos t_k`` and ``w_{k+1} = sin t_k * tail_k`` with
    ``tail_k = prod_{j>k} cos t_j`` (an empty product is 1); ``D = 2`` gives ``(cos t, sin t)``.
    """
    cos, sin = torch.cos(theta), torch.sin(theta)
    # prod_{j>=k} cos t_j, then shifted by one: tail_k = prod_{j>k} cos t_j
    from_k = torch.flip(torch.cumprod(torch.flip(cos, [-1]), dim=-1), [-1])
    tail = torch.cat([from_k[..., 1:], torch.ones_like(cos[..., :1])], dim=-1)
    return torch.cat([from_k[..., :1], sin * tail], dim=-1)


def angles_from_unit_vector(w: Tensor) -> Tensor:
    """Inverse of :func:`unit_vector_from_angles`.

    ``t_1 = atan2(w_2, w_1)`` and, for ``k >= 2``, ``t_k = atan2(w_{k+1}, |w_{1..k}|)``, since
    ``|w_{1..k}| = cos t_k prod_{j>k} cos t_j`` and ``w_{k+1} = sin t_k prod_{j>k} cos t_j``
    with a positive common factor. So ``t_1`` is in ``(-pi, pi]`` and the others in
    ``[-pi/2, pi/2]`` (the end points only where the chart is singular).

    Raises:
        ValueError: if some ``|w|`` differs from 1 by more than ``1e-6``.
    """
    norm = torch.linalg.vector_norm(w, dim=-1)
    if bool(((norm - 1).abs() > _UNIT_NORM_TOL).any()):
        raise ValueError("w must have unit norm along its last axis")
    head_norms = torch.sqrt(torch.cumsum(w[..., :-1] ** 2, dim=-1))  # |w_{1..k}|, k = 1..D-1
    first = torch.atan2(w[..., 1:2], w[..., :1])
    rest = torch.atan2(w[..., 2:], head_norms[..., 1:])
    return torch.cat([first, rest], dim=-1)


def angles_log_abs_det_jacobian(theta: Tensor) -> Tensor:
    """Log surface-area element ``sum_{k=2}^{D-1} (k - 1) log cos t_k`` at the angles.

    ``exp`` of it is ``sqrt(det(J^T J))`` for the ``D x (D-1)`` Jacobian ``J`` of
    :func:`unit_vector_from_angles`; it is 0 for ``D = 2``.
    """
    powers = torch.arange(1, theta.shape[-1], dtype=theta.dtype, device=theta.device)
    return (powers * torch.log(torch.cos(theta[..., 1:]))).sum(dim=-1)


def angle_from_point(p: Tensor) -> Tensor:
    """Angle in ``(-pi, pi]`` of a point ``p`` ``(..., 2)`` of the plane: ``atan2(p_2, p_1)``."""
    return torch.atan2(p[..., 1], p[..., 0])


def point_log_density(p: Tensor) -> Tensor:
    """Standard 2-D normal log density of the auxiliary point: ``-|p|^2 / 2 - log(2 pi)``."""
    return -0.5 * (p**2).sum(dim=-1) - math.log(2 * math.pi)


def unit_vector_from_unconstrained(
    p2: Tensor, y_rest: Tensor, include_angle_jacobian: bool = True
) -> tuple[Tensor, Tensor]:
    """Unit vector from an auxiliary planar point and ``D - 2`` unconstrained reals.

    ``t_1 = atan2(p2)``, ``t_k = bounded(y_{k}, -pi/2, pi/2)`` for ``k = 2..D-1``, and
    ``w = unit_vector_from_angles(t)``. The returned correction is

        log N(p2; 0, I_2) + sum_k log|dt_k/dy_k| + sum_{k=2}^{D-1} (k - 1) log cos t_k,

    so a log density over ``(p2, y_rest)`` equal to ``log p_S(w) + correction`` (``p_S`` a
    density on the sphere w.r.t. surface area; nothing at all for a uniform prior) implies
    exactly ``p_S`` on ``w``: the normal term makes ``t_1`` uniform (and the radius proper), the
    bounded terms move the density from ``y`` to the angles, the last term from the angles to
    the sphere.

    Args:
        p2: auxiliary point ``(..., 2)``.
        y_rest: unconstrained reals ``(..., D-2)`` (``D - 2 = 0`` allowed: then ``w`` is 2-D).
        include_angle_jacobian: ``False`` drops the last term, as in Pourzanjani et al.'s Stan
            file; the implied prior is then uniform in the angles, not on the sphere.

    Returns:
        ``(w, correction)`` of shapes ``(..., D)`` and ``(...)``.
    """
    half_pi = math.pi / 2
    rest = bounded_from_unconstrained(y_rest, -half_pi, half_pi)
    theta = torch.cat([angle_from_point(p2).unsqueeze(-1), rest], dim=-1)
    correction = point_log_density(p2) + bounded_log_abs_det_jacobian(
        y_rest, -half_pi, half_pi
    ).sum(dim=-1)
    if include_angle_jacobian:
        correction = correction + angles_log_abs_det_jacobian(theta)
    return unit_vector_from_angles(theta), correction

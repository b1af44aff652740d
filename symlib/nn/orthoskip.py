"""Orthogonal skip connections that break the permutation symmetry (Kurle et al., 2021, Sec. 3).

Each layer of the pre-activation MLP (:mod:`symlib.nn.mlp`) gets a *fixed* skip matrix:

    h_l = O_l h_{l-1} + W_l f_l(h_{l-1}) + b_l          (Kurle et al., Eq. 7)

with ``O_l`` a random semi-orthogonal ``N_l x N_{l-1}`` matrix (orthonormal columns when
``N_l >= N_{l-1}``, orthonormal rows otherwise). ``O_l`` is data, not a parameter: it is drawn
once from a seeded generator and never trained, so permuting the units of hidden layer ``l``
would also have to permute the rows of ``O_l`` (and the columns of ``O_{l+1}``), which it cannot.
The likelihood then no longer has the factorial number of equivalent modes (Eq. 8).

Placement (:class:`SkipPlacement`). The paper says "each layer" and motivates *semi*-orthogonal
matrices by layers of unequal width. In the chapter's 1-32x5-1 network only the first (32 x 1)
and last (1 x 32) layers are non-square, so the paper must put skips there too: the default is
``ALL`` (layers ``1..L+1``). ``O_1`` alone already breaks the symmetry of hidden layer 1 (the
prior N(0, I) on ``W_1`` is not invariant under ``W_1 -> P(O_1 + W_1) - O_1``) and ``O_{L+1}``
makes the output read the pre-activations ``h_L`` linearly, so every hidden layer is pinned
from both sides.

``O`` is drawn Haar-uniformly: QR of a Gaussian matrix with the signs of ``diag(R)`` folded
into ``Q`` (Mezzadri, 2007), so the distribution does not depend on LAPACK's sign convention.
"""

from __future__ import annotations

import enum

import torch
from torch import Tensor

from symlib.nn.mlp import MLPSpec, Params, activation_fn

__all__ = [
    "SkipPlacement",
    "orthoskip_forward",
    "semi_orthogonal",
    "skip_layers",
    "skip_matrices",
]


class SkipPlacement(str, enum.Enum):
    """Which layers ``l`` (1 = input->hidden 1, L+1 = hidden L->output) get a fixed ``O_l``."""

    ALL = "all"
    """Every layer ``1..L+1``, including the non-square first and last ones (the default)."""
    HIDDEN = "hidden"
    """Layers ``1..L`` (every layer whose output is a hidden layer); the output layer has none."""
    INTERIOR = "interior"
    """Hidden-to-hidden layers ``2..L`` only."""


def skip_layers(spec: MLPSpec, placement: SkipPlacement | str = SkipPlacement.ALL) -> tuple[int, ...]:
    """The layer indices ``l`` that get a skip matrix under ``placement``."""
    n_hidden = len(spec.hidden_widths)
    placement = SkipPlacement(placement)
    if placement is SkipPlacement.ALL:
        return tuple(range(1, n_hidden + 2))
    if placement is SkipPlacement.HIDDEN:
        return tuple(range(1, n_hidden + 1))
    return tuple(range(2, n_hidden + 1))


def semi_orthogonal(
    n_out: int, n_in: int, generator: torch.Generator, *, dtype: torch.dtype = torch.float32
) -> Tensor:
    """A Haar-random ``(n_out, n_in)`` matrix with orthonormal columns (``n_out >= n_in``) or rows.

    Args:
        n_out, n_in: the shape.
        generator: the only source of randomness (CPU generator).
        dtype: dtype of the result (computed in float64).

    Returns:
        ``O`` with ``O^T O = I_{n_in}`` if ``n_out >= n_in``, else ``O O^T = I_{n_out}``.
    """
    big, small = max(n_out, n_in), min(n_out, n_in)
    gauss = torch.randn(big, small, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(gauss, mode="reduced")
    signs = torch.sign(torch.diagonal(r))
    q = q * torch.where(signs == 0, torch.ones_like(signs), signs)  # Haar, not LAPACK's convention
    return (q if n_out >= n_in else q.T).contiguous().to(dtype)


def skip_matrices(
    spec: MLPSpec,
    generator: torch.Generator,
    *,
    placement: SkipPlacement | str = SkipPlacement.ALL,
    dtype: torch.dtype = torch.float32,
) -> dict[str, Tensor]:
    """Fixed skip matrices ``{"O{l}": (N_l, N_{l-1})}`` for the layers chosen by ``placement``.

    Drawn in layer order from ``generator``; the same generator state gives the same matrices.
    """
    return {
        f"O{l}": semi_orthogonal(spec.widths[l], spec.widths[l - 1], generator, dtype=dtype)
        for l in skip_layers(spec, placement)
    }


def orthoskip_forward(
    params: Params, x: Tensor, spec: MLPSpec, skips: dict[str, Tensor]
) -> Tensor:
    """Output ``h_{L+1}`` of the orthogonal-skip MLP, ``h_l = O_l h_{l-1} + W_l f_l(h_{l-1}) + b_l``.

    Layers without a key ``"O{l}"`` in ``skips`` are plain pre-activation layers, so
    ``orthoskip_forward(params, x, spec, {}) == mlp_forward(params, x, spec)``. Parameters may
    carry leading batch axes (as for :func:`symlib.nn.mlp.mlp_forward`); the skip matrices may
    be shared (2-D) or batched like the weights.
    """
    f = activation_fn(spec.activation)
    h = x
    for l in range(1, spec.n_layers + 1):
        inp = h if l == 1 else f(h)
        out = inp @ params[f"W{l}"].transpose(-1, -2) + params[f"b{l}"].unsqueeze(-2)
        skip = skips.get(f"O{l}")
        if skip is not None:
            out = out + h @ skip.transpose(-1, -2)
        h = out
    return h

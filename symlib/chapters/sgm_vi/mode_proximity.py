"""How close is the nearest equivalent mode? (Gelberg et al., Theorem 3.1)

For a one-hidden-layer MLP (input ``d_i``, width ``d_h``, output ``d_o``) write each hidden
unit as the vector of everything a permutation moves with it,
``v_i = (W1[i, :], b1[i], W2[:, i])`` (``d_i + 1 + d_o`` numbers). A permutation ``pi`` maps
unit ``i`` to ``pi(i)``, so ``|w - g w|^2 = sum_i |v_i - v_pi(i)|^2``. Every non-identity
``pi`` moves at least two units, each by at least the smallest pairwise distance, and the
transposition of the closest pair attains it; hence exactly

    min_{g != e} |w - g w| = sqrt(2) min_{i != j} |v_i - v_j|.

Theorem 3.1 of Gelberg et al. bounds the relative distance for every ``w``:

    min_{g != e} |w - g w| / |w| <= 2 (d_i + d_o + 1 + 1/d_h) / log(d_h / 2).

An elementary argument gives a bound that does not grow with ``d_i + d_o``: swap the two units
of smallest norm; their squared norms sum to at most ``2|w|^2 / d_h``, and
``|v_i - v_j|^2 <= 2(|v_i|^2 + |v_j|^2)``, so

    min_{g != e} |w - g w| / |w| <= sqrt(2 * 2 * 2 / d_h) = sqrt(8 / d_h).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from symlib.nn.mlp import MLPSpec, Params

__all__ = ["elementary_bound", "nearest_copy_distance", "theorem31_bound", "unit_vectors"]


def unit_vectors(params: Params, spec: MLPSpec) -> Tensor:
    """``(*B, d_h, d_i + 1 + d_o)``: per hidden unit, its incoming weights, bias and outgoing weights.

    Raises:
        ValueError: unless the network has exactly one hidden layer.
    """
    if len(spec.hidden_widths) != 1:
        raise ValueError(f"one hidden layer expected, got hidden widths {spec.hidden_widths}")
    return torch.cat([params["W1"], params["b1"].unsqueeze(-1), params["W2"].transpose(-1, -2)], -1)


def nearest_copy_distance(params: Params, spec: MLPSpec, *, relative: bool = True,
                          chunk: int = 1024) -> Tensor:
    """``min_{g != e} |w - g w|`` (divided by ``|w|`` if ``relative``), of the batch shape.

    Exact (module docstring): ``sqrt(2)`` times the smallest distance between two units'
    vectors, found in row chunks so wide layers fit in memory.
    """
    v = unit_vectors(params, spec).double()
    n = v.shape[-2]
    if n < 2:
        raise ValueError("a layer with one unit has no non-identity permutation")
    best = torch.full(v.shape[:-2], math.inf, dtype=v.dtype)
    for lo in range(0, n, chunk):
        d = torch.cdist(v[..., lo: lo + chunk, :], v)                       # (*B, c, n)
        rows = torch.arange(lo, min(lo + chunk, n))
        d[..., torch.arange(len(rows)), rows] = math.inf                      # exclude i == j
        best = torch.minimum(best, d.amin(dim=(-1, -2)))
    dist = math.sqrt(2.0) * best
    if relative:
        norm = torch.sqrt(sum(p.double().square().flatten(start_dim=p.ndim - len(s)).sum(-1)
                              for p, s in ((params[k], spec.shapes()[k]) for k in spec.shapes())))
        dist = dist / norm
    return dist


def theorem31_bound(d_in: int, d_out: int, width) -> Tensor:
    """Gelberg et al.'s Theorem 3.1: ``2 (d_i + d_o + 1 + 1/d_h) / log(d_h / 2)`` (inf for ``d_h <= 2``)."""
    d_h = torch.as_tensor(width, dtype=torch.float64)
    bound = 2.0 * (d_in + d_out + 1.0 + 1.0 / d_h) / torch.log(d_h / 2.0)
    return torch.where(d_h > 2, bound, torch.full_like(d_h, math.inf))


def elementary_bound(width) -> Tensor:
    """``sqrt(8 / d_h)``: swap the two smallest units (module docstring)."""
    return torch.sqrt(8.0 / torch.as_tensor(width, dtype=torch.float64))

"""Metrics on predictive distributions and loss curves, as pure functions of tensors.

Predictive distributions are class-probability tensors of shape ``(n, K)`` (one row per test
point); a Monte Carlo predictive is the average of per-sample softmaxes,
``p(y | x) = (1/S) sum_s softmax(f(x; w_s))`` (:func:`predictive_probs`).

Agreement and total variation compare a method's predictive ``p`` with a reference ``p_ref``
(HMC's, in Xiao et al. 2023, Eqs. 1-2, following Wilson et al. 2022):

    Agree(p, p_ref) = (1/n) sum_i 1[argmax_y p(y | x_i) = argmax_y p_ref(y | x_i)],
    TV(p, p_ref)    = (1/n) sum_i (1/2) sum_y |p(y | x_i) - p_ref(y | x_i)|.

The loss barrier on a linear path between two networks (Frankle et al. 2020) is
``max_lambda L(W_lambda) - (L(W_0) + L(W_1)) / 2`` (:func:`loss_barrier`).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = [
    "accuracy",
    "agreement",
    "loss_barrier",
    "mean_cross_entropy",
    "predictive_probs",
    "total_variation",
]


def predictive_probs(logits: Tensor, *, dim: int = 0) -> Tensor:
    """Monte Carlo predictive: the mean over ``dim`` (samples) of ``softmax(logits)``.

    Args:
        logits: e.g. ``(S, n, K)`` network outputs of ``S`` weight samples.
        dim: the sample axis.
    """
    return torch.softmax(logits, dim=-1).mean(dim)


def accuracy(probs: Tensor, y: Tensor) -> float:
    """Share of rows whose argmax equals the label (``probs`` may also be logits)."""
    return (probs.argmax(-1) == y).double().mean().item()


def agreement(p: Tensor, p_ref: Tensor) -> float:
    """Share of inputs where ``p`` and ``p_ref`` predict the same class (Xiao et al., Eq. 1)."""
    if p.shape != p_ref.shape:
        raise ValueError(f"shapes differ: {tuple(p.shape)} vs {tuple(p_ref.shape)}")
    return (p.argmax(-1) == p_ref.argmax(-1)).double().mean().item()


def total_variation(p: Tensor, p_ref: Tensor) -> float:
    """Mean over inputs of ``1/2 sum_y |p(y|x) - p_ref(y|x)|`` (Xiao et al., Eq. 2), in [0, 1]."""
    if p.shape != p_ref.shape:
        raise ValueError(f"shapes differ: {tuple(p.shape)} vs {tuple(p_ref.shape)}")
    return (0.5 * (p.double() - p_ref.double()).abs().sum(-1)).mean().item()


def mean_cross_entropy(logits: Tensor, y: Tensor) -> Tensor:
    """Mean cross-entropy over the data axis, for logits ``(..., n, K)``; returns shape ``(...)``."""
    logp = torch.log_softmax(logits, dim=-1)
    picked = torch.take_along_dim(logp, y.reshape((1,) * (logits.ndim - 2) + (-1, 1)), dim=-1)
    return -picked.squeeze(-1).mean(-1)


def loss_barrier(path_losses) -> float:
    """``max_lambda L(lambda) - (L(0) + L(1)) / 2`` for losses on a grid from lambda 0 to 1.

    The first and last entries must be the end points. The barrier is >= 0 only if the end
    points are no higher than the path's maximum, which they always are (they lie on it); it is
    0 for a path whose maximum is at an end point with both ends equal.
    """
    losses = torch.as_tensor(path_losses, dtype=torch.float64)
    if losses.ndim != 1 or len(losses) < 2:
        raise ValueError("need a 1-D sequence of at least two losses (end points included)")
    return (losses.max() - 0.5 * (losses[0] + losses[-1])).item()

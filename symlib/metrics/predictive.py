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
    "aupr",
    "brier_score",
    "expected_calibration_error",
    "fpr_at_95_tpr",
    "loss_barrier",
    "mean_cross_entropy",
    "mutual_information",
    "predictive_entropy",
    "predictive_probs",
    "regression_total_variation",
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


# --------------------------------------------------------------------------- calibration, OOD, MI
# Metrics of Laurent et al. (2024), Table 1: ECE, Brier, AUPR and FPR95 (OOD detection), and the
# mean mutual information in and out of distribution (IDMI, OODMI).


def expected_calibration_error(probs: Tensor, y: Tensor, n_bins: int = 15) -> float:
    """Expected calibration error with equal-width confidence bins (Guo et al. 2017, Eq. 3).

    ``ECE = sum_b (|B_b| / n) |acc(B_b) - conf(B_b)|``, where the confidence of a point is its
    largest class probability, the prediction its argmax, and bin ``b`` holds the confidences in
    ``((b - 1) / n_bins, b / n_bins]`` (empty bins contribute nothing). In ``[0, 1]``.

    Args:
        probs: ``(n, K)`` predictive probabilities.
        y: ``(n,)`` integer labels.
        n_bins: number of bins on ``[0, 1]``.
    """
    probs = probs.detach().to(torch.float64)
    conf, pred = probs.max(-1)
    correct = (pred == y.to(pred.device)).to(torch.float64)
    inner = torch.linspace(0.0, 1.0, n_bins + 1, dtype=torch.float64, device=probs.device)[1:-1]
    idx = torch.bucketize(conf, inner, right=False)  # lower edge exclusive, upper inclusive
    count = torch.zeros(n_bins, dtype=torch.float64, device=probs.device)
    count.index_add_(0, idx, torch.ones_like(conf))
    gap = torch.zeros_like(count).index_add_(0, idx, correct - conf)  # sum of (acc - conf)
    return (gap.abs().sum() / len(conf)).item()


def brier_score(probs: Tensor, y: Tensor) -> float:
    """Multi-class Brier score: mean over points of ``sum_k (p_k - 1[y = k])^2``, in ``[0, 2]``."""
    probs = probs.detach().to(torch.float64)
    onehot = torch.nn.functional.one_hot(y.long().to(probs.device), probs.shape[-1])
    return (probs - onehot).square().sum(-1).mean().item()


def _ood_curve(scores_in: Tensor, scores_out: Tensor) -> tuple[Tensor, Tensor]:
    """True and false positive counts at each distinct threshold, OOD points positive.

    Thresholds run from the highest score down; tied scores share one threshold (as in
    ``sklearn.metrics.roc_curve`` / ``precision_recall_curve``).
    """
    s_in = scores_in.detach().reshape(-1).to(torch.float64)
    s_out = scores_out.detach().reshape(-1).to(torch.float64).to(s_in.device)
    if len(s_in) == 0 or len(s_out) == 0:
        raise ValueError("need at least one in-distribution and one OOD score")
    scores = torch.cat([s_out, s_in])
    labels = torch.cat([torch.ones_like(s_out), torch.zeros_like(s_in)])
    scores, order = torch.sort(scores, descending=True, stable=True)
    labels = labels[order]
    last = torch.ones_like(scores, dtype=torch.bool)  # last position of each group of ties
    last[:-1] = scores[1:] != scores[:-1]
    tps = labels.cumsum(0)[last]
    fps = (1.0 - labels).cumsum(0)[last]
    return tps, fps


def aupr(scores_in: Tensor, scores_out: Tensor) -> float:
    """Area under the precision-recall curve for OOD detection, OOD as the positive class.

    Scores must be higher for points judged more likely OOD (e.g. predictive entropy, ``1 - max
    p``, mutual information). The area is the average precision
    ``sum_k (R_k - R_{k-1}) P_k`` over distinct thresholds (the step-wise estimate of
    ``sklearn.metrics.average_precision_score``, no interpolation). In ``[0, 1]``.

    Args:
        scores_in: scores of in-distribution test points (negatives).
        scores_out: scores of OOD points (positives).
    """
    tps, fps = _ood_curve(scores_in, scores_out)
    precision = tps / (tps + fps)
    recall = tps / tps[-1]
    d_recall = torch.diff(recall, prepend=recall.new_zeros(1))
    return (d_recall * precision).sum().item()


def fpr_at_95_tpr(scores_in: Tensor, scores_out: Tensor) -> float:
    """False positive rate at 95% true positive rate, OOD as the positive class (FPR95).

    The share of in-distribution points flagged as OOD at the highest threshold that flags at
    least 95% of the OOD points, i.e. ``min {FPR(t) : TPR(t) >= 0.95}`` over the thresholds of
    the ROC curve. Scores are higher for points judged more OOD (as in :func:`aupr`). Lower is
    better; in ``[0, 1]``.
    """
    tps, fps = _ood_curve(scores_in, scores_out)
    tpr, fpr = tps / tps[-1], fps / fps[-1]
    first = int(torch.nonzero(tpr >= 0.95)[0, 0])
    return fpr[first].item()


def predictive_entropy(probs: Tensor) -> Tensor:
    """Entropy ``-sum_k p_k log p_k`` (nats) over the last axis, with ``0 log 0 = 0``."""
    return torch.special.entr(probs.to(torch.float64)).sum(-1)


def mutual_information(sample_probs: Tensor) -> Tensor:
    """Per-point mutual information between label and weights (BALD; Houlsby et al. 2011).

    ``MI(x) = H[(1/S) sum_s p_s(y | x)] - (1/S) sum_s H[p_s(y | x)]``: the entropy of the mean
    predictive minus the mean entropy of the per-sample predictives, in nats. By Jensen it lies
    in ``[0, log K]``; rounding below 0 is clipped to 0.

    Args:
        sample_probs: ``(S, N, K)`` class probabilities of ``S`` weight samples.

    Returns:
        ``(N,)`` float64 mutual information per point.
    """
    p = sample_probs.to(torch.float64)
    mi = predictive_entropy(p.mean(0)) - predictive_entropy(p).mean(0)
    return mi.clamp_min(0.0)


def regression_total_variation(f: Tensor, f_ref: Tensor, noise_sd: float, *, n_grid: int = 512,
                               width: float = 6.0) -> float:
    """Mean over inputs of the total variation between two regression predictives.

    Each predictive is the equal-weight Gaussian mixture ``p(y | x) = (1/S) sum_s N(y; f_s(x),
    sigma^2)`` of its Monte Carlo draws, so TV is the regression analogue of
    :func:`total_variation`: ``(1/n) sum_i (1/2) int |p(y | x_i) - p_ref(y | x_i)| dy``, in
    ``[0, 1]``. The integral is the trapezoidal rule on ``n_grid`` points spanning both mixtures'
    draws ``+- width * sigma`` (outside, both densities are below ``exp(-width^2 / 2)``).

    Args:
        f, f_ref: draws of the network output, ``(S, n)`` and ``(S_ref, n)``.
        noise_sd: ``sigma``, the shared observation noise.
        n_grid: integration points per input.
        width: grid margin in units of ``sigma``.
    """
    f, f_ref = f.detach().to(torch.float64), f_ref.detach().to(torch.float64).to(f.device)
    if f.ndim != 2 or f_ref.ndim != 2 or f.shape[1] != f_ref.shape[1]:
        raise ValueError(f"need (S, n) draws at the same n inputs; got {tuple(f.shape)} and {tuple(f_ref.shape)}")
    t = torch.linspace(0.0, 1.0, n_grid, dtype=torch.float64, device=f.device)
    norm = noise_sd * (2.0 * torch.pi) ** 0.5
    total = 0.0
    chunk = max(1, 2**24 // (n_grid * (len(f) + len(f_ref))))  # inputs per step: bounded memory
    for lo_i in range(0, f.shape[1], chunk):
        a, b = f[:, lo_i:lo_i + chunk], f_ref[:, lo_i:lo_i + chunk]
        lo = torch.minimum(a.min(0).values, b.min(0).values) - width * noise_sd
        hi = torch.maximum(a.max(0).values, b.max(0).values) + width * noise_sd
        grid = lo[:, None] + (hi - lo)[:, None] * t                             # (m, G)

        def density(draws: Tensor, grid=grid) -> Tensor:                         # (m, G)
            z = (grid[None] - draws[:, :, None]) / noise_sd                     # (S, m, G)
            return torch.exp(-0.5 * z.square()).mean(0) / norm

        gap = (density(a) - density(b)).abs()
        total += 0.5 * torch.trapezoid(gap, grid, dim=-1).sum().item()
    return total / f.shape[1]

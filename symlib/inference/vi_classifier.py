"""Mean-field Gaussian VI for MLP *classifiers* (the VI column of Xiao et al. 2023, Table 1).

The variational family, the local reparameterisation and the closed-form KL to the ``N(0, 1)``
prior are those of :mod:`symlib.inference.mfvi` (which fits regression models); this module
adds the categorical likelihood and minibatch training. Per minibatch ``b`` of size ``B`` out of
``N`` points, Adam minimises the negative ELBO per data point,

    loss = -(N/B) sum_{i in b} E_q[log softmax(f(x_i; w))_{y_i}] / N + KL[q || p] / N,

with one local-reparameterisation sample of the outputs per point (no KL annealing). Its
predictive and weight-space summary go through :mod:`symlib.inference.compact`, like every other method's.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor
from tqdm import tqdm

from symlib.inference.mfvi import BayesMLP, MeanField, kl_divergence, sample_outputs

__all__ = ["fit_classifier"]


def fit_classifier(
    model: BayesMLP,
    q: MeanField,
    x: Tensor,
    y: Tensor,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    generator: torch.Generator,
    progress: bool = True,
    desc: str = "VI",
) -> tuple[MeanField, dict[str, np.ndarray]]:
    """Fit ``q`` (unbatched, or with leading batch axes: independent models) by minibatch Adam.

    Args:
        model: the Bayesian MLP (plain: no skips, no ordered biases here).
        q: initial state (not modified), e.g. ``mean_field_from_params(model, init, init_sd=0.05)``.
        x, y: training inputs ``(N, N_0)`` and labels ``(N,)``.
        epochs, batch_size, lr: Adam settings.
        generator: shuffles and Monte Carlo noise (on ``x``'s device).

    Returns:
        ``(q, history)`` with ``history["loss"]`` the mean loss per epoch.
    """
    n = x.shape[0]
    mean = {k: v.detach().clone().requires_grad_(True) for k, v in q.mean.items()}
    log_sd = {k: v.detach().clone().requires_grad_(True) for k, v in q.log_sd.items()}
    opt = torch.optim.Adam(list(mean.values()) + list(log_sd.values()), lr=lr)
    state = MeanField(mean, log_sd)
    losses = []
    for _ in tqdm(range(epochs), desc=desc, disable=not progress, mininterval=2.0):
        order = torch.randperm(n, generator=generator, device=generator.device).to(x.device)
        total = 0.0
        for lo in range(0, n, batch_size):
            idx = order[lo: lo + batch_size]
            out = sample_outputs(state, model, x[idx], 1, generator)[..., 0, :, :]
            logp = torch.log_softmax(out, dim=-1)
            picked = torch.take_along_dim(logp, y[idx].reshape(-1, 1).expand(*logp.shape[:-1], 1), -1)
            expected = picked.squeeze(-1).sum(-1) * (n / len(idx))
            loss = (-(expected - kl_divergence(state, model)) / n).sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        losses.append(total / n)
    final = MeanField({k: v.detach() for k, v in mean.items()}, {k: v.detach() for k, v in log_sd.items()})
    return final, {"loss": np.asarray(losses)}

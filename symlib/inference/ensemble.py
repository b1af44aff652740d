"""Deep ensembles of MAP networks, trained as one batched (vmapped) computation.

Each member ``m`` minimises its own minibatch estimate of the negative log posterior per data
point (Lakshminarayanan et al. 2017; Xiao et al. 2023 use the ``N(0, 1)`` prior),

    loss_m = (1/B) sum_{i in batch_m} CE(f(x_i; w_m), y_i) + ||w_m||^2 / (2 s^2 N),

with ``N`` training points and prior sd ``s`` (``prior_sd=None``: no prior, plain maximum
likelihood, as in the NoT experiments). The members' losses are summed into one scalar; since
they share no parameters and Adam / SGD act element-wise, that is exactly independent training,
but every step is one batched forward/backward pass (``torch.func.vmap`` over the member axis)
instead of a Python loop over members. Every member sees its own shuffle of the data.

Public: :class:`Optimiser`, :class:`TrainResult`, :func:`init_ensemble`, :func:`ensemble_forward`,
:func:`train_map`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor
from tqdm import tqdm

from symlib.nn.mlp import MLPSpec, Params, init_mlp, mlp_forward

__all__ = ["Optimiser", "TrainResult", "ensemble_forward", "init_ensemble", "train_map"]


class Optimiser(str, enum.Enum):
    """Optimisers for :func:`train_map`."""

    ADAM = "adam"
    """Adam with default betas (the ensembles of Xiao et al.)."""
    SGD = "sgd"
    """SGD with (heavy-ball) momentum (the NoT experiments of Xiao et al.'s code)."""


class TrainResult(NamedTuple):
    params: Params
    """Trained members, every tensor with a leading member axis ``M`` (detached)."""
    history: dict[str, np.ndarray]
    """``epoch`` (E,), ``loss`` (E, M): mean training loss of each member per epoch."""


def init_ensemble(spec: MLPSpec, n_members: int, generator: torch.Generator, dtype=torch.float32) -> Params:
    """``n_members`` independent :func:`symlib.nn.mlp.init_mlp` draws, stacked on a leading axis."""
    members = [init_mlp(spec, generator, dtype) for _ in range(n_members)]
    return {k: torch.stack([m[k] for m in members]) for k in members[0]}


def ensemble_forward(params: Params, x: Tensor, spec: MLPSpec, *, shared_input: bool = True) -> Tensor:
    """Outputs of every member: ``(M, n, K)`` for ``x`` ``(n, N_0)`` (or ``(M, n, N_0)``)."""
    return torch.func.vmap(mlp_forward, in_dims=(0, None if shared_input else 0, None))(params, x, spec)


def train_map(
    params: Params,
    x: Tensor,
    y: Tensor,
    spec: MLPSpec,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    generator: torch.Generator,
    optimiser: Optimiser | str = Optimiser.ADAM,
    momentum: float = 0.9,
    prior_sd: float | None = 1.0,
    on_epoch: Callable[[int, Params], None] | None = None,
    progress: bool = True,
    desc: str = "MAP",
) -> TrainResult:
    """Train every member of ``params`` (leading axis ``M``) by minibatch MAP / ML (module docstring).

    Args:
        params: initial members, leading axis ``M`` (not modified).
        x, y: training inputs ``(N, N_0)`` and labels ``(N,)``, on the params' device.
        epochs, batch_size, lr: the usual; the last batch of an epoch may be smaller.
        generator: the members' data shuffles (CPU generator).
        optimiser: :class:`Optimiser`.
        momentum: SGD momentum (ignored by Adam).
        prior_sd: sd of the ``N(0, s^2)`` prior on every parameter, or ``None`` for none.
        on_epoch: called as ``on_epoch(epoch, params)`` with detached params after every epoch
            (``epoch`` = 1..E) and once before training (``epoch`` = 0), e.g. to record checkpoints.
        progress: plain ``tqdm`` bar over epochs.
    """
    optimiser = Optimiser(optimiser)
    n = x.shape[0]
    leaves = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
    n_members = next(iter(leaves.values())).shape[0]
    if optimiser is Optimiser.ADAM:
        opt = torch.optim.Adam(leaves.values(), lr=lr)
    else:
        opt = torch.optim.SGD(leaves.values(), lr=lr, momentum=momentum)
    forward = torch.func.vmap(mlp_forward, in_dims=(0, 0, None))
    if on_epoch is not None:
        on_epoch(0, {k: v.detach() for k, v in leaves.items()})
    losses = []
    for epoch in tqdm(range(1, epochs + 1), desc=desc, disable=not progress, mininterval=2.0):
        order = torch.argsort(torch.rand(n_members, n, generator=generator), dim=1).to(x.device)
        total = torch.zeros(n_members, dtype=torch.float64, device=x.device)
        for lo in range(0, n, batch_size):
            idx = order[:, lo: lo + batch_size]
            logits = forward(leaves, x[idx], spec)
            k = logits.shape[-1]
            ce = torch.nn.functional.cross_entropy(
                logits.reshape(-1, k), y[idx].reshape(-1), reduction="none").view(n_members, -1).mean(1)
            loss = ce
            if prior_sd is not None:
                sq = sum(v.square().flatten(1).sum(1) for v in leaves.values())
                loss = ce + 0.5 * sq / (prior_sd**2 * n)
            opt.zero_grad(set_to_none=True)
            loss.sum().backward()
            opt.step()
            total += loss.detach().to(torch.float64) * idx.shape[1]
        losses.append((total / n).cpu().numpy())
        if on_epoch is not None:
            on_epoch(epoch, {k: v.detach() for k, v in leaves.items()})
    history = {"epoch": np.arange(1, epochs + 1), "loss": np.asarray(losses).reshape(epochs, n_members)}
    return TrainResult({k: v.detach() for k, v in leaves.items()}, history)

"""Train many small networks at once: one ``torch.func.vmap``-ed SGD step for all of them.

Laurent et al. (2024) estimate posteriors from thousands of independently trained networks
(10,000 toy perceptrons, 1,000 OptuNets). Here every network has its own initialisation and
its own minibatch order, but all of them advance in one vectorised computation::

    g_m = grad_w loss(w_m; x[B_m], y[B_m]) + wd * w_m
    v_m <- momentum * v_m + g_m,      w_m <- w_m - lr_t * v_m          (PyTorch's SGD)

with ``lr_t`` halved (``gamma``) at each milestone epoch. Randomness is explicit: the shuffles
(and crops) come from the ``torch.Generator`` passed in; :func:`shuffles` is public so a test
can replay the same orders sequentially. A model can also supply all networks' losses in one
call (``batched_loss_fn``; OptuNet's uses grouped convolutions), which is several times
faster than ``vmap`` for convnets on a CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch
from torch.func import grad, vmap

from symlib.nn.mlp import Params

__all__ = ["RestartRule", "SGDConfig", "minibatches", "optimizer_state", "optimizer_step",
           "random_crop", "restart_seed", "shuffles", "train_batched", "train_with_restarts"]


@dataclass(frozen=True)
class SGDConfig:
    """Minibatch SGD, the same for every network.

    Attributes:
        lr: initial learning rate.
        epochs: passes over the data.
        batch_size: examples per step (the last, smaller batch of an epoch is dropped).
        weight_decay: L2 coefficient added to the gradient.
        momentum: heavy-ball momentum (0: plain SGD).
        milestones: epochs after which the learning rate is multiplied by ``gamma``.
        gamma: learning-rate factor at each milestone.
        crop_padding: if > 0, random crops of the original size from images zero-padded by this
            many pixels, drawn per network and example (Laurent et al.'s MNIST augmentation).
        optimizer: ``"sgd"`` (the update above) or ``"adam"`` (PyTorch's Adam with coupled
            L2 weight decay and betas ``(0.9, 0.999)``; ``momentum`` is then ignored). Adam
            trains OptuNet far faster, which the short CPU profiles need.
    """

    lr: float
    epochs: int
    batch_size: int
    weight_decay: float = 0.0
    momentum: float = 0.0
    milestones: tuple[int, ...] = ()
    gamma: float = 0.5
    crop_padding: int = 0
    optimizer: str = "sgd"

    def __post_init__(self):
        if self.optimizer not in ("sgd", "adam"):
            raise ValueError(f"optimizer must be 'sgd' or 'adam', not {self.optimizer!r}")


def shuffles(n_models: int, n: int, generator: torch.Generator) -> torch.Tensor:
    """One independent permutation of ``range(n)`` per network: ``(n_models, n)``, on the
    generator's device."""
    u = torch.rand(n_models, n, generator=generator, device=generator.device)
    return torch.argsort(u, dim=1)


def random_crop(x: torch.Tensor, padding: int, generator: torch.Generator) -> torch.Tensor:
    """Random crops of images ``x (..., C, H, W)`` after zero padding, one offset per image.

    The offsets are drawn on the generator's device (rows, then columns).
    """
    *lead, c, h, w = x.shape
    flat = x.reshape(-1, c, h, w)
    oy, ox = _crop_offsets(flat.shape[0], padding, generator, x.device)
    padded = torch.nn.functional.pad(flat, (padding,) * 4)
    out = _crop_windows(padded, h, w)[torch.arange(len(flat), device=x.device), :, oy, ox]
    return out.reshape(*lead, c, h, w)


def _crop_offsets(n: int, padding: int, generator: torch.Generator, device) -> tuple:
    """Row, then column offsets of ``n`` crops, drawn on the generator's device."""
    draw = {"generator": generator, "device": generator.device}
    oy = torch.randint(0, 2 * padding + 1, (n,), **draw).to(device)
    ox = torch.randint(0, 2 * padding + 1, (n,), **draw).to(device)
    return oy, ox


def _crop_windows(padded: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """All ``h x w`` windows of padded images ``(n, C, H', W')`` as a view
    ``(n, C, H' - h + 1, W' - w + 1, h, w)``: indexing it picks whole windows, several times
    faster than indexing every pixel."""
    return padded.unfold(2, h, 1).unfold(3, w, 1)


def minibatches(n_models: int, x: torch.Tensor, y: torch.Tensor, batch_size: int,
                generator: torch.Generator, *, crop_padding: int = 0, epochs: int | None = None):
    """Yield ``(epoch, xb, yb)``: each network's own minibatches, ``(n_models, batch_size, ...)``.

    Every epoch draws one :func:`shuffles` per network and drops the last, smaller batch; with
    ``crop_padding`` each batch is randomly cropped (as :func:`random_crop` of ``x[idx]``).
    ``epochs=None`` runs forever (the caller stops). The order of draws from ``generator`` is
    part of the contract: the tests replay it.
    """
    n = x.shape[0]
    if crop_padding:
        # padded once (a copy of the training set, 1.65x its size for MNIST): each crop is
        # then one window of it, picked in the same gather that selects the batch
        windows = _crop_windows(torch.nn.functional.pad(x, (crop_padding,) * 4), *x.shape[-2:])
    epoch = 0
    while epochs is None or epoch < epochs:
        order = shuffles(n_models, n, generator).to(x.device)
        for s in range(n // batch_size):
            idx = order[:, s * batch_size:(s + 1) * batch_size]
            if crop_padding:
                oy, ox = _crop_offsets(idx.numel(), crop_padding, generator, x.device)
                xb = windows[idx.flatten(), :, oy, ox].view(*idx.shape, *x.shape[1:])
            else:
                xb = x[idx]
            yield epoch, xb, y[idx]
        epoch += 1


def train_batched(
    loss_fn: Callable[[Params, torch.Tensor, torch.Tensor], torch.Tensor],
    params: Params,
    x: torch.Tensor,
    y: torch.Tensor,
    config: SGDConfig,
    generator: torch.Generator,
    *,
    on_step: Callable[[int, Params], None] | None = None,
    batched_loss_fn: Callable[[Params, torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
) -> Params:
    """Train ``M`` networks (a leading axis of size ``M`` on every tensor of ``params``).

    Runs on the device of ``params``, ``x``, ``y`` and ``generator`` (all on one device).

    Args:
        loss_fn: ``loss_fn(params_one_net, xb, yb) -> scalar``, mean loss of one network.
        params: batched initial parameters; not modified.
        x, y: the training set shared by all networks.
        config: the optimiser.
        generator: source of the shuffles (one :func:`shuffles` call per epoch) and crops.
        on_step: called as ``on_step(step, params)`` after every step (e.g. to record the
            sorting permutations during training, Laurent et al. Fig. 4).
        batched_loss_fn: optional faster form of ``vmap(loss_fn)``: all networks' losses
            ``(M,)`` from batched ``params`` and batches ``xb (M, B, ...)``, ``yb (M, B)``
            (e.g. :func:`symlib.convnets.optunet_cross_entropy_batched`). The gradient is then
            that of their sum, one backward pass for all networks; each network's loss depends
            on its own parameters only, so each still gets its own gradient.

    Returns:
        The trained batched parameters.
    """
    return _train(loss_fn, params, x, y, config, generator, on_step=on_step,
                  batched_loss_fn=batched_loss_fn)[0]


def _train(loss_fn, params, x, y, config, generator, *, on_step=None, batched_loss_fn=None,
           check=None, check_epoch=None, stop_on_failure=False):
    """:func:`train_batched`'s loop. With ``check``, ``check(params) -> bool (M,)`` (True: the
    network failed) is called once, when epoch ``check_epoch`` is over (before the next epoch's
    first step); with ``stop_on_failure`` a failure ends training at once.

    Returns ``(params, failed)``: ``failed`` is the check's mask, or None where it never ran
    (training ended at or before ``check_epoch`` epochs) or ``check`` is None.
    """
    params = {k: v.detach().clone() for k, v in params.items()}
    n_models = next(iter(params.values())).shape[0]
    state = optimizer_state(params)
    if batched_loss_fn is None:
        step_grad = vmap(grad(loss_fn), in_dims=(0, 0, 0))
    else:
        step_grad = partial(_summed_loss_grad, batched_loss_fn)
    lr, last_epoch, failed = config.lr, -1, None
    batches = minibatches(n_models, x, y, config.batch_size, generator,
                          crop_padding=config.crop_padding, epochs=config.epochs)
    for step, (epoch, xb, yb) in enumerate(batches, start=1):
        if epoch != last_epoch:
            last_epoch = epoch
            if check is not None and epoch == check_epoch:
                failed = check(params)
                if stop_on_failure and bool(failed.any()):
                    return params, failed
            if epoch in config.milestones:
                lr *= config.gamma
        params = optimizer_step(params, step_grad(params, xb, yb), state, config, lr)
        if on_step is not None:
            on_step(step, params)
    return params, failed


# --- the authors' restart rule --------------------------------------------------------------

_RESTART_STREAM = 1  # SeedSequence stream of the restarts' seeds


@dataclass(frozen=True)
class RestartRule:
    """Laurent et al.'s restart rule (the authors' training code): a network whose validation
    accuracy after epoch ``epoch`` is below ``threshold`` is trained again from the next seed.

    Attributes:
        x_val, y_val: the set the accuracy is measured on.
        logits_fn: ``logits_fn(batched_params, x) -> (M, N, classes)``.
        init_fn: ``init_fn(generator, n_models) -> batched params`` (on the generator's device).
        seed: the run's seed; restart ``r`` of network ``m`` draws everything (initialisation,
            shuffles, crops) from :func:`restart_seed` ``(seed, m, r)``.
        epoch: epochs trained before the check (3 in the authors' code). Training of at most
            this many epochs is never checked.
        threshold: the accuracy below which a network is restarted (0.15; chance is 0.10).
        max_restarts: restarts per network at most; a network still failing then is kept as it
            is (its count says so).
    """

    x_val: torch.Tensor
    y_val: torch.Tensor
    logits_fn: Callable[[Params, torch.Tensor], torch.Tensor]
    init_fn: Callable[[torch.Generator, int], Params]
    seed: int
    epoch: int = 3
    threshold: float = 0.15
    max_restarts: int = 20

    def failed(self, params: Params) -> torch.Tensor:
        """``(M,)`` True where a network's accuracy on the validation set is below threshold."""
        with torch.no_grad():
            logits = self.logits_fn(params, self.x_val)
        acc = (logits.argmax(-1) == self.y_val.to(logits.device)).double().mean(-1)
        return (acc < self.threshold).cpu()


def restart_seed(seed: int, model: int, restart: int) -> int:
    """The seed of restart ``restart`` (1, 2, ...) of network ``model`` in a run seeded ``seed``:
    network ``model``'s own sequence of next seeds, the same whichever other networks failed."""
    state = np.random.SeedSequence([seed, _RESTART_STREAM, model, restart]).generate_state(2)
    return int(state[0]) << 32 | int(state[1])


def train_with_restarts(
    loss_fn: Callable[[Params, torch.Tensor, torch.Tensor], torch.Tensor],
    params: Params,
    x: torch.Tensor,
    y: torch.Tensor,
    config: SGDConfig,
    generator: torch.Generator,
    rule: RestartRule,
    *,
    on_step: Callable[[int, Params], None] | None = None,
    on_restart_step: Callable[[int, int, Params], None] | None = None,
    batched_loss_fn: Callable[[Params, torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
) -> tuple[Params, torch.Tensor]:
    """:func:`train_batched` with the restart rule: only the failed networks are restarted.

    All ``M`` networks train together as in :func:`train_batched` (same draws from
    ``generator``, so a run where none fails is that of :func:`train_batched` exactly). After
    ``rule.epoch`` epochs each network is checked; a failed network ``m`` is then trained
    *alone*, from scratch, from a generator seeded :func:`restart_seed` ``(rule.seed, m, r)``
    for ``r = 1, 2, ...``, each try checked after ``rule.epoch`` epochs too, until one passes
    (or ``rule.max_restarts`` tries); that network replaces ``m``. A replacement is a single
    network trained from its seed, the same whatever else is in the batch: the single path
    (``M = 1``) and the batched one give the same replacement for the same ``(seed, m)``.

    Args:
        generator: draws of the first try of every network (as :func:`train_batched`).
        rule: the check and the seeds of the restarts.
        on_step: ``on_step(step, params)`` after every step of the batch (first tries).
        on_restart_step: ``on_restart_step(m, step, params_1)`` at the start (step 0, the
            initial parameters) and after every step of each restart of network ``m``
            (``params_1`` with a model axis of 1); a failed try's steps are reported too, and
            the next try starts again at step 0.

    Returns:
        The trained batched parameters and ``restarts (M,)``, how many times each network was
        restarted (0: its first try passed).
    """
    trained, failed = _train(loss_fn, params, x, y, config, generator, on_step=on_step,
                             batched_loss_fn=batched_loss_fn, check=rule.failed,
                             check_epoch=rule.epoch)
    n_models = next(iter(params.values())).shape[0]
    restarts = torch.zeros(n_models, dtype=torch.long)
    if failed is None:
        return trained, restarts
    device = next(iter(params.values())).device
    for m in torch.nonzero(failed).flatten().tolist():
        for r in range(1, rule.max_restarts + 1):
            restarts[m] = r
            gen = torch.Generator(device=generator.device).manual_seed(restart_seed(rule.seed, m, r))
            start = {k: v.to(device) for k, v in rule.init_fn(gen, 1).items()}
            hook = None if on_restart_step is None else partial(on_restart_step, m)
            if hook is not None:
                hook(0, start)
            # the last try is trained to the end whatever its check says
            one, again = _train(loss_fn, start, x, y, config, gen, on_step=hook,
                                batched_loss_fn=batched_loss_fn, check=rule.failed,
                                check_epoch=rule.epoch, stop_on_failure=r < rule.max_restarts)
            if not bool(again.any()):
                break
        for k in trained:
            trained[k][m] = one[k][0]
    return trained, restarts


def _summed_loss_grad(batched_loss_fn, params: Params, xb, yb) -> Params:
    """Gradient of the sum of all networks' losses: each network's own gradient."""
    leaves = {k: v.detach().requires_grad_() for k, v in params.items()}
    grads = torch.autograd.grad(batched_loss_fn(leaves, xb, yb).sum(), list(leaves.values()))
    return dict(zip(leaves, grads))


def optimizer_state(params: Params) -> dict:
    """Zeroed optimiser state for :func:`optimizer_step` (first / second moments, step count)."""
    return {"step": 0, "first": {k: torch.zeros_like(v) for k, v in params.items()},
            "second": {k: torch.zeros_like(v) for k, v in params.items()}}


def optimizer_step(params: Params, grads: Params, state: dict, config: SGDConfig,
                   lr: float) -> Params:
    """One update of every network by ``config``'s rule; ``state`` is updated in place.

    Weight decay is added to the gradient (coupled L2, as PyTorch's SGD and Adam); then SGD
    with heavy-ball momentum, or Adam with betas ``(0.9, 0.999)`` and eps ``1e-8``.
    """
    state["step"] += 1
    t, first, second = state["step"], state["first"], state["second"]
    out = {}
    with torch.no_grad():
        for k, g in grads.items():
            if config.weight_decay:
                g = g + config.weight_decay * params[k]
            if config.optimizer == "adam":
                first[k] = 0.9 * first[k] + 0.1 * g
                second[k] = 0.999 * second[k] + 0.001 * g * g
                g = (first[k] / (1 - 0.9 ** t)) / ((second[k] / (1 - 0.999 ** t)).sqrt() + 1e-8)
            elif config.momentum:
                first[k] = config.momentum * first[k] + g
                g = first[k]
            out[k] = params[k] - lr * g
    return out

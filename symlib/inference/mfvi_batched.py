"""Mean-field VI for a batch of MLPs, one fused step at a time: :func:`step` on a :class:`State`.

The same objective and update as :func:`symlib.inference.mfvi.fit` (Kurle, Januschowski,
Gasthaus & Wang, 2021, "On symmetries in variational Bayesian neural nets", Sec. 4), built for
chapter 1's paper-size step on one CPU core (four 1-32x5-1 SELU variants, 64 Monte Carlo samples,
128 points). Per step ``t`` (counted from 0) with ``beta_t = min(1, t / (anneal_fraction T))``:

    q(w) = prod_i N(w_i; mu_i, exp(rho_i)^2),        prior N(0, I) (ordered-cone prior for ordered biases),
    ELBO_beta = (1/S) sum_s sum_n log N(y_n; f(x_n; w_s), sigma_n^2) - beta_t KL[q || p],
    loss = -(1/n) sum_models ELBO_beta,
    g = d loss / d theta,   theta = (mu, rho, log sigma_n),
    m <- b1 m + (1 - b1) g,   v <- b2 v + (1 - b2) g^2,
    theta <- theta - lr / (1 - b1^k) * m / (sqrt(v) / sqrt(1 - b2^k) + eps)        (Adam, k = t + 1)

with ``f`` sampled by the local reparameterisation trick (Kingma, Salimans & Welling, 2015):
layer by layer, ``h_l = a W_mu^T + h_{l-1} O_l^T + b + sqrt(a^2 W_sigma2^T + sigma_b^2) * eps`` with
``a = f(h_{l-1})``, fresh ``eps ~ N(0, I)`` per sample, point and unit; ordered hidden biases
``b = ordered(u)``, ``u ~ q``, are drawn per sample (see :mod:`symlib.inference.mfvi`). Adam is
``torch.optim.Adam(fused=True)``'s kernel with its defaults (``b1 = 0.9``, ``b2 = 0.999``,
``eps = 1e-8``). ``log sigma_n`` is updated only with ``learn_noise`` (otherwise its gradient is
zero, and so is its Adam step).

What differs from :func:`~symlib.inference.mfvi.fit` is how the step is computed:

- the parameters of every model live in one flat ``(B, D)`` tensor (means, log-sds, log noise), so
  Adam is one fused call and the KL a few ops over all weights at once;
- the big part -- the ``(models, samples x points, units)`` activations -- is differentiated by
  hand. For SELU networks with the C kernels it is one C routine
  (:meth:`symlib.inference._mfvi_kernels.CKernels.network`, built with the local ``g++``) that takes
  one model and one Monte Carlo sample at a time through every layer and back, so the activations
  never leave the core's caches; otherwise one batched matmul (``torch.bmm`` over the models axis)
  per product and the element-wise work in one torch pass per layer and direction. Autograd handles
  only the small tensors (layer 1's moments, the weights' variances, ordered biases, KL);
- the Monte Carlo noise is drawn in one ``torch.randn`` call per step, in
  :func:`~symlib.inference.mfvi.sample_outputs`'s order. Torch's CPU normal sampler transforms its
  uniforms in blocks of 16, so one call gives the numbers of the per-layer calls whenever every
  layer's count is a multiple of 16 (true at every chapter-1 size); otherwise the draws are made
  layer by layer, as :mod:`~symlib.inference.mfvi` makes them. Either way the random stream is
  :func:`~symlib.inference.mfvi.fit`'s: the same generator gives the same noise, and the fits agree
  to float32 rounding (:mod:`tests.inference.test_mfvi_batched`). :attr:`Noise.FAST` trades that
  for speed: a counter-based generator in C, keyed by one number drawn from the caller's generator
  per step (same distribution, other numbers; the fitted posteriors agree with
  :func:`~symlib.inference.mfvi.fit`'s across seeds within Monte Carlo error, same tests).

State is a value: :func:`step` returns a new :class:`State` and the :class:`~symlib.inference.mfvi.ELBOParts`
of the state it started from, leaving its argument untouched; the randomness is the generator
passed in. A :class:`Problem` binds the model, data and hyperparameters once (and holds reusable
work buffers: do not step one problem from two threads at once).

Public: :class:`Kernels`, :class:`Noise`, :class:`Problem`, :class:`State`, :func:`problem`,
:func:`init`, :func:`step`, :func:`gradient`, :func:`mean_field`, :func:`fit`, :func:`fit_resumable`.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor
from tqdm import tqdm

from symlib.inference import _mfvi_kernels as K
from symlib.inference import loop, mfvi
from symlib.inference.mfvi_graph import ResumableFit
from symlib.nn.mlp import Activation
from symlib.transforms import ordered_from_unconstrained

__all__ = [
    "Kernels",
    "Noise",
    "Problem",
    "State",
    "fit",
    "fit_resumable",
    "gradient",
    "init",
    "mean_field",
    "problem",
    "step",
]

_LOG_2PI = math.log(2.0 * math.pi)
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


class Kernels(str, enum.Enum):
    """Which implementation runs the fused element-wise passes."""

    AUTO = "auto"
    """C if the local ``g++`` builds it, else torch."""
    C = "c"
    """The C routines compiled with the local ``g++`` (fails if it cannot be built): the whole
    likelihood and its gradient in one routine for SELU networks, torch passes otherwise."""
    TORCH = "torch"
    """Batched matmuls and plain torch passes (no compiler needed; slower)."""


class Noise(str, enum.Enum):
    """Where a step's Monte Carlo noise comes from."""

    TORCH = "torch"
    """``torch.randn`` from the caller's generator, in :func:`~symlib.inference.mfvi.sample_outputs`'s
    order: the same numbers as :func:`~symlib.inference.mfvi.fit` draws (a fit equal to rounding)."""
    FAST = "fast"
    """A counter-based generator (SplitMix64 + Box-Muller, C kernels only,
    :meth:`~symlib.inference._mfvi_kernels.CKernels.normal`) keyed by one integer ``key`` in
    ``[0, 2^62)`` drawn from the caller's generator per step (``torch.randint``): the ordered biases'
    draws are the stream of ``key`` itself, the layers' noise the streams of the SELU routine's
    blocks (:meth:`~symlib.inference._mfvi_kernels.CKernels.network`; other activations: the stream
    of ``key`` after the biases', in :func:`~symlib.inference.mfvi.sample_outputs`' order).
    Reproducible from the generator and far cheaper than ``torch.randn`` on the CPU, but other
    numbers -- the same distribution, so a fit equal to :func:`~symlib.inference.mfvi.fit`'s in
    distribution, not draw by draw."""


class State(NamedTuple):
    """Everything a step changes, as tensors over the batch of ``B`` models.

    ``params`` holds per model ``[means (P) | log-sds (P) | log sigma_n (1)]`` in the layout of
    :attr:`Problem.keys` (weights ``W1..W{L+1}``, then biases ``b1..b{L+1}``, each row-major).
    """

    params: Tensor
    """``(B, 2P + 1)``: the variational parameters and the likelihood's log noise sd."""
    exp_avg: Tensor
    """Adam's first moment, like ``params``."""
    exp_avg_sq: Tensor
    """Adam's second moment, like ``params``."""
    count: Tensor
    """Steps taken (0-d float32, as Adam's ``step``); also the KL schedule's ``t``."""


@dataclass(eq=False)
class Problem:
    """Model, data and hyperparameters, bound once (:func:`problem`)."""

    model: mfvi.BayesMLP
    x: Tensor
    y: Tensor
    n_samples: int
    lr: float
    n_steps: int
    anneal_fraction: float
    learn_noise: bool
    n_models: int
    keys: tuple[str, ...]
    """Flat layout: ``(key, offset, shape)`` per parameter tensor."""
    offsets: dict[str, tuple[int, tuple[int, ...]]]
    n_params: int
    ordered: Tensor | None
    """Bool ``(B,)``: models with ordered hidden biases (None: none)."""
    skips_t: dict[int, Tensor]
    """Layer -> ``O_l^T`` as ``(B, N_{l-1}, N_l)``, for the layers with a skip."""
    skip_runs: dict[int, list[tuple[int, int]]]
    """Layer -> runs ``[start, stop)`` of consecutive models whose skip is not all zeros."""
    skips: dict[int, Tensor]
    """Layer -> ``O_l`` as ``(B, N_l, N_{l-1})``, for the layers with a skip (the C routine's layout)."""
    skip_masks: dict[int, Tensor]
    """Layer -> int8 ``(B,)``: 1 for the models whose skip is not all zeros."""
    kl_keep: Tensor
    """``(B, P)``: 1 where an entry's KL is the Gaussian one, 0 for ordered models' hidden biases."""
    kernels: K.TorchKernels
    noise: Noise
    one_draw: bool
    """Whether each layer's noise count is a multiple of 16 (then one ``randn`` call per step)."""
    fused: bool
    """Whether the likelihood goes through the C routine (C kernels and a SELU network)."""
    _work: dict[str, Tensor] = field(default_factory=dict, repr=False)

    def buffer(self, name: str, shape: tuple[int, ...]) -> Tensor:
        """A reusable work tensor (allocated once: a fresh 4 MB tensor costs as much as a pass)."""
        t = self._work.get(name)
        if t is None or t.shape != torch.Size(shape):
            t = torch.empty(shape, dtype=self.x.dtype)
            self._work[name] = t
        return t


def problem(
    model: mfvi.BayesMLP,
    x: Tensor,
    y: Tensor,
    *,
    n_models: int,
    n_samples: int,
    lr: float,
    n_steps: int,
    anneal_fraction: float = 0.5,
    learn_noise: bool = False,
    kernels: Kernels | str = Kernels.AUTO,
    noise: Noise | str = Noise.TORCH,
) -> Problem:
    """Bind a batch of ``n_models`` models, the data and the hyperparameters of :func:`step`.

    Args:
        model: as for :func:`symlib.inference.mfvi.fit` (skips shared or batched, ``ordered_biases``
            a bool or a bool tensor of shape ``(n_models,)``).
        x, y: training data ``(n, N_0)``, ``(n, N_{L+1})``, float32 on the CPU.
        n_models: the batch size ``B`` (one leading batch axis).
        n_samples: Monte Carlo samples ``S`` per step.
        lr: Adam's step size.
        n_steps: the fit's length ``T`` (sets the KL schedule).
        anneal_fraction: the KL weight rises linearly from 0 to 1 over this fraction of ``T``.
        learn_noise: update ``log sigma_n`` (type-II maximum likelihood inside the ELBO).
        kernels: :class:`Kernels`.
        noise: :class:`Noise` (``FAST`` needs the C kernels).

    Raises:
        ValueError: not float32 CPU data.
        RuntimeError: ``kernels="c"`` or ``noise="fast"`` where the C kernels cannot be built.
    """
    spec = model.spec
    if x.dtype != torch.float32 or x.device.type != "cpu":
        raise ValueError("mfvi_batched: float32 CPU tensors only")
    shapes = spec.shapes()
    keys = tuple([f"W{l}" for l in range(1, spec.n_layers + 1)] + [f"b{l}" for l in range(1, spec.n_layers + 1)])
    offsets, off = {}, 0
    for k in keys:
        offsets[k] = (off, shapes[k])
        off += math.prod(shapes[k])
    mask = mfvi._ordered_mask(model)
    ordered = None
    if mask is True:
        ordered = torch.ones(n_models, dtype=torch.bool)
    elif isinstance(mask, Tensor):
        ordered = mask.expand(n_models).clone()
    kl_keep = torch.ones(n_models, off, dtype=x.dtype)
    if ordered is not None:
        for l in mfvi._hidden_layers(spec):
            start, shape = offsets[f"b{l}"]
            kl_keep[ordered, start:start + shape[0]] = 0.0
    skips_t, skip_runs, skips, skip_masks = {}, {}, {}, {}
    for l in range(1, spec.n_layers + 1):
        o = model.skips.get(f"O{l}")
        if o is None:
            continue
        o = o.to(x.dtype).expand(n_models, spec.widths[l], spec.widths[l - 1])
        nonzero = (o != 0).flatten(1).any(1).tolist()
        runs, start = [], None
        for i, nz in enumerate(nonzero + [False]):
            if nz and start is None:
                start = i
            if not nz and start is not None:
                runs.append((start, i))
                start = None
        if runs:
            skips_t[l] = o.transpose(1, 2).contiguous()
            skip_runs[l] = runs
            skips[l] = o.contiguous()
            skip_masks[l] = torch.tensor(nonzero, dtype=torch.int8)
    kernels, noise = Kernels(kernels), Noise(noise)
    if noise is Noise.FAST and kernels is Kernels.TORCH:
        raise ValueError("mfvi_batched: noise='fast' needs the C kernels")
    if noise is Noise.FAST:
        kernels = Kernels.C
    if kernels is Kernels.TORCH:
        impl = K.TorchKernels(spec.activation)
    else:
        try:
            impl = K.c_kernels(spec.activation)
        except RuntimeError:
            if kernels is Kernels.C:
                raise
            impl = K.TorchKernels(spec.activation)
    n = x.shape[-2]
    counts = [size for _, size in _noise_chunks(spec, ordered is not None, n_models, n_samples, n)]
    one_draw = all(c % 16 == 0 and c >= 16 for c in counts)
    fused = isinstance(impl, K.CKernels) and spec.activation is Activation.SELU
    return Problem(model, x.contiguous(), y.contiguous(), n_samples, lr, n_steps, anneal_fraction, learn_noise,
                   n_models, keys, offsets, off, ordered, skips_t, skip_runs, skips, skip_masks, kl_keep, impl,
                   noise, one_draw, fused)


def init(prob: Problem, q: mfvi.MeanField, noise_sd: float | Tensor = 0.2) -> State:
    """The state at ``q`` (as :func:`~symlib.inference.mfvi.mean_field_from_params` builds it,
    batch shape ``(B,)``) with ``sigma_n = noise_sd``, Adam's moments zero."""
    b = prob.n_models
    mean = torch.cat([q.mean[k].reshape(b, -1) for k in prob.keys], dim=1)
    log_sd = torch.cat([q.log_sd[k].reshape(b, -1) for k in prob.keys], dim=1)
    log_noise = torch.log(torch.as_tensor(noise_sd, dtype=mean.dtype)).expand(b).reshape(b, 1)
    params = torch.cat([mean, log_sd, log_noise], dim=1).contiguous()
    zeros = torch.zeros_like(params)
    return State(params, zeros, zeros.clone(), torch.zeros((), dtype=torch.float32))


def mean_field(prob: Problem, state: State) -> tuple[mfvi.MeanField, Tensor]:
    """The state as :class:`~symlib.inference.mfvi.MeanField` (copies, keys in the order of
    ``spec.shapes()``, as :func:`~symlib.inference.mfvi.fit` returns them: samplers draw in that order)
    and ``log sigma_n`` ``(B,)``."""
    mean, log_sd, log_noise = _split(prob, state.params.detach())
    order = list(prob.model.spec.shapes())
    return (mfvi.MeanField({k: mean[k].clone() for k in order}, {k: log_sd[k].clone() for k in order}),
            log_noise.clone())


def step(prob: Problem, state: State, generator: torch.Generator) -> tuple[State, mfvi.ELBOParts]:
    """One Adam step on the annealed ELBO (module docstring), from a new draw of the noise.

    Args:
        prob: the bound problem.
        state: where to step from (not modified).
        generator: the source of the step's Monte Carlo noise (advanced).

    Returns:
        The new state, and the ELBO parts at ``state`` (each ``(B,)``; ``elbo`` at the annealed
        weight, as :func:`~symlib.inference.mfvi.elbo` returns it).
    """
    parts, grad = gradient(prob, state, generator)
    new = State(state.params.clone(), state.exp_avg.clone(), state.exp_avg_sq.clone(), state.count + 1)
    torch._fused_adam_([new.params], [grad], [new.exp_avg], [new.exp_avg_sq], [], [new.count], amsgrad=False,
                       lr=prob.lr, beta1=ADAM_BETAS[0], beta2=ADAM_BETAS[1], weight_decay=0.0, eps=ADAM_EPS,
                       maximize=False, grad_scale=None, found_inf=None)
    return new, parts


def gradient(prob: Problem, state: State, generator: torch.Generator) -> tuple[mfvi.ELBOParts, Tensor]:
    """The ELBO parts at ``state`` and the gradient of the step's loss ``-(1/n) sum_models ELBO_beta``
    w.r.t. ``state.params`` (``(B, 2P + 1)``; zero for ``log sigma_n`` unless ``learn_noise``), from
    one draw of the noise -- an unbiased estimate of the exact gradient."""
    t = int(state.count.item())
    beta = mfvi.kl_weight(t, prob.n_steps, prob.anneal_fraction)
    theta = state.params.detach().clone().requires_grad_(True)
    mean, log_sd, log_noise = _split(prob, theta)
    eps_b, eps, key = _draw_noise(prob, generator)
    spec, b, s, n = prob.model.spec, prob.n_models, prob.n_samples, prob.x.shape[-2]
    brow, bvar = {}, {}
    for l in range(1, spec.n_layers + 1):
        bm, bls = mean[f"b{l}"], log_sd[f"b{l}"]
        rows = bm[:, None, :].expand(b, s, bm.shape[-1])
        var = torch.exp(2.0 * bls)
        if prob.ordered is not None and l <= len(spec.hidden_widths):
            sample = ordered_from_unconstrained(bm[:, None, :] + torch.exp(bls)[:, None, :] * eps_b[l])
            rows = torch.where(prob.ordered[:, None, None], sample, rows)
            var = torch.where(prob.ordered[:, None], torch.zeros_like(var), var)
        brow[l], bvar[l] = rows, var
    # the small tensors the likelihood reads, under autograd: layer 1's moments, weights' means and variances
    x = prob.x
    if prob.fused:      # unit-major (B, N_l, N_{l-1}) weights and (B, N_1, n) moments, as the C routine reads them
        wm = {l: mean[f"W{l}"] for l in range(1, spec.n_layers + 1)}
        wv = {l: torch.exp(2.0 * log_sd[f"W{l}"]) for l in range(1, spec.n_layers + 1)}
        mu1 = torch.matmul(wm[1], x.T)
        if 1 in prob.skips:
            mu1 = mu1 + torch.matmul(prob.skips[1], x.T)
        var1 = torch.matmul(wv[1], x.square().T) + bvar[1][:, :, None]
        first = {"mu1t": mu1, "sd1t": var1.clamp_min(torch.finfo(var1.dtype).tiny).sqrt()}
    else:               # (B, N_{l-1}, N_l) weights and (B, n, N_1) moments, for the batched matmuls
        wm = {l: mean[f"W{l}"].transpose(1, 2) for l in range(1, spec.n_layers + 1)}
        wv = {l: torch.exp(2.0 * log_sd[f"W{l}"]).transpose(1, 2) for l in range(1, spec.n_layers + 1)}
        mu1 = torch.matmul(x, wm[1])
        if 1 in prob.skips_t:
            mu1 = mu1 + torch.matmul(x, prob.skips_t[1])
        var1 = torch.matmul(x.square(), wv[1]) + bvar[1][:, None, :]
        first = {"mu1": mu1, "sd1": var1.clamp_min(torch.finfo(var1.dtype).tiny).sqrt()}
    small = {**first, **{f"wm{l}": wm[l] for l in wm if l > 1}, **{f"wv{l}": wv[l] for l in wv if l > 1},
             **{f"brow{l}": brow[l] for l in brow}, **{f"bvar{l}": bvar[l] for l in bvar if l > 1}}
    with torch.no_grad():
        detached = {k: v.detach().contiguous() for k, v in small.items()}
        likelihood = _likelihood_fused if prob.fused else _likelihood
        expected, grads, grad_log_noise = likelihood(prob, detached, log_noise.detach(), eps, key)
    kl = _kl(prob, theta)
    objective = expected - beta * kl
    # loss = -(1/n) sum_m (E_m - beta KL_m): the big part's gradients are those of -E/n, already
    # computed by hand; autograd carries them and the KL's through the small tensors to theta
    outputs = [v for k, v in small.items() if v.requires_grad]
    grad_out = [grads[k] for k, v in small.items() if v.requires_grad]
    torch.autograd.backward([*outputs, kl.sum() * (beta / n)], [*grad_out, None])
    grad = theta.grad
    grad[:, -1] = grad_log_noise if prob.learn_noise else 0.0
    return mfvi.ELBOParts(objective.detach(), expected, kl.detach()), grad


def fit(
    model: mfvi.BayesMLP,
    q: mfvi.MeanField,
    x: Tensor,
    y: Tensor,
    *,
    n_steps: int,
    n_samples: int,
    lr: float,
    generator: torch.Generator,
    noise_sd: float | Tensor = 0.2,
    learn_noise: bool = False,
    anneal_fraction: float = 0.5,
    record_every: int = 100,
    average_records: bool = False,
    progress: bool = True,
    desc: str = "MFVI (batched)",
    kernels: Kernels | str = Kernels.AUTO,
    noise: Noise | str = Noise.TORCH,
) -> mfvi.FitResult:
    """:func:`symlib.inference.mfvi.fit` by :func:`step`: same arguments, records and result.

    ``q`` must have one batch axis (``B`` models, ``B >= 1``). With ``noise="torch"`` the same
    generator gives the same noise as :func:`~symlib.inference.mfvi.fit` and a fit equal to float32
    rounding; with ``noise="fast"``, a fit with the same distribution (:class:`Noise`).
    """
    run = _Run(model, q, x, y, n_steps=n_steps, n_samples=n_samples, lr=lr, generator=generator, noise_sd=noise_sd,
               learn_noise=learn_noise, anneal_fraction=anneal_fraction, record_every=record_every,
               average_records=average_records, kernels=kernels, noise=noise)
    run.run(progress=progress, desc=desc)
    return run.result()


CHECKPOINT_FORMAT = 1


def fit_resumable(model: mfvi.BayesMLP, q: mfvi.MeanField, x: Tensor, y: Tensor, *, checkpoint: str | Path,
                  every_s: float = 120.0, budget_s: float | None = None, progress: bool = True,
                  desc: str = "MFVI (batched)", **kwargs) -> ResumableFit:
    """:func:`fit` in resumable pieces, as :func:`symlib.inference.mfvi_graph.fit_resumable` for
    :func:`~symlib.inference.mfvi.fit`: the whole state (parameters, Adam's moments and count, the
    generator, the records and their running sums) is written to ``checkpoint`` atomically at most
    every ``every_s`` seconds; ``budget_s`` (None: no limit) stops the piece after that many seconds,
    leaving its checkpoint (:func:`symlib.inference.loop.run`); a later call with the same arguments continues from it and gives the
    numbers of an uninterrupted fit, bit for bit (one thread; the step is deterministic given the
    generator). A checkpoint of other settings is refused by name.

    Args:
        checkpoint: the checkpoint file; if it exists the fit continues from it (a finished fit is
            returned without training again).
        kwargs: as for :func:`fit` (``n_steps``, ``n_samples``, ``lr``, ``generator``, ``noise``, ...).
    """
    run = _Run(model, q, x, y, **kwargs)
    path = Path(checkpoint)
    if path.is_file():
        run.load(path)
    if run.done < run.prob.n_steps:
        run.run(checkpoint=path, every_s=every_s, budget_s=budget_s, progress=progress, desc=desc)
        if not run.stopped:
            run.save(path, run.wall_s)   # the finished fit: a later call returns it without training again
    return ResumableFit(not run.stopped, run.result(), run.done, run.wall_s, run.pieces)


class _Run:
    """One fit's state between steps: the :class:`State`, the generator, the records and their sums."""

    def __init__(self, model: mfvi.BayesMLP, q: mfvi.MeanField, x: Tensor, y: Tensor, *, n_steps: int,
                 n_samples: int, lr: float, generator: torch.Generator, noise_sd: float | Tensor = 0.2,
                 learn_noise: bool = False, anneal_fraction: float = 0.5, record_every: int = 100,
                 average_records: bool = False, kernels: Kernels | str = Kernels.AUTO,
                 noise: Noise | str = Noise.TORCH):
        if q.mean["W1"].ndim != 3:
            raise ValueError("mfvi_batched.fit: q needs exactly one batch axis (models)")
        self.prob = problem(model, x, y, n_models=q.mean["W1"].shape[0], n_samples=n_samples, lr=lr,
                            n_steps=n_steps, anneal_fraction=anneal_fraction, learn_noise=learn_noise,
                            kernels=kernels, noise=noise)
        self.state = init(self.prob, q, noise_sd)
        self.generator, self.record_every, self.average = generator, record_every, average_records
        self.records: dict[str, list] = {k: [] for k in ("step", "kl_weight", "elbo", "objective",
                                                         "expected_log_likelihood", "kl", "noise_sd")}
        self.sums: dict[str, Tensor] = {}
        self.n_summed, self.done, self.wall_s, self.pieces, self.stopped = 0, 0, 0.0, 1, False
        self.settings = {"n_steps": n_steps, "n_samples": n_samples, "lr": lr,
                         "noise_sd": torch.as_tensor(noise_sd, dtype=torch.float64).flatten().tolist(),
                         "learn_noise": learn_noise, "anneal_fraction": anneal_fraction, "record_every": record_every,
                         "average_records": average_records, "kernels": self.prob.kernels.name,
                         "noise": self.prob.noise.value, "shapes": {k: list(v.shape) for k, v in q.mean.items()}}

    def run(self, *, checkpoint: Path | None = None, every_s: float = 120.0, budget_s: float | None = None,
            progress: bool = False, desc: str = "MFVI (batched)") -> None:
        """Step to the end in :func:`symlib.inference.loop.run`; with ``checkpoint``, save at most
        every ``every_s`` seconds and stop after ``budget_s``."""
        bar = tqdm(total=self.prob.n_steps - self.done, desc=desc, disable=not progress, mininterval=1.0)
        save = None if checkpoint is None else lambda run, seconds: run.save(checkpoint, run.wall_s + seconds)
        piece = loop.run(self, _Run._advance, done=_Run._done, total=self.prob.n_steps, save=save,
                         every_s=every_s, budget_s=budget_s, on_step=lambda _: bar.update())
        bar.close()
        self.stopped = piece.stopped
        self.wall_s += piece.seconds

    def _advance(self) -> _Run:
        """One step; the run, stepped in place, is :func:`symlib.inference.loop.run`'s state."""
        self._step()
        return self

    def _done(self) -> int:
        return self.done

    def _step(self) -> None:
        t, n_steps = self.done, self.prob.n_steps
        beta = mfvi.kl_weight(t, n_steps, self.prob.anneal_fraction)
        self.state, parts = step(self.prob, self.state, self.generator)
        self.done += 1
        record = t % self.record_every == 0 or t == n_steps - 1
        if not (record or self.average):
            return
        now = {"elbo": parts.expected_log_likelihood - parts.kl, "objective": parts.elbo,
               "expected_log_likelihood": parts.expected_log_likelihood, "kl": parts.kl}
        if self.average:
            self.sums = {k: self.sums.get(k, 0.0) + v for k, v in now.items()}
            self.n_summed += 1
        if record:
            if self.average:
                now, self.sums, self.n_summed = {k: v / self.n_summed for k, v in self.sums.items()}, {}, 0
            self.records["step"].append(t)
            self.records["kl_weight"].append(beta)
            for k, v in now.items():
                self.records[k].append(v.numpy())
            self.records["noise_sd"].append(self.state.params[:, -1].exp().numpy())

    def result(self) -> mfvi.FitResult:
        history = {k: (np.asarray(v) if k in ("step", "kl_weight") else np.moveaxis(np.asarray(v), 0, -1))
                   for k, v in self.records.items()}
        final, log_noise = mean_field(self.prob, self.state)
        return mfvi.FitResult(final, log_noise, history)

    def save(self, path: Path, wall_s: float) -> None:
        """Write everything the rest of the fit depends on (atomically)."""
        payload = {"format": CHECKPOINT_FORMAT, "settings": self.settings, "done": self.done,
                   "state": [t.clone() for t in self.state], "generator": self.generator.get_state(),
                   "sums": {k: v.clone() for k, v in self.sums.items()}, "n_summed": self.n_summed,
                   "records": self.records, "wall_s": wall_s, "pieces": self.pieces}
        loop.write_checkpoint(Path(path), payload)

    def load(self, path: Path) -> None:
        """Continue from a checkpoint :meth:`save` wrote with the same settings."""
        saved = loop.read_checkpoint(path, format=CHECKPOINT_FORMAT, settings=self.settings, what="fit")
        self.state = State(*saved["state"])
        self.generator.set_state(saved["generator"])
        self.sums, self.n_summed, self.records = saved["sums"], saved["n_summed"], saved["records"]
        self.done, self.wall_s = saved["done"], saved["wall_s"]
        self.pieces = saved["pieces"] + (1 if saved["done"] < self.prob.n_steps else 0)


# --------------------------------------------------------------------------- internals


def _split(prob: Problem, theta: Tensor) -> tuple[dict[str, Tensor], dict[str, Tensor], Tensor]:
    """Views of the flat parameters: means and log-sds by key ``(B, *shape)``, and ``log sigma_n``."""
    p, b = prob.n_params, prob.n_models
    mean, log_sd = {}, {}
    for k in prob.keys:
        off, shape = prob.offsets[k]
        size = math.prod(shape)
        mean[k] = theta[:, off:off + size].view(b, *shape)
        log_sd[k] = theta[:, p + off:p + off + size].view(b, *shape)
    return mean, log_sd, theta[:, 2 * p]


def _noise_chunks(spec, any_ordered: bool, b: int, s: int, n: int) -> list[tuple[tuple, int]]:
    """The noise :func:`symlib.inference.mfvi.sample_outputs` draws, in its order: per layer, the
    ordered biases' ``(B, S, N_l)`` (hidden layers, when any model orders them), then ``(B, S, n, N_l)``."""
    out = []
    for l in range(1, spec.n_layers + 1):
        w = spec.widths[l]
        if any_ordered and l <= len(spec.hidden_widths):
            out.append((("b", l, (b, s, w)), b * s * w))
        out.append((("h", l, (b, s, n, w)), b * s * n * w))
    return out


def _draw_noise(prob: Problem, generator: torch.Generator) -> tuple[dict[int, Tensor], dict[int, Tensor], int | None]:
    """The step's noise: the ordered biases' ``eps_b`` and the layers' ``eps`` by layer, and the key of
    the fast generator (None with torch's noise). With fast noise and the C routine, ``eps`` is empty:
    the routine draws the layers' noise itself from the key."""
    spec, n = prob.model.spec, prob.x.shape[-2]
    chunks = _noise_chunks(spec, prob.ordered is not None, prob.n_models, prob.n_samples, n)
    key = None
    if prob.noise is Noise.FAST:
        key = int(torch.randint(0, 2**62, (), generator=generator))
        if prob.fused:
            chunks = [c for c in chunks if c[0][0] == "b"]
        parts = prob.kernels.normal(sum(c for _, c in chunks), key).split([c for _, c in chunks])
    elif prob.one_draw:
        # one call: torch's CPU sampler works in blocks of 16, so this is the per-layer stream
        flat = torch.randn(sum(c for _, c in chunks), generator=generator, dtype=prob.x.dtype)
        parts = flat.split([c for _, c in chunks])
    else:
        parts = [torch.randn(c, generator=generator, dtype=prob.x.dtype) for _, c in chunks]
    eps_b, eps = {}, {}
    for ((kind, l, shape), _), part in zip(chunks, parts, strict=True):
        (eps_b if kind == "b" else eps)[l] = part.view(shape)
    return eps_b, eps, key


def _kl(prob: Problem, theta: Tensor) -> Tensor:
    """``KL[q || p]`` per model ``(B,)``: Gaussian entries in one pass, ordered biases by layer."""
    p = prob.n_params
    mean, log_sd = theta[:, :p], theta[:, p:2 * p]
    kl = (mfvi.gaussian_kl(mean, log_sd) * prob.kl_keep).sum(-1)
    if prob.ordered is None:
        return kl
    spec = prob.model.spec
    widths = set(spec.hidden_widths)
    first, _ = prob.offsets["b1"]
    if len(widths) == 1:   # the hidden biases are contiguous: all layers in one batched call
        w, n_hidden = spec.hidden_widths[0], len(spec.hidden_widths)
        u_mean = mean[:, first:first + w * n_hidden].reshape(-1, n_hidden, w)
        u_log_sd = log_sd[:, first:first + w * n_hidden].reshape(-1, n_hidden, w)
        ordered_kl = mfvi.ordered_normal_kl(u_mean, u_log_sd).sum(-1)
    else:
        ordered_kl = 0.0
        for l in mfvi._hidden_layers(spec):
            off, (w,) = prob.offsets[f"b{l}"]
            ordered_kl = ordered_kl + mfvi.ordered_normal_kl(mean[:, off:off + w], log_sd[:, off:off + w])
    return kl + torch.where(prob.ordered, ordered_kl, torch.zeros_like(ordered_kl))


def _likelihood(prob: Problem, small: dict[str, Tensor], log_noise: Tensor, eps: dict[int, Tensor], key=None):
    """The expected log-likelihood ``E (B,)`` and, by hand, the gradients of ``-(1/n) sum E`` w.r.t.
    the small tensors and w.r.t. ``log sigma_n`` (``(B,)``), by batched matmuls and torch passes
    (``key`` is unused: the noise is in ``eps``).

    Forward, layer ``l >= 2`` (rows = samples x points, per model):
        a = f(h), mu = a Wm + h O^T, sd = sqrt(a^2 Wv + bvar), h_l = mu + brow + sd eps.
    Backward, given ``g = dL/dh_l``:
        gv = g eps / sd  (2 dL/dvar),  dWm = a^T g,  dWv = a2^T gv / 2,  dbrow = sum_points g,
        dbvar = sum_rows gv / 2,  dh = f'(h) (g Wm^T + a (gv Wv^T)) + g O.
    """
    kern = prob.kernels
    spec, b, s, n = prob.model.spec, prob.n_models, prob.n_samples, prob.x.shape[-2]
    n_layers = spec.n_layers
    r = s * n
    buf = prob.buffer
    # forward; each output pass also writes the next layer's a = f(h), a^2
    def act_bufs(l):
        if l > n_layers:
            return None, None
        shape = (b, r, spec.widths[l - 1])
        return buf(f"a{l}", shape), buf(f"a2{l}", shape)

    h = {1: buf("h1", (b, s, n, spec.widths[1]))}
    acts = {2: act_bufs(2)}
    kern.first_fwd(h[1], small["mu1"], small["sd1"], small["brow1"], eps[1], *acts[2])
    saved = {}
    for l in range(2, n_layers + 1):
        k_out = spec.widths[l]
        h_in = h[l - 1].view(b, r, spec.widths[l - 1])
        a, a2 = acts[l]
        mu, var = buf(f"h{l}", (b, r, k_out)), buf(f"sd{l}", (b, r, k_out))
        torch.bmm(a, small[f"wm{l}"], out=mu)
        for lo, hi in prob.skip_runs.get(l, ()):
            mu[lo:hi].baddbmm_(h_in[lo:hi], prob.skips_t[l][lo:hi])
        torch.bmm(a2, small[f"wv{l}"], out=var)
        acts[l + 1] = act_bufs(l + 1)
        kern.out_fwd(mu.view(b, s, n, k_out), var.view(b, s, n, k_out), small[f"brow{l}"], small[f"bvar{l}"],
                     eps[l], *acts[l + 1])
        h[l] = mu.view(b, s, n, k_out)
        saved[l] = (h_in, a, a2, var)
    f = h[n_layers]
    noise_var = torch.exp(2.0 * log_noise)[:, None, None, None]
    resid = prob.y - f
    sq = resid.square() / noise_var
    log_density = -0.5 * sq - log_noise[:, None, None, None] - 0.5 * _LOG_2PI
    expected = log_density.sum((-1, -2)).mean(-1)
    # backward of loss = -sum_m E_m / n
    grad_log_noise = -(sq - 1.0).sum((1, 2, 3)) / (s * n)
    g = (resid / noise_var).mul_(-1.0 / (s * n)).contiguous()      # dL/df
    grads = {}
    for l in range(n_layers, 1, -1):
        h_in, a, a2, sd = saved[l]
        k_in, k_out = spec.widths[l - 1], spec.widths[l]
        g3 = g.view(b, r, k_out)
        gv = buf(f"gv{l}", (b, r, k_out))
        dbrow, dbvar = torch.empty(b, s, k_out), torch.empty(b, k_out)
        kern.grad_var(g.view(b, s, n, k_out), eps[l], sd.view(b, s, n, k_out), gv.view(b, s, n, k_out), dbrow, dbvar)
        grads[f"brow{l}"], grads[f"bvar{l}"] = dbrow, dbvar
        grads[f"wm{l}"] = torch.bmm(a.transpose(1, 2), g3)
        grads[f"wv{l}"] = torch.bmm(a2.transpose(1, 2), gv).mul_(0.5)
        tmu, tvar = buf(f"tmu{l}", (b, r, k_in)), buf(f"tvar{l}", (b, r, k_in))
        torch.bmm(g3, small[f"wm{l}"].transpose(1, 2), out=tmu)
        torch.bmm(gv, small[f"wv{l}"].transpose(1, 2), out=tvar)
        kern.act_bwd(h_in, a, tmu, tvar)
        for lo, hi in prob.skip_runs.get(l, ()):
            tmu[lo:hi].baddbmm_(g3[lo:hi], prob.skips_t[l][lo:hi].transpose(1, 2))
        g = tmu
    w1 = spec.widths[1]
    dmu1, dsd1, dbrow1 = torch.empty(b, n, w1), torch.empty(b, n, w1), torch.empty(b, s, w1)
    kern.first_bwd(g.view(b, s, n, w1), eps[1], dmu1, dsd1, dbrow1)
    grads.update(mu1=dmu1, sd1=dsd1, brow1=dbrow1)
    return expected, grads, grad_log_noise


def _likelihood_fused(prob: Problem, small: dict[str, Tensor], log_noise: Tensor, eps: dict[int, Tensor],
                      key: int | None):
    """:func:`_likelihood` by the C routine (:meth:`~symlib.inference._mfvi_kernels.CKernels.network`):
    the same three results from ``sq[m] = sum_{s,i} (y_i - f)^2 / sigma_m^2``,

        E = -sq / (2 S) - n N_L (log sigma_n + log(2 pi) / 2),   d(-sum E / n)/d log sigma_n = -(sq - S n N_L) / (S n),

    with the layers' noise from ``eps`` or, given ``key``, from the routine's own generator."""
    spec, s, n = prob.model.spec, prob.n_samples, prob.x.shape[-2]
    n_layers, n_out = spec.n_layers, spec.widths[-1]
    layers = {"wm": {l: small[f"wm{l}"] for l in range(2, n_layers + 1)},
              "wv": {l: small[f"wv{l}"] for l in range(2, n_layers + 1)},
              "skip": {l: o for l, o in prob.skips.items() if l >= 2},
              "skip_mask": {l: mk for l, mk in prob.skip_masks.items() if l >= 2},
              "brow": {l: small[f"brow{l}"] for l in range(1, n_layers + 1)},
              "bvar": {l: small[f"bvar{l}"] for l in range(2, n_layers + 1)},
              "eps": eps}
    sq, g = prob.kernels.network(spec.widths, layers, small["mu1t"], small["sd1t"], prob.y, log_noise, s, key=key)
    expected = -0.5 * sq / s - n * n_out * (log_noise + 0.5 * _LOG_2PI)
    grad_log_noise = -(sq - s * n * n_out) / (s * n)
    grads = {"mu1t": g["mu1t"], "sd1t": g["sd1t"]}
    for l in range(1, n_layers + 1):
        grads[f"brow{l}"] = g["brow"][l]
        if l >= 2:
            grads[f"wm{l}"], grads[f"wv{l}"], grads[f"bvar{l}"] = g["wm"][l], g["wv"][l], g["bvar"][l]
    return expected, grads, grad_log_noise

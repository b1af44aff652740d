"""Hamiltonian Monte Carlo with full-batch gradients, for several chains at once.

The target is ``p(w) ∝ exp(-U(w))``; for a Bayesian MLP classifier with an ``N(0, s^2)`` prior
(:func:`mlp_classification_potential`)

    U(w) = sum_i CE(f(x_i; w), y_i) + ||w||^2 / (2 s^2)        (all training points: full batch).

One HMC transition (Neal 2011) with identity mass matrix, per chain ``c`` and step size ``eps_c``:

0. with jitter ``j > 0`` (the default, ``j = 0.2``), the transition's step size is
   ``eps_c u_c``, ``u_c ~ Uniform(1 - j, 1 + j)`` drawn afresh per chain and transition
   (Mackenzie 1989; Neal 2011, Sec. 5.4). A fixed trajectory ``L eps`` resonates with every
   direction of the target whose scale ``s`` makes it close to a multiple of ``pi s``: the
   trajectory ends near its start (or its mirror image) transition after transition, and that
   direction barely mixes. Jitter spreads the length over ``+-j`` and breaks the resonance at
   the same cost; ``j = 0`` keeps ``eps_c`` fixed (the authors' setting in chapter 5);
1. draw a momentum ``p ~ N(0, I)``;
2. ``L`` leapfrog steps (:func:`leapfrog`)
   ``p <- p - eps/2 grad U(w);  w <- w + eps p;  p <- p - eps/2 grad U(w)``
   (consecutive half steps merged, so ``L`` gradient evaluations per transition);
3. accept the end point with probability ``min(1, exp(H(w, p) - H(w', p')))``,
   ``H = U + |p|^2 / 2`` (computed in float64); otherwise stay.

Reduced-precision forces (``force_precision="tf32"`` or ``"bf16"``): the gradients that drive
the leapfrog steps are computed with TF32 matrix products or under bf16 autocast, while
positions and momenta stay float32 and the Hamiltonian of step 3 uses ``U`` computed in full
float32 precision (one extra forward pass per trajectory, sums in float64). Leapfrog with any
force that is a deterministic function of the position is still reversible and
volume-preserving (each step is a shear), so the Metropolis step keeps the target exact; only
the acceptance rate can drop, and :class:`HMCResult` reports it beside the precision used.

During burn-in only, each chain's step size is tuned by dual averaging (Hoffman & Gelman 2014,
Alg. 5) towards a target acceptance probability; sampling then uses the averaged step size,
fixed (up to the jitter, which is independent of the chain's state), so the kept samples come
from a proper Markov chain. Chains are independent but share every tensor operation: positions
are parameter dicts whose tensors carry a leading chain axis ``C``, and the potential returns
``(C,)``.

Samples go to a :class:`SampleStore`, which keeps them in memory when they fit under a budget
and otherwise in a numpy memmap in a temporary directory (deleted when the store is closed or
garbage collected), so a long run (e.g. the paper's 1,000 samples of a 784-512-10 MLP, 1.6 GB)
never needs to hold every sample in RAM.

Randomness is explicit: every draw comes from the ``torch.Generator`` passed in.

The sampler is a state and a step: :class:`Sampler` binds the settings once, its ``init`` gives a
:class:`SamplerState` (the chains, the adaptation, the step size, the counts) and its ``step`` the
next one; :class:`Trace` records each transition. :func:`sample` applies the step with
:func:`symlib.inference.loop.run`, the loop that
:func:`symlib.inference.hmc_resumable.sample_resumable` runs in checkpointed pieces, so that the
two give the same chains.

Public: :class:`HMCState`, :class:`HMCInfo`, :class:`HMCResult`, :class:`SampleStore`,
:class:`Sampler`, :class:`SamplerState`, :class:`Trace`, :func:`value_and_grad`, :func:`init`,
:func:`leapfrog`, :func:`hmc_step`, :func:`dual_averaging_init`, :func:`dual_averaging_update`,
:func:`sample`, :func:`mlp_classification_potential`, :func:`mlp_regression_potential`.
"""

from __future__ import annotations

import contextlib
import enum
import math
import shutil
import tempfile
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor
from tqdm import tqdm

from symlib.inference import loop
from symlib.nn.mlp import MLPSpec, mlp_forward

__all__ = [
    "DualAveragingState",
    "ForcePrecision",
    "HMCInfo",
    "HMCResult",
    "HMCState",
    "SampleStore",
    "Sampler",
    "SamplerState",
    "Trace",
    "dual_averaging_init",
    "dual_averaging_update",
    "exact_precision",
    "force_precision",
    "hmc_step",
    "init",
    "leapfrog",
    "mlp_classification_potential",
    "mlp_regression_potential",
    "sample",
    "value_and_grad",
]

Position = dict[str, Tensor]
Potential = Callable[[Position], Tensor]
HISTORY_KEYS = ("accept_prob", "energy_error", "potential", "step_size")
"""What :class:`Trace` records per iteration and chain."""


class HMCState(NamedTuple):
    """Current point of every chain: position, ``U`` (float64, ``(C,)``) and ``grad U``."""

    position: Position
    potential: Tensor
    grad: Position


class HMCInfo(NamedTuple):
    """What one transition did, per chain."""

    accept_prob: Tensor
    """``min(1, exp(-energy_error))`` (0 for a non-finite end point)."""
    accepted: Tensor
    energy_error: Tensor
    """``H(end) - H(start)`` of the proposal (float64; ``inf`` for a divergence)."""


class DualAveragingState(NamedTuple):
    """Per-chain state of Nesterov dual averaging of ``log eps`` (Hoffman & Gelman 2014)."""

    log_step: Tensor
    log_step_avg: Tensor
    h_avg: Tensor
    mu: Tensor
    count: int


class HMCResult(NamedTuple):
    """Output of :func:`sample`."""

    samples: SampleStore
    """Kept samples, in the order (iteration, chain); ``samples.chains`` gives each row's chain."""
    step_size: Tensor
    """The per-chain step size used for sampling (set at the end of burn-in)."""
    accept_rate: Tensor
    """Per-chain mean acceptance probability during sampling."""
    history: dict[str, np.ndarray]
    """Per iteration ``(T, C)``: ``accept_prob``, ``energy_error``, ``potential``, ``step_size``
    (nominal, before jitter); ``phase`` ``(T,)`` is 0 in burn-in, 1 while sampling."""
    n_grad_evals: int
    """Gradient evaluations per chain (``L`` per transition, plus 1 at the start)."""
    wall_time_s: float
    grad_evals_per_s: float
    """Chain-gradient evaluations per second: ``C * n_grad_evals / wall_time_s``."""
    force_precision: str = "fp32"
    """The precision of the leapfrog forces (:class:`ForcePrecision`); ``U`` was always exact."""


# --------------------------------------------------------------------------- precision


class ForcePrecision(str, enum.Enum):
    """Arithmetic of the leapfrog forces; the Metropolis step always uses full-precision ``U``."""

    FP32 = "fp32"
    """As the potential computes (the global matmul settings, unchanged)."""
    TF32 = "tf32"
    """float32 tensors, matrix products and convolutions in TF32 (CUDA; no effect on the CPU)."""
    BF16 = "bf16"
    """``torch.autocast(dtype=torch.bfloat16)``: matrix products in bf16, reductions in float32."""


@contextlib.contextmanager
def _fp32_precision(value: str):
    """Set CUDA matmul and cuDNN float32 precision (``"ieee"`` or ``"tf32"``), restored on exit."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    saved = (matmul.fp32_precision, cudnn.fp32_precision)
    matmul.fp32_precision, cudnn.fp32_precision = value, value
    try:
        yield
    finally:
        matmul.fp32_precision, cudnn.fp32_precision = saved


def force_precision(precision: ForcePrecision | str, device: torch.device | str):
    """The context in which :func:`leapfrog` computes its forces on ``device``."""
    precision = ForcePrecision(precision)
    if precision is ForcePrecision.TF32:
        return _fp32_precision("tf32")
    if precision is ForcePrecision.BF16:
        return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def exact_precision(precision: ForcePrecision | str):
    """The context of the Metropolis step's ``U`` when the forces are reduced: full float32
    (TF32 off); a no-op for ``fp32`` forces, which leave the global settings as they are."""
    if ForcePrecision(precision) is ForcePrecision.FP32:
        return contextlib.nullcontext()
    return _fp32_precision("ieee")


def _exact_potential(potential_fn: Potential, position: Position, precision) -> Tensor:
    with torch.no_grad(), exact_precision(precision):
        return potential_fn(position).detach().to(torch.float64)


# --------------------------------------------------------------------------- kernel


def value_and_grad(potential_fn: Potential, position: Position,
                   precision: ForcePrecision | str = ForcePrecision.FP32) -> tuple[Tensor, Position]:
    """``U`` (detached, float64, ``(C,)``) and ``grad U`` of every chain in one backward pass.

    The chains are independent, so the gradient of ``sum_c U_c`` is each chain's own gradient.
    With a reduced ``precision`` both are computed in it (:func:`force_precision`).
    """
    leaves = {k: v.detach().requires_grad_(True) for k, v in position.items()}
    device = next(iter(position.values())).device
    with torch.enable_grad(), force_precision(precision, device):
        u = potential_fn(leaves)
        grads = torch.autograd.grad(u.sum(), list(leaves.values()))
    return u.detach().to(torch.float64), {k: g.detach().to(leaves[k].dtype) for k, g in zip(leaves, grads)}


def init(position: Position, potential_fn: Potential,
         precision: ForcePrecision | str = ForcePrecision.FP32) -> HMCState:
    """The state at ``position`` (one gradient evaluation; with reduced-precision forces, also
    one full-precision evaluation of ``U``)."""
    u, g = value_and_grad(potential_fn, position, precision)
    if ForcePrecision(precision) is not ForcePrecision.FP32:
        u = _exact_potential(potential_fn, position, precision)
    return HMCState({k: v.detach() for k, v in position.items()}, u, g)


def leapfrog(
    position: Position,
    momentum: Position,
    grad: Position,
    step_size: Tensor,
    n_steps: int,
    potential_fn: Potential,
    precision: ForcePrecision | str = ForcePrecision.FP32,
) -> tuple[Position, Position, Tensor, Position]:
    """``n_steps`` leapfrog steps (``n_steps`` gradient evaluations).

    Args:
        position, momentum, grad: per-chain dicts with a leading chain axis.
        step_size: ``(C,)`` step sizes.
        precision: of the forces (module docstring); positions and momenta stay in their dtype.

    Returns:
        ``(position, momentum, potential, grad)`` at the end of the trajectory; ``potential`` in
        full precision whatever the forces' (one extra forward pass when they are reduced).
    """
    q, p = dict(position), dict(momentum)
    half = {k: _per_chain(0.5 * step_size, v) for k, v in q.items()}
    full = {k: _per_chain(step_size, v) for k, v in q.items()}
    p = {k: p[k] - half[k] * grad[k] for k in p}
    u = None
    for i in range(n_steps):
        q = {k: q[k] + full[k] * p[k] for k in q}
        u, grad = value_and_grad(potential_fn, q, precision)
        scale = full if i < n_steps - 1 else half
        p = {k: p[k] - scale[k] * grad[k] for k in p}
    if n_steps and ForcePrecision(precision) is not ForcePrecision.FP32:
        u = _exact_potential(potential_fn, q, precision)
    return q, p, u, grad


def hmc_step(
    state: HMCState,
    potential_fn: Potential,
    step_size: Tensor,
    n_leapfrog: int,
    generator: torch.Generator,
    precision: ForcePrecision | str = ForcePrecision.FP32,
    *,
    trajectory: Callable | None = None,
) -> tuple[HMCState, HMCInfo]:
    """One HMC transition for every chain (module docstring, steps 1 to 3; forces in ``precision``).

    ``trajectory``: the leapfrog trajectory to run, ``(position, momentum, grad, step_size) ->
    (position, momentum, potential, grad)`` (a recorded CUDA graph of :func:`leapfrog`, say);
    None: :func:`leapfrog` with ``n_leapfrog`` steps. The momenta, the trajectory and the
    Metropolis draw come in this order whichever.
    """
    ref = next(iter(state.position.values()))
    n_chains = ref.shape[0]
    momentum = {k: _randn_like(v, generator) for k, v in state.position.items()}
    if trajectory is None:
        q, p, u, g = leapfrog(state.position, momentum, state.grad, step_size, n_leapfrog, potential_fn,
                              precision)
    else:
        q, p, u, g = trajectory(state.position, momentum, state.grad, step_size)
    h0 = state.potential + _kinetic(momentum)
    h1 = u + _kinetic(p)
    energy_error = h1 - h0
    energy_error = torch.where(torch.isfinite(energy_error), energy_error,
                               torch.full_like(energy_error, math.inf))
    accept_prob = torch.exp(torch.clamp(-energy_error, max=0.0))
    uniform = torch.rand(n_chains, generator=generator, dtype=torch.float64,
                         device=generator.device).to(accept_prob.device)
    accepted = uniform < accept_prob
    new_position = {k: torch.where(_per_chain(accepted, v), q[k], v) for k, v in state.position.items()}
    new_grad = {k: torch.where(_per_chain(accepted, v), g[k], v) for k, v in state.grad.items()}
    new_u = torch.where(accepted, u, state.potential)
    return HMCState(new_position, new_u, new_grad), HMCInfo(accept_prob, accepted, energy_error)


# --------------------------------------------------------------------------- adaptation


def dual_averaging_init(step_size: Tensor) -> DualAveragingState:
    """Start dual averaging at ``step_size`` (``(C,)``); ``mu = log(10 eps_0)``."""
    log_eps = torch.log(torch.as_tensor(step_size, dtype=torch.float64))
    zeros = torch.zeros_like(log_eps)
    return DualAveragingState(log_eps, zeros.clone(), zeros.clone(), math.log(10.0) + log_eps, 0)


def dual_averaging_update(
    state: DualAveragingState,
    accept_prob: Tensor,
    target: float,
    *,
    gamma: float = 0.05,
    t0: float = 10.0,
    kappa: float = 0.75,
) -> DualAveragingState:
    """One update of Hoffman & Gelman (2014, Alg. 5), per chain.

    ``H_m = (1 - 1/(m + t0)) H_{m-1} + (target - alpha_m) / (m + t0)``,
    ``log eps_m = mu - sqrt(m) / gamma * H_m``,
    ``log eps_avg_m = m^-kappa log eps_m + (1 - m^-kappa) log eps_avg_{m-1}``.
    """
    m = state.count + 1
    alpha = accept_prob.to(torch.float64).cpu()
    h_avg = (1.0 - 1.0 / (m + t0)) * state.h_avg + (target - alpha) / (m + t0)
    log_step = state.mu - math.sqrt(m) / gamma * h_avg
    weight = m ** (-kappa)
    log_step_avg = weight * log_step + (1.0 - weight) * state.log_step_avg
    return DualAveragingState(log_step, log_step_avg, h_avg, state.mu, m)


# --------------------------------------------------------------------------- sampler


class SamplerState(NamedTuple):
    """A run of :class:`Sampler` between two transitions: everything its continuation depends on
    besides the generator's state (and what it recorded: :class:`Trace`)."""

    chain: HMCState
    adaptation: DualAveragingState
    step_size: Tensor
    """The per-chain nominal step size (float64, CPU): adapted in burn-in, then fixed."""
    iteration: int
    """Transitions done."""
    n_grad_evals: int
    """Gradient evaluations per chain so far (1 at the start, ``L`` per transition)."""


@dataclass(frozen=True)
class Sampler:
    """HMC with dual-averaging adaptation in burn-in (module docstring), its settings bound once:
    :meth:`init` gives the state at a starting point, :meth:`step` one transition from a state.

    Attributes:
        potential_fn: ``U`` of a position dict with leading chain axis ``C``; returns ``(C,)``.
        n_burnin: transitions whose draws are discarded; the step size adapts only here.
        n_samples: draws kept per chain.
        n_leapfrog: leapfrog steps per transition.
        thin: one transition in ``thin`` is kept after burn-in.
        target_accept: the dual-averaging target.
        adapt: tune the step size in burn-in (False: keep the initial step size).
        jitter: the step-size jitter ``j`` in ``[0, 1)`` (module docstring, step 0).
        precision: of the leapfrog forces (:class:`ForcePrecision`).
        trajectory: the leapfrog trajectory, ``(position, momentum, grad, step_size) ->
            (position, momentum, potential, grad)`` (a recorded CUDA graph, say); None:
            :func:`leapfrog` with ``n_leapfrog``, ``potential_fn`` and ``precision``.
    """

    potential_fn: Potential
    n_burnin: int
    n_samples: int
    n_leapfrog: int
    thin: int = 1
    target_accept: float = 0.8
    adapt: bool = True
    jitter: float = 0.2
    precision: ForcePrecision = ForcePrecision.FP32
    trajectory: Callable | None = None

    def __post_init__(self):
        if not 0.0 <= self.jitter < 1.0:
            raise ValueError(f"jitter must be in [0, 1), got {self.jitter}")
        if self.thin < 1:
            raise ValueError(f"thin must be >= 1, got {self.thin}")
        object.__setattr__(self, "precision", ForcePrecision(self.precision))

    @property
    def total(self) -> int:
        """Transitions in the whole run: ``n_burnin + n_samples * thin``."""
        return self.n_burnin + self.n_samples * self.thin

    def keeps(self, iteration: int) -> bool:
        """Whether transition ``iteration`` (counted from 0) ends on a kept draw."""
        return iteration >= self.n_burnin and (iteration - self.n_burnin) % self.thin == self.thin - 1

    def init(self, position: Position, step_size: float | Tensor) -> SamplerState:
        """The state at ``position`` (one gradient evaluation) with the initial ``step_size``
        (float or ``(C,)``)."""
        n_chains = next(iter(position.values())).shape[0]
        eps = torch.as_tensor(step_size, dtype=torch.float64).expand(n_chains).clone()
        return SamplerState(init(position, self.potential_fn, self.precision), dual_averaging_init(eps), eps, 0, 1)

    def step(self, state: SamplerState, generator: torch.Generator) -> tuple[SamplerState, HMCInfo]:
        """One transition (jitter, :func:`hmc_step`) and, in burn-in, one adaptation update."""
        it, eps = state.iteration, state.step_size
        ref = next(iter(state.chain.position.values()))
        step = eps
        if self.jitter:  # drawn only when asked for, so jitter=0 leaves the random stream as it was
            u = torch.rand(ref.shape[0], generator=generator, dtype=torch.float64, device=generator.device).cpu()
            step = eps * (1.0 + self.jitter * (2.0 * u - 1.0))
        chain, info = hmc_step(state.chain, self.potential_fn, step.to(ref.device, ref.dtype), self.n_leapfrog,
                               generator, self.precision, trajectory=self.trajectory)
        da = state.adaptation
        if it < self.n_burnin and self.adapt:
            da = dual_averaging_update(da, info.accept_prob, self.target_accept)
            eps = torch.exp(da.log_step if it < self.n_burnin - 1 else da.log_step_avg)
        return SamplerState(chain, da, eps, it + 1, state.n_grad_evals + self.n_leapfrog), info

    def stepper(self, generator: torch.Generator, trace: Trace,
                keep: Callable[[Position], None]) -> Callable[[SamplerState], SamplerState]:
        """The step :func:`symlib.inference.loop.run` applies: :meth:`step`, recorded in
        ``trace``, each kept draw's positions (leading axis ``C``) handed to ``keep``."""
        def transition(state: SamplerState) -> SamplerState:
            new, info = self.step(state, generator)
            trace.record(state, new, info)
            if self.keeps(state.iteration):
                keep(new.chain.position)
            return new

        return transition


class Trace:
    """What a run records of every transition: per iteration and chain ``accept_prob``,
    ``energy_error``, ``potential`` and the nominal ``step_size`` (before jitter), and the
    ``phase`` (0 in burn-in, 1 while sampling), in arrays of the whole run's length."""

    def __init__(self, total: int, n_chains: int, n_burnin: int):
        self.n_burnin = n_burnin
        self.history = {k: np.zeros((total, n_chains)) for k in HISTORY_KEYS}
        self.phase = np.zeros(total, dtype=np.int8)

    @classmethod
    def of(cls, history: dict[str, np.ndarray], phase: np.ndarray, n_burnin: int) -> Trace:
        """A trace continuing from arrays :attr:`history` and :attr:`phase` (a checkpoint's)."""
        trace = cls.__new__(cls)
        trace.n_burnin, trace.history, trace.phase = n_burnin, history, phase
        return trace

    def record(self, before: SamplerState, after: SamplerState, info: HMCInfo) -> None:
        """Record the transition from ``before`` to ``after``."""
        it = before.iteration
        self.history["accept_prob"][it] = info.accept_prob.cpu().numpy()
        self.history["energy_error"][it] = info.energy_error.cpu().numpy()
        self.history["potential"][it] = after.chain.potential.cpu().numpy()
        self.history["step_size"][it] = before.step_size.numpy()
        self.phase[it] = 0 if it < self.n_burnin else 1

    def until(self, n: int) -> dict[str, np.ndarray]:
        """The history of the first ``n`` transitions, ``phase`` included."""
        return {k: v[:n] for k, v in self.history.items()} | {"phase": self.phase[:n]}

    def accept_rate(self, n: int) -> Tensor:
        """Per-chain mean acceptance probability over the sampling transitions among the first
        ``n`` (NaN before any)."""
        sampling = self.phase[:n] == 1
        n_chains = self.history["accept_prob"].shape[1]
        return torch.as_tensor(self.history["accept_prob"][:n][sampling].mean(0) if sampling.any()
                               else np.full(n_chains, math.nan))


def progress_bar(total: int, done: int, trace: Trace, *, desc: str, enabled: bool):
    """A ``tqdm`` bar over a run's transitions and the ``on_step`` of
    :func:`symlib.inference.loop.run` that moves it (with the acceptance and step size)."""
    bar = tqdm(total=total, initial=done, desc=desc, disable=not enabled, mininterval=2.0)

    def on_step(state: SamplerState) -> None:
        bar.update(1)
        it = state.iteration - 1
        if enabled and (it % 10 == 0 or state.iteration == total):
            bar.set_postfix(accept=f"{trace.history['accept_prob'][it].mean():.2f}",
                            eps=f"{state.step_size.mean().item():.2e}")

    return bar, on_step


def _iteration(state: SamplerState) -> int:
    return state.iteration


# --------------------------------------------------------------------------- driver


def sample(
    potential_fn: Potential,
    init_position: Position,
    *,
    n_burnin: int,
    n_samples: int,
    n_leapfrog: int,
    step_size: float | Tensor,
    generator: torch.Generator,
    thin: int = 1,
    target_accept: float = 0.8,
    adapt: bool = True,
    jitter: float = 0.2,
    store: SampleStore | None = None,
    max_memory_bytes: int = 1 << 30,
    store_dir: str | None = None,
    progress: bool = True,
    desc: str = "HMC",
    force_precision: ForcePrecision | str = ForcePrecision.FP32,
) -> HMCResult:
    """Run every chain for ``n_burnin + n_samples * thin`` transitions; keep every ``thin``-th after burn-in.

    The transitions are :class:`Sampler`'s, applied by :func:`symlib.inference.loop.run` (the
    loop :func:`symlib.inference.hmc_resumable.sample_resumable` runs in pieces), without
    checkpoints.

    Args:
        potential_fn: ``U`` of a position dict with leading chain axis ``C``; returns ``(C,)``.
        init_position: starting point of each chain (leading axis ``C``).
        n_burnin: transitions whose samples are discarded; the step size adapts only here.
        n_samples: samples kept per chain.
        n_leapfrog: leapfrog steps per transition (fixed).
        step_size: initial step size (float or ``(C,)``).
        generator: source of momenta, jitter and acceptance draws, made on its device and moved
            to the chains'. A CPU generator gives the same draws on every device; on a GPU a
            generator there is much faster (a CPU draws every transition's momenta, ``C`` times
            the network's size, on one thread, then copies them over).
        thin: keep one transition in ``thin`` after burn-in.
        target_accept: dual-averaging target.
        adapt: tune the step size during burn-in (False: keep ``step_size`` throughout).
        jitter: each transition scales every chain's step size by its own ``Uniform(1 - jitter,
            1 + jitter)`` draw (module docstring, step 0); in ``[0, 1)``. ``0``: a fixed
            trajectory, and no draws for it (the random stream is that of a jitter-free sampler).
        store: where to put samples; default a new :class:`SampleStore` with capacity
            ``n_samples * C`` and the given memory budget / directory.
        progress: a plain ``tqdm`` bar on stderr.
        force_precision: ``"fp32"`` (default), ``"tf32"`` or ``"bf16"`` leapfrog forces (module
            docstring); the Metropolis step is exact whichever.

    Returns:
        :class:`HMCResult`.

    Raises:
        ValueError: ``jitter`` outside ``[0, 1)`` or ``thin`` below 1.
    """
    sampler = Sampler(potential_fn, n_burnin, n_samples, n_leapfrog, thin, target_accept, adapt, jitter,
                      ForcePrecision(force_precision))
    first = next(iter(init_position.values()))
    n_chains, device = first.shape[0], first.device
    if store is None:
        shapes = {k: tuple(v.shape[1:]) for k, v in init_position.items()}
        store = SampleStore(shapes, n_samples * n_chains, dtype=first.dtype,
                            max_memory_bytes=max_memory_bytes, directory=store_dir)
    start = time.perf_counter()
    state = sampler.init(init_position, step_size)
    total, chains = sampler.total, np.arange(n_chains)
    trace = Trace(total, n_chains, n_burnin)
    bar, on_step = progress_bar(total, 0, trace, desc=desc, enabled=progress)
    state = loop.run(state, sampler.stepper(generator, trace, lambda q: store.append(q, chains=chains)),
                     done=_iteration, total=total, on_step=on_step).state
    bar.close()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    wall = time.perf_counter() - start
    n_grad = state.n_grad_evals
    return HMCResult(store, state.step_size, trace.accept_rate(total), trace.until(total), n_grad, wall,
                     n_chains * n_grad / max(wall, 1e-9), sampler.precision.value)


# --------------------------------------------------------------------------- sample storage


class SampleStore:
    """Append-only storage of parameter samples, in memory or spilled to a disk memmap.

    Each sample is a parameter dict flattened into one row of a ``(capacity, D)`` array. If
    ``capacity * D * itemsize`` exceeds ``max_memory_bytes`` the array is a ``numpy.memmap``
    in a fresh temporary directory (under ``directory`` if given), removed by :meth:`close` or
    when the store is garbage collected.

    Args:
        shapes: key -> shape of one sample's tensor.
        capacity: maximum number of samples.
        dtype: storage dtype (torch dtype).
        max_memory_bytes: in-memory budget.
        directory: parent of the temporary directory for the memmap.
    """

    def __init__(self, shapes: dict[str, tuple[int, ...]], capacity: int, *, dtype=torch.float32,
                 max_memory_bytes: int = 1 << 30, directory: str | None = None):
        self.shapes = {k: tuple(int(d) for d in s) for k, s in shapes.items()}
        self.sizes = {k: math.prod(s) for k, s in self.shapes.items()}
        self.dim = sum(self.sizes.values())
        self.capacity = int(capacity)
        self.dtype = dtype
        np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
        nbytes = self.capacity * self.dim * np_dtype.itemsize
        self.on_disk = nbytes > max_memory_bytes
        self.path = None
        if self.on_disk:
            folder = tempfile.mkdtemp(prefix="symlib-hmc-", dir=directory)
            self.path = f"{folder}/samples.f{np_dtype.itemsize * 8}"
            self._data = np.memmap(self.path, dtype=np_dtype, mode="w+", shape=(max(self.capacity, 1), self.dim))
            self._finalizer = weakref.finalize(self, shutil.rmtree, folder, True)
        else:
            self._data = np.empty((self.capacity, self.dim), dtype=np_dtype)
            self._finalizer = None
        self.chains = np.full(self.capacity, -1, dtype=np.int64)
        self.count = 0

    def __len__(self) -> int:
        return self.count

    @property
    def nbytes(self) -> int:
        return int(self.count * self.dim * self._data.dtype.itemsize)

    def append(self, params: dict[str, Tensor], chains=None) -> None:
        """Append ``B`` samples given as a dict of tensors with a leading axis ``B``."""
        rows = torch.cat([params[k].detach().reshape(params[k].shape[0], -1) for k in self.shapes], dim=1)
        n = rows.shape[0]
        if self.count + n > self.capacity:
            raise ValueError(f"store is full ({self.capacity} samples)")
        self._data[self.count: self.count + n] = rows.to("cpu", self.dtype).numpy()
        self.chains[self.count: self.count + n] = np.arange(n) if chains is None else np.asarray(chains)
        self.count += n

    def batch(self, indices, *, device=None) -> dict[str, Tensor]:
        """Samples ``indices`` as a dict of tensors with a leading axis."""
        idx = np.asarray(indices, dtype=np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= self.count):
            raise IndexError(f"sample index out of range [0, {self.count})")
        rows = torch.from_numpy(np.ascontiguousarray(self._data[idx]))
        return self._unflatten(rows, device)

    def get(self, index: int, *, device=None) -> dict[str, Tensor]:
        """One sample as an unbatched dict."""
        return {k: v[0] for k, v in self.batch([index], device=device).items()}

    def iter_batches(self, batch_size: int, *, device=None) -> Iterator[dict[str, Tensor]]:
        """All samples in order, ``batch_size`` at a time."""
        for lo in range(0, self.count, batch_size):
            yield self.batch(range(lo, min(lo + batch_size, self.count)), device=device)

    def close(self) -> None:
        """Release the memmap and delete its directory (no-op for an in-memory store)."""
        self._data = None
        if self._finalizer is not None:
            self._finalizer()

    def _unflatten(self, rows: Tensor, device) -> dict[str, Tensor]:
        out, lo = {}, 0
        for k, shape in self.shapes.items():
            size = self.sizes[k]
            out[k] = rows[:, lo: lo + size].reshape(rows.shape[0], *shape).to(device or "cpu")
            lo += size
        return out


# --------------------------------------------------------------------------- MLP potential


def mlp_classification_potential(
    spec: MLPSpec, x: Tensor, y: Tensor, *, prior_sd: float = 1.0
) -> Potential:
    """``U(w) = sum_i CE(f(x_i; w), y_i) + ||w||^2 / (2 prior_sd^2)`` for chains of MLP weights.

    The forward pass is :func:`symlib.nn.mlp.mlp_forward` vmapped over the chain axis; the data
    term is summed in float64 so that the energy difference in the Metropolis step is not lost
    to rounding of a large sum.
    """
    n = x.shape[0]
    forward = torch.func.vmap(mlp_forward, in_dims=(0, None, None))

    labels = y.reshape(1, n, 1)

    def potential(params: Position) -> Tensor:
        logits = forward(params, x, spec)                                     # (chains, n, k)
        # CE as logsumexp minus the label's logit: on the CPU, with few classes, 3x faster
        # forward and backward than F.cross_entropy / log_softmax (one thread, 8 x 4,000 x 10)
        picked = logits.gather(-1, labels.expand(logits.shape[0], n, 1))[..., 0]
        ce = torch.logsumexp(logits, -1) - picked
        prior = sum(v.to(torch.float64).square().flatten(1).sum(1) for v in params.values())
        return ce.to(torch.float64).sum(1) + 0.5 * prior / prior_sd**2

    return potential


def mlp_regression_potential(
    spec: MLPSpec, x: Tensor, y: Tensor, *, noise_sd: float, prior_sd: float = 1.0
) -> Potential:
    """``U(w) = sum_i ||y_i - f(x_i; w)||^2 / (2 sigma^2) + ||w||^2 / (2 prior_sd^2)`` (+ const).

    The Gaussian-likelihood twin of :func:`mlp_classification_potential` with a fixed noise sd
    ``sigma``; the constant ``n log(sigma sqrt(2 pi))`` is left out (it cancels in HMC).
    ``y`` is ``(n, out)``. ``prior_sd = inf`` drops the prior (a likelihood alone).
    """
    forward = torch.func.vmap(mlp_forward, in_dims=(0, None, None))

    def potential(params: Position) -> Tensor:
        resid = (forward(params, x, spec) - y).to(torch.float64)
        data = 0.5 * resid.square().flatten(1).sum(1) / noise_sd**2
        prior = sum(v.to(torch.float64).square().flatten(1).sum(1) for v in params.values())
        return data + 0.5 * prior / prior_sd**2

    return potential


# --------------------------------------------------------------------------- internals


def _per_chain(v: Tensor, like: Tensor) -> Tensor:
    """Reshape a per-chain ``(C,)`` tensor to broadcast against ``like`` ``(C, ...)``."""
    v = v.to(like.device)
    if v.dtype.is_floating_point:
        v = v.to(like.dtype)
    return v.reshape((-1,) + (1,) * (like.ndim - 1))


def _kinetic(momentum: Position) -> Tensor:
    return 0.5 * sum(p.to(torch.float64).square().flatten(1).sum(1) for p in momentum.values())


def _randn_like(v: Tensor, generator: torch.Generator) -> Tensor:
    z = torch.randn(v.shape, generator=generator, dtype=v.dtype, device=generator.device)
    return z.to(v.device)

"""HMC that survives being stopped: checkpoints, a time budget, and exact resumption.

:func:`sample_resumable` runs the same Markov chains as :func:`symlib.inference.hmc.sample` (the
same transitions, adaptation and random stream: with no interruption its draws and history are
those of ``hmc.sample`` bit for bit) and writes a checkpoint, at most every ``every_s`` seconds,
holding everything the rest of the run depends on:

- each chain's position, potential and gradient (the gradient too: recomputing it on another
  device could differ in its last bits and the resumed chain would drift from the uninterrupted
  one);
- the dual-averaging state and current step sizes, the iteration reached and gradient count;
- the generator's state (``torch.Generator.get_state``; CPU or CUDA);
- the history so far and the draws kept so far: whole positions, or, with ``summarize``, what
  the claims need of each (e.g. the predictive logits at fixed test points: function space), so
  that a checkpoint of a width-512 run stays small enough to carry between machines;
- with ``accumulate``, the state of a streaming reduction of the kept draws (an
  :class:`Accumulator`: running moments, a predictive mean), fed each kept draw as it is made, so
  that a run whose evaluation needs every draw's weights keeps none of them.

A run killed at any moment (between two checkpoints it loses only the transitions since the
last) and started again with the same arguments continues from the checkpoint and gives exactly
the numbers of an uninterrupted run. ``budget_s`` (default ``$SYMLIB_BUDGET_S``) stops a run
cleanly once that many seconds of this piece have passed, leaving its checkpoint; the result then
says ``complete=False`` and the next call continues. A checkpoint records the run's settings and
is refused, naming the difference, by a call with other settings. Checkpoints are written
atomically (temporary file, fsync, rename): a kill during a write leaves the previous one.

On a GPU each transition's leapfrog trajectory is replayed as one recorded CUDA graph
(``capture="auto"``, :func:`symlib.inference.capture.capture`): a small network's gradient is
bound by the host launching tens of kernels, not by the GPU, so the eager trajectory runs at a
fraction of the device's speed (``benchmarks/bench_hmc_capture.py``). The momenta and the
Metropolis draw stay outside the recording, drawn from ``generator`` in the order ``hmc.hmc_step``
draws them; a replay runs the eager trajectory's kernels on the same inputs, so the chains are the
eager ones up to cuBLAS's choice of algorithm. On the CPU ``"auto"`` is eager (launches cost
little there) and the run is ``hmc.sample``'s bit for bit.

Public: :class:`ResumableResult`, :class:`BudgetExhausted`, :class:`Accumulator`,
:func:`sample_resumable`, :func:`budget_from_env`.
"""

from __future__ import annotations

import io
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple, Protocol

import numpy as np
import torch
from torch import Tensor
from tqdm import tqdm

from symlib.files import atomic_write
from symlib.inference import hmc
from symlib.inference.capture import capture as _capture

__all__ = ["BUDGET_ENV", "PIECE_START_ENV", "Accumulator", "BudgetExhausted", "ResumableResult", "budget_from_env",
           "remaining_budget", "sample_resumable"]

BUDGET_ENV = "SYMLIB_BUDGET_S"
PIECE_START_ENV = "SYMLIB_PIECE_START"
"""When the piece began (seconds since the epoch): set by ``pipeline execute`` / ``compute`` for
each chapter, so that a stage starting late in a piece gets only what is left of its budget."""
FORMAT = 1
HISTORY_KEYS = ("accept_prob", "energy_error", "potential", "step_size")
CAPTURE_MODES = ("auto", "graph", "eager")
"""How :func:`sample_resumable` runs each trajectory (module docstring)."""


class BudgetExhausted(RuntimeError):
    """A piece of a long run stopped at its time budget, its checkpoint written: run the same
    command again to continue. A stage raises it (:meth:`ResumableResult.require_complete`) so
    that nothing partial is cached, and ``python -m symlib.book.pipeline execute`` reports the
    chapter as a piece to continue (exit status 75), not as a failure."""


class Accumulator(Protocol):
    """A streaming reduction of the kept draws that :func:`sample_resumable` checkpoints."""

    def update(self, position: dict[str, Tensor]) -> None:
        """Take in one kept transition: every chain's position, leading axis ``C``."""

    def state_dict(self) -> dict:
        """Everything the reduction depends on, as CPU tensors / numbers (it is saved as is)."""

    def load_state_dict(self, state: dict) -> None:
        """Continue from a :meth:`state_dict` (onto this accumulator's own device)."""


class ResumableResult(NamedTuple):
    """What a piece of :func:`sample_resumable` returns."""

    complete: bool
    """Whether every transition is done (False: stopped at the budget; call again to go on)."""
    kept: Tensor
    """Draws kept so far, ``(kept, C, ...)``: positions flattened to ``(kept, C, D)``, or
    ``summarize``'s output per kept transition; empty with ``accumulate`` and no ``summarize``."""
    history: dict[str, np.ndarray]
    """As :attr:`symlib.inference.hmc.HMCResult.history`, for the transitions done so far."""
    step_size: Tensor
    accept_rate: Tensor
    """Per-chain mean acceptance probability over the sampling transitions done (NaN before any)."""
    transitions: int
    """Transitions done, over all pieces, of ``n_burnin + n_samples * thin``."""
    n_grad_evals: int
    wall_time_s: float
    """Seconds of sampling over all pieces (checkpoint writes included)."""
    pieces: int
    """How many calls the run took so far (1: never resumed)."""
    state: hmc.HMCState
    """The chains' current state."""
    capture: str = "eager"
    """How this piece ran its trajectories: ``"graph"`` (one CUDA graph each) or ``"eager"``."""

    def require_complete(self, what: str = "HMC") -> ResumableResult:
        """This result, if every transition is done; otherwise raise :class:`BudgetExhausted`
        saying how far the run got (for a stage, which must not cache a partial run)."""
        if not self.complete:
            raise BudgetExhausted(f"{what}: stopped at its time budget after piece {self.pieces}, "
                                  f"{self.transitions} transitions done; run again to continue from its checkpoint")
        return self


def budget_from_env() -> float | None:
    """``$SYMLIB_BUDGET_S`` as seconds (unset or empty: no budget).

    Raises:
        ValueError: the variable is not a positive number.
    """
    raw = os.environ.get(BUDGET_ENV, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"{BUDGET_ENV}={raw!r}: give the seconds a piece may run, a positive number")
    return value


def remaining_budget() -> float | None:
    """What is left of :func:`budget_from_env` in this piece: the budget less the seconds since
    ``$SYMLIB_PIECE_START`` (when set; at least a tiny positive number, so a stage that starts
    after the budget stops at once with its checkpoint written), or the whole budget."""
    budget = budget_from_env()
    raw = os.environ.get(PIECE_START_ENV, "").strip()
    if budget is None or not raw:
        return budget
    try:
        started = float(raw)
    except ValueError:
        raise ValueError(f"{PIECE_START_ENV}={raw!r}: the piece's start in seconds since the epoch") from None
    return max(budget - (time.time() - started), 1e-9)


def _settings(init_position, n_burnin, n_samples, n_leapfrog, thin, target_accept, adapt, jitter,
              precision, step_size, kept) -> dict:
    first = next(iter(init_position.values()))
    return {"n_chains": int(first.shape[0]), "shapes": {k: list(v.shape[1:]) for k, v in init_position.items()},
            "n_burnin": n_burnin, "n_samples": n_samples, "n_leapfrog": n_leapfrog, "thin": thin,
            "target_accept": target_accept, "adapt": adapt, "jitter": jitter, "force_precision": precision,
            "step_size": [float(v) for v in torch.as_tensor(step_size, dtype=torch.float64).flatten()],
            "kept": kept}


def _trajectory(potential_fn, n_leapfrog: int, precision, mode: str, state: hmc.HMCState, step: Tensor):
    """``hmc.leapfrog`` over ``n_leapfrog`` steps as one captured step (``mode`` resolved:
    ``"graph"`` or ``"eager"``), recorded for arguments shaped like ``state``'s and ``step``."""
    def run(position, momentum, grad, step_size):
        return hmc.leapfrog(position, momentum, grad, step_size, n_leapfrog, potential_fn, precision)

    if mode == "eager":
        return run
    momentum = {k: torch.zeros_like(v) for k, v in state.position.items()}
    return _capture(run, (state.position, momentum, state.grad, step), mode=mode)


def _transition(state: hmc.HMCState, trajectory, step_size: Tensor,
                generator: torch.Generator) -> tuple[hmc.HMCState, hmc.HMCInfo]:
    """:func:`symlib.inference.hmc.hmc_step` with the trajectory given (captured or eager): the
    momenta, the trajectory and the Metropolis draw in hmc_step's order, so that an eager
    trajectory gives hmc_step's transition bit for bit (``tests/inference/test_hmc_resumable.py``)."""
    n_chains = next(iter(state.position.values())).shape[0]
    momentum = {k: hmc._randn_like(v, generator) for k, v in state.position.items()}
    q, p, u, g = trajectory(state.position, momentum, state.grad, step_size)
    energy_error = u + hmc._kinetic(p) - (state.potential + hmc._kinetic(momentum))
    energy_error = torch.where(torch.isfinite(energy_error), energy_error, torch.full_like(energy_error, math.inf))
    accept_prob = torch.exp(torch.clamp(-energy_error, max=0.0))
    uniform = torch.rand(n_chains, generator=generator, dtype=torch.float64,
                         device=generator.device).to(accept_prob.device)
    accepted = uniform < accept_prob
    keep = {k: hmc._per_chain(accepted, v) for k, v in state.position.items()}
    new = hmc.HMCState({k: torch.where(keep[k], q[k], v) for k, v in state.position.items()},
                       torch.where(accepted, u, state.potential),
                       {k: torch.where(keep[k], g[k], v) for k, v in state.grad.items()})
    return new, hmc.HMCInfo(accept_prob, accepted, energy_error)


def _write(path: Path, payload: dict) -> None:
    """Serialise first, then write whole or not at all: a full disk is reported with the path and
    the space needed (:func:`symlib.files.atomic_write`), not as torch's zip-writer failure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    atomic_write(path, buffer.getvalue(), tmp_prefix=path.name + ".")


def _nbytes(obj) -> int:
    """Bytes of the tensors and arrays in a nest of dicts, lists and tuples."""
    if isinstance(obj, Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, dict):
        return sum(_nbytes(v) for v in obj.values())
    if isinstance(obj, list | tuple):
        return sum(_nbytes(v) for v in obj)
    return 0


def _cpu(position: dict[str, Tensor]) -> dict[str, Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in position.items()}


def sample_resumable(
    potential_fn: hmc.Potential,
    init_position: dict[str, Tensor],
    *,
    checkpoint: str | os.PathLike,
    n_burnin: int,
    n_samples: int,
    n_leapfrog: int,
    step_size: float | Tensor,
    generator: torch.Generator,
    thin: int = 1,
    target_accept: float = 0.8,
    adapt: bool = True,
    jitter: float = 0.2,
    force_precision: hmc.ForcePrecision | str = hmc.ForcePrecision.FP32,
    summarize: Callable[[dict[str, Tensor]], Tensor] | None = None,
    accumulate: Accumulator | None = None,
    every_s: float = 120.0,
    budget_s: float | None = None,
    max_checkpoint_bytes: int = 16 << 20,
    capture: str = "auto",
    progress: bool = False,
    desc: str = "HMC",
) -> ResumableResult:
    """:func:`symlib.inference.hmc.sample` in resumable pieces (module docstring).

    Args:
        potential_fn: as for ``hmc.sample``, and so are ``init_position``, ``n_burnin``,
            ``n_samples``, ``n_leapfrog``, ``step_size``, ``thin``, ``target_accept``, ``adapt``,
            ``jitter`` and ``force_precision``.
        generator: the run's source of randomness; on resumption its state is replaced by the
            checkpoint's (so pass a generator of the same device, seeded as the first time).
        checkpoint: the checkpoint file; if it exists the run continues from it.
        summarize: maps the chains' position (leading axis ``C``) to what is kept of each kept
            transition, ``(C, ...)``; default: the flattened positions (none with ``accumulate``).
        accumulate: fed every kept transition's positions (:class:`Accumulator`); its state is
            part of the checkpoint and, on resumption, replaced by the checkpoint's, so that it
            has seen exactly the kept draws of the uninterrupted run.
        every_s: write a checkpoint when this many seconds passed since the last (0: after
            every transition).
        budget_s: stop once this piece has run this many seconds, after writing a checkpoint
            (default: :func:`remaining_budget`, what is left of ``$SYMLIB_BUDGET_S``; None: run
            to the end).
        max_checkpoint_bytes: refuse to write a larger checkpoint (keep function-space
            summaries instead of positions); 16 MiB, the most a file may weigh between machines.
        capture: how each trajectory runs (module docstring): ``"auto"`` (a CUDA graph on a GPU,
            eager on the CPU), ``"graph"`` or ``"eager"``; part of the checkpoint's settings.
        progress: show a progress bar over this piece's transitions (``desc`` its label).

    Returns:
        :class:`ResumableResult`; ``complete`` says whether the run reached its end.

    Raises:
        ValueError: the checkpoint was written with other settings (named), or would exceed
            ``max_checkpoint_bytes``; ``jitter`` / ``thin`` out of range; an unknown ``capture``.
    """
    if not 0.0 <= jitter < 1.0:
        raise ValueError(f"jitter must be in [0, 1), got {jitter}")
    if thin < 1:
        raise ValueError(f"thin must be >= 1, got {thin}")
    if capture not in CAPTURE_MODES:
        raise ValueError(f"capture must be one of {', '.join(CAPTURE_MODES)}, got {capture!r}")
    budget_s = remaining_budget() if budget_s is None else budget_s
    precision = hmc.ForcePrecision(force_precision)
    path = Path(checkpoint)
    kept_what = "summary" if summarize is not None else "none" if accumulate is not None else "positions"
    if accumulate is not None:
        kept_what += "+" + type(accumulate).__name__
    first = next(iter(init_position.values()))
    n_chains, device, dtype = first.shape[0], first.device, first.dtype
    mode = ("graph" if device.type == "cuda" else "eager") if capture == "auto" else capture
    settings = _settings(init_position, n_burnin, n_samples, n_leapfrog, thin, target_accept, adapt, jitter,
                         precision.value, step_size, kept_what) | {"capture": mode}
    total = n_burnin + n_samples * thin
    start = time.perf_counter()

    if path.is_file():
        saved = torch.load(path, map_location="cpu", weights_only=False)
        if saved.get("format") != FORMAT or saved.get("settings") != settings:
            diff = sorted(k for k in settings if (saved.get("settings") or {}).get(k) != settings[k])
            raise ValueError(f"checkpoint {path} was written by a run with other settings ({', '.join(diff) or 'format'}); "
                             "resume with the same arguments, or move the checkpoint away to start afresh")
        st = saved["state"]
        state = hmc.HMCState({k: v.to(device) for k, v in st["position"].items()}, st["potential"].to(device),
                             {k: v.to(device) for k, v in st["grad"].items()})
        da = hmc.DualAveragingState(**saved["da"])
        eps, it, n_grad = saved["eps"], saved["it"], saved["n_grad"]
        hist = {k: np.array(v) for k, v in saved["history"].items()}
        phase, kept = saved["phase"], list(saved["kept"])
        generator.set_state(saved["generator"])
        if accumulate is not None:
            accumulate.load_state_dict(saved["accumulated"])
        # a finished run's checkpoint is read, not resumed: no new piece, nothing written again
        wall_before, pieces = saved["wall_s"], saved["pieces"] + (1 if it < total else 0)
    else:
        eps = torch.as_tensor(step_size, dtype=torch.float64).expand(n_chains).clone()
        da = hmc.dual_averaging_init(eps)
        state = hmc.init(init_position, potential_fn, precision)
        it, n_grad, kept, wall_before, pieces = 0, 1, [], 0.0, 1
        hist = {k: np.zeros((total, n_chains)) for k in HISTORY_KEYS}
        phase = np.zeros(total, dtype=np.int8)

    def save(wall_s: float | None = None) -> None:
        accumulated = accumulate.state_dict() if accumulate is not None else None
        size = sum(t.numel() * t.element_size() for t in kept) + sum(a.nbytes for a in hist.values())
        size += sum(v.numel() * v.element_size() for v in state.position.values()) * 2
        size += _nbytes(accumulated)
        if size > max_checkpoint_bytes:  # checked before copying the state off the device
            raise ValueError(f"the checkpoint would weigh about {size / 2**20:.1f} MiB, over "
                             f"{max_checkpoint_bytes / 2**20:.0f} MiB: keep summaries (summarize=...) or thin more")
        payload = {"format": FORMAT, "settings": settings, "it": it, "n_grad": n_grad, "eps": eps,
                   "state": {"position": _cpu(state.position), "potential": state.potential.cpu(),
                             "grad": _cpu(state.grad)},
                   "da": da._asdict(), "generator": generator.get_state(), "history": hist, "phase": phase,
                   "kept": kept, "accumulated": accumulated, "wall_s": wall_before + time.perf_counter() - start if wall_s is None else wall_s,
                   "pieces": pieces}
        _write(path, payload)

    last_save = time.perf_counter()
    stopped, it_start = False, it
    trajectory = _trajectory(potential_fn, n_leapfrog, precision, mode, state,
                             eps.to(device, dtype)) if it < total else None
    bar = tqdm(total=total, initial=it, desc=desc, disable=not progress, mininterval=2.0)
    while it < total:
        burning = it < n_burnin
        step = eps
        if jitter:
            u = torch.rand(n_chains, generator=generator, dtype=torch.float64, device=generator.device).cpu()
            step = eps * (1.0 + jitter * (2.0 * u - 1.0))
        state, info = _transition(state, trajectory, step.to(device, dtype), generator)
        n_grad += n_leapfrog
        hist["accept_prob"][it] = info.accept_prob.cpu().numpy()
        hist["energy_error"][it] = info.energy_error.cpu().numpy()
        hist["potential"][it] = state.potential.cpu().numpy()
        hist["step_size"][it] = eps.numpy()
        phase[it] = 0 if burning else 1
        if burning and adapt:
            da = hmc.dual_averaging_update(da, info.accept_prob, target_accept)
            eps = torch.exp(da.log_step if it < n_burnin - 1 else da.log_step_avg)
        if not burning and (it - n_burnin) % thin == thin - 1:
            if accumulate is not None:
                accumulate.update(state.position)
            if summarize is not None or accumulate is None:
                draw = summarize(state.position) if summarize is not None else \
                    torch.cat([v.reshape(n_chains, -1) for v in state.position.values()], 1)
                kept.append(draw.detach().cpu().clone())
        it += 1
        bar.update(1)
        now = time.perf_counter()
        over = budget_s is not None and now - start >= budget_s
        if it < total and (over or now - last_save >= every_s):
            save()
            last_save = time.perf_counter()
            if over:
                stopped = True
                break
    bar.close()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    wall = wall_before + (time.perf_counter() - start if it > it_start else 0.0)
    if not stopped and it > it_start:
        save(wall)   # the finished run's checkpoint: a later call returns it without sampling again
    sampling = phase[:it] == 1
    accept_rate = torch.as_tensor(hist["accept_prob"][:it][sampling].mean(0) if sampling.any()
                                  else np.full(n_chains, math.nan))
    done_hist = {k: v[:it] for k, v in hist.items()} | {"phase": phase[:it]}
    kept_t = torch.stack(kept) if kept else torch.empty(0)
    return ResumableResult(not stopped, kept_t, done_hist, eps, accept_rate, it, n_grad, wall, pieces, state, mode)

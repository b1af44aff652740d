"""HMC that survives being stopped: checkpoints, a time budget, and exact resumption.

:func:`sample_resumable` runs the same Markov chains as :func:`symlib.inference.hmc.sample`: the
same step (:class:`symlib.inference.hmc.Sampler`) in the same loop
(:func:`symlib.inference.loop.run`), so with no interruption its draws and history are those of
``hmc.sample`` bit for bit. It also writes a checkpoint, at most every ``every_s`` seconds,
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
the numbers of an uninterrupted run. ``budget_s`` (an argument: a stage passes what is left of its
run's time) stops a run cleanly once that many seconds of this piece have passed, leaving its
checkpoint; the result then
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

Public: :class:`ResumableResult`, :class:`Accumulator`, :func:`sample_resumable`, and
:class:`~symlib.inference.loop.BudgetExhausted` (defined with the loop, importable from here).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple, Protocol

import numpy as np
import torch
from torch import Tensor

from symlib.inference import hmc, loop
from symlib.inference.capture import capture as _capture
from symlib.inference.loop import BudgetExhausted

__all__ = ["Accumulator", "ResumableResult", "sample_resumable"]

FORMAT = 1
"""The checkpoint's layout (:func:`sample_resumable`'s ``save``)."""
CAPTURE_MODES = ("auto", "graph", "eager")
"""How :func:`sample_resumable` runs each trajectory (module docstring)."""


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
    ``"graph"`` or ``"eager"``: None, :func:`~symlib.inference.hmc.hmc_step`'s own leapfrog),
    recorded for arguments shaped like ``state``'s and ``step``."""
    if mode == "eager":
        return None

    def run(position, momentum, grad, step_size):
        return hmc.leapfrog(position, momentum, grad, step_size, n_leapfrog, potential_fn, precision)

    momentum = {k: torch.zeros_like(v) for k, v in state.position.items()}
    return _capture(run, (state.position, momentum, state.grad, step), mode=mode)


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
            (a stage passes what is left of its run's time:
            :meth:`symlib.book.chapter.StageContext.budget_s`); None: run to the end.
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
    if capture not in CAPTURE_MODES:
        raise ValueError(f"capture must be one of {', '.join(CAPTURE_MODES)}, got {capture!r}")
    precision = hmc.ForcePrecision(force_precision)
    sampler = hmc.Sampler(potential_fn, n_burnin, n_samples, n_leapfrog, thin, target_accept, adapt, jitter,
                          precision)
    path = Path(checkpoint)
    kept_what = "summary" if summarize is not None else "none" if accumulate is not None else "positions"
    if accumulate is not None:
        kept_what += "+" + type(accumulate).__name__
    first = next(iter(init_position.values()))
    n_chains, device, dtype = first.shape[0], first.device, first.dtype
    mode = ("graph" if device.type == "cuda" else "eager") if capture == "auto" else capture
    settings = _settings(init_position, n_burnin, n_samples, n_leapfrog, thin, target_accept, adapt, jitter,
                         precision.value, step_size, kept_what) | {"capture": mode}
    total = sampler.total
    start = time.perf_counter()

    if path.is_file():
        saved = loop.read_checkpoint(path, format=FORMAT, settings=settings, what="run")
        st = saved["state"]
        chain = hmc.HMCState({k: v.to(device) for k, v in st["position"].items()}, st["potential"].to(device),
                             {k: v.to(device) for k, v in st["grad"].items()})
        state = hmc.SamplerState(chain, hmc.DualAveragingState(**saved["da"]), saved["eps"], saved["it"],
                                 saved["n_grad"])
        trace = hmc.Trace.of({k: np.array(v) for k, v in saved["history"].items()}, saved["phase"], n_burnin)
        kept = list(saved["kept"])
        generator.set_state(saved["generator"])
        if accumulate is not None:
            accumulate.load_state_dict(saved["accumulated"])
        # a finished run's checkpoint is read, not resumed: no new piece, nothing written again
        wall_before, pieces = saved["wall_s"], saved["pieces"] + (1 if state.iteration < total else 0)
    else:
        state = sampler.init(init_position, step_size)
        trace = hmc.Trace(total, n_chains, n_burnin)
        kept, wall_before, pieces = [], 0.0, 1

    def save(state: hmc.SamplerState, wall_s: float | None = None) -> None:
        accumulated = accumulate.state_dict() if accumulate is not None else None
        size = sum(t.numel() * t.element_size() for t in kept) + sum(a.nbytes for a in trace.history.values())
        size += sum(v.numel() * v.element_size() for v in state.chain.position.values()) * 2
        size += _nbytes(accumulated)
        if size > max_checkpoint_bytes:  # checked before copying the state off the device
            raise ValueError(f"the checkpoint would weigh about {size / 2**20:.1f} MiB, over "
                             f"{max_checkpoint_bytes / 2**20:.0f} MiB: keep summaries (summarize=...) or thin more")
        chain = state.chain
        payload = {"format": FORMAT, "settings": settings, "it": state.iteration, "n_grad": state.n_grad_evals,
                   "eps": state.step_size,
                   "state": {"position": _cpu(chain.position), "potential": chain.potential.cpu(),
                             "grad": _cpu(chain.grad)},
                   "da": state.adaptation._asdict(), "generator": generator.get_state(), "history": trace.history,
                   "phase": trace.phase, "kept": kept, "accumulated": accumulated,
                   "wall_s": wall_before + time.perf_counter() - start if wall_s is None else wall_s,
                   "pieces": pieces}
        loop.write_checkpoint(path, payload)

    def keep(position: dict[str, Tensor]) -> None:
        if accumulate is not None:
            accumulate.update(position)
        if summarize is not None or accumulate is None:
            draw = summarize(position) if summarize is not None else \
                torch.cat([v.reshape(n_chains, -1) for v in position.values()], 1)
            kept.append(draw.detach().cpu().clone())

    it_start = state.iteration
    if it_start < total:
        sampler = dataclasses.replace(sampler, trajectory=_trajectory(
            potential_fn, n_leapfrog, precision, mode, state.chain, state.step_size.to(device, dtype)))
    bar, on_step = hmc.progress_bar(total, it_start, trace, desc=desc, enabled=progress)
    piece = loop.run(state, sampler.stepper(generator, trace, keep), done=lambda s: s.iteration, total=total,
                     save=lambda s, _: save(s), every_s=every_s, budget_s=budget_s, on_step=on_step)
    bar.close()
    state, it = piece.state, piece.state.iteration
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    wall = wall_before + (time.perf_counter() - start if it > it_start else 0.0)
    if not piece.stopped and it > it_start:
        save(state, wall)   # the finished run's checkpoint: a later call returns it without sampling again
    kept_t = torch.stack(kept) if kept else torch.empty(0)
    return ResumableResult(not piece.stopped, kept_t, trace.until(it), state.step_size, trace.accept_rate(it), it,
                           state.n_grad_evals, wall, pieces, state.chain, mode)

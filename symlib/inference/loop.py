"""The one loop that long computations run in: step a state, checkpoint it, stop at a budget.

A sampler or a fit is a state and a step, ``step(state) -> state`` (the habit of blackjax and
posteriors: ``init -> state``, then a kernel applied again and again). :func:`run` applies the
step until the state has done ``total`` steps; given ``save``, it hands the state to ``save`` at
most every ``every_s`` seconds and, once ``budget_s`` seconds of this call have passed, a last
time before it stops. A later call that starts from the saved state takes the remaining steps,
so that a run in pieces gives the numbers of an uninterrupted one whenever the step depends on
nothing but the state (its randomness included: the caller saves its generator's state with it).

The budget is an argument: nothing here reads the environment. A stage receives its run's
deadline from the book's run layer (:attr:`symlib.book.chapter.StageContext.deadline`) and passes
what is left of it down (:func:`seconds_left`).

Checkpoints are written whole or not at all (:func:`write_checkpoint`: temporary file, fsync,
rename), and read back with their format and the settings of the run that wrote them checked
(:func:`read_checkpoint`), so that a checkpoint of another run is refused, naming the difference.

Public: :class:`Piece`, :class:`BudgetExhausted`, :func:`run`, :func:`seconds_left`,
:func:`write_checkpoint`, :func:`read_checkpoint`.
"""

from __future__ import annotations

import io
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar

import torch

from symlib.files import atomic_write

__all__ = ["BudgetExhausted", "Piece", "read_checkpoint", "run", "seconds_left", "write_checkpoint"]

S = TypeVar("S")


class BudgetExhausted(RuntimeError):
    """A piece of a long run stopped at its time budget, its checkpoint written: run the same
    command again to continue. A stage raises it so that nothing partial is cached, and
    ``python -m symlib.book.pipeline execute`` reports the chapter as a piece to continue (exit
    status 75), not as a failure."""


class Piece(NamedTuple, Generic[S]):
    """What one call of :func:`run` did."""

    state: S
    """The state reached."""
    stopped: bool
    """Whether it stopped at the budget (after saving) before the state reached ``total``."""
    seconds: float
    """Seconds this call took (the steps and the saves)."""


def run(state: S, step: Callable[[S], S], *, done: Callable[[S], int], total: int,
        save: Callable[[S, float], None] | None = None, every_s: float = 120.0,
        budget_s: float | None = None, on_step: Callable[[S], None] | None = None) -> Piece[S]:
    """Apply ``step`` to ``state`` until ``done(state) >= total``.

    Args:
        state: where to start (a fresh state, or one read back from a checkpoint).
        step: one step; it may return a new value or the same object updated in place.
        done: the steps a state has done (over every piece).
        total: the steps of the whole run.
        save: ``save(state, seconds)`` writes a checkpoint of ``state``, ``seconds`` being this
            call's time so far. Called between two steps (never after the last: the caller
            decides what a finished run keeps) once ``every_s`` seconds have passed since the
            last save, and when the budget is spent. None: no checkpoints and no budget.
        every_s: the most seconds between two saves (0: after every step).
        budget_s: stop, after a save, once this call has run this many seconds (checked after
            each step, so a spent budget still takes one step). None: no limit.
        on_step: called with each new state (a progress bar's update).

    Returns:
        :class:`Piece`: the state reached, whether the budget stopped it, and the seconds taken.
    """
    start = last_save = time.perf_counter()
    while done(state) < total:
        state = step(state)
        if on_step is not None:
            on_step(state)
        if save is None or done(state) >= total:
            continue
        now = time.perf_counter()
        over = budget_s is not None and now - start >= budget_s
        if over or now - last_save >= every_s:
            save(state, now - start)
            last_save = time.perf_counter()
            if over:
                return Piece(state, True, time.perf_counter() - start)
    return Piece(state, False, time.perf_counter() - start)


def seconds_left(deadline: float | None) -> float | None:
    """The ``budget_s`` that ends at ``deadline`` (seconds since the epoch, :func:`time.time`;
    None: no deadline, no budget). At least a tiny positive number: a run that starts after its
    deadline takes one step, writes its checkpoint and stops."""
    return None if deadline is None else max(deadline - time.time(), 1e-9)


def write_checkpoint(path: str | os.PathLike, payload: dict) -> None:
    """``torch.save`` ``payload`` to ``path`` atomically: serialised first, then written whole or
    not at all, so a kill during the write leaves the previous checkpoint, and a full disk is
    reported with the path and the space needed (:func:`symlib.files.atomic_write`), not as
    torch's zip-writer failure."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    atomic_write(path, buffer.getvalue(), tmp_prefix=path.name + ".")


def read_checkpoint(path: str | os.PathLike, *, format: Any, settings: dict, what: str = "run") -> dict:
    """The checkpoint at ``path`` (on the CPU), checked to be of ``format`` and written by a
    ``what`` with exactly ``settings``.

    Raises:
        ValueError: another format, or other settings (the differing ones named).
    """
    saved = torch.load(path, map_location="cpu", weights_only=False)
    if saved.get("format") != format or saved.get("settings") != settings:
        diff = sorted(k for k in settings if (saved.get("settings") or {}).get(k) != settings[k])
        raise ValueError(f"checkpoint {path} was written by a {what} with other settings ({', '.join(diff) or 'format'}); "
                         "resume with the same arguments, or move the checkpoint away to start afresh")
    return saved

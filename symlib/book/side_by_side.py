"""Execute several chapters at once: how many, in which order, and the fan-out itself.

The quick and smoke profiles run each chapter's fits one after the other on one torch thread
(their profiles pin it), so a chapter keeps one core busy; on a 2-core machine the book's
chapters executed two at a time take about half the wall time. The long profiles (``full``,
``paper``) fan their fits out inside a chapter instead (:func:`symlib.book.parallel.default_jobs`),
so their chapters run one at a time, as do GPU runs (each chapter would hold a CUDA context).

Chapters go longest first, so the long ones do not start last: by the wall time of their last
run in this checkout (its results file, same profile), else by the quick wall time
the chapter declares (:func:`quick_seconds`).
Each chapter runs in its own worker process (joblib's default backend): the pipeline sets
environment variables for its kernel and handles SIGTERM, which must not be shared between
chapters. A chapter that fails does not stop the others; the failures are reported together.

    SYMLIB_CHAPTER_JOBS=N   at most N chapters at a time (1: one after the other)
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from joblib import Parallel, delayed

from symlib.book import provenance

__all__ = ["ENV_VAR", "chapter_jobs", "longest_first", "one_thread_kernels", "quick_seconds", "run_chapters"]

ENV_VAR = "SYMLIB_CHAPTER_JOBS"
SIDE_BY_SIDE_PROFILES = ("smoke", "quick")


def quick_seconds(name: str) -> float:
    """The quick profile's wall time the chapter declares (``Chapter.quick_seconds``, measured by
    CI on 2 cores on a fresh machine, compiles included), 0 for an undeclared name: only the
    order of a fresh clone's run."""
    chapter = provenance.declared(name)
    return float(chapter.quick_seconds) if chapter is not None else 0.0


def chapter_jobs(profile: str, device_type: str, n_chapters: int, cores: int | None = None) -> int:
    """How many chapters to execute at once: ``$SYMLIB_CHAPTER_JOBS`` if set, else one per core
    for the short profiles on the CPU and 1 otherwise (never more than there are chapters).

    Raises:
        SystemExit: ``$SYMLIB_CHAPTER_JOBS`` is not a positive integer.
    """
    value = os.environ.get(ENV_VAR, "").strip()
    if value:
        if not value.isdigit() or int(value) < 1:
            raise SystemExit(f"{ENV_VAR} must be a positive integer (chapters at a time); got {value!r}")
        jobs = int(value)
    elif profile in SIDE_BY_SIDE_PROFILES and device_type == "cpu":
        jobs = cores if cores is not None else (os.cpu_count() or 1)
    else:
        jobs = 1
    return max(1, min(jobs, n_chapters))


def one_thread_kernels(profile: str) -> dict[str, str]:
    """The thread variables set for the kernels of ``profile`` (``{}`` for the long profiles):
    ``OMP_NUM_THREADS=1`` and ``MKL_NUM_THREADS=1`` for the short ones, unless the user set them.

    The short profiles pin most of their fits to one torch thread already; this pins the rest,
    so a quick build's numbers do not depend on how many chapters ran beside each other (joblib
    would otherwise give each worker's kernel ``cores // jobs`` threads, and thread counts change
    the rounding of reductions).
    """
    if profile not in SIDE_BY_SIDE_PROFILES:
        return {}
    return {var: "1" for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS") if var not in os.environ}


def _expected_seconds(name: str, profile: str, results: Path) -> float:
    """Seconds the chapter's last run of ``profile`` here took, else :func:`quick_seconds`."""
    try:
        record = json.loads((results / f"{name}.json").read_text())
    except (OSError, ValueError):
        record = {}
    if not isinstance(record, dict):
        record = {}
    wall = record.get("wall_time_s")
    if record.get("profile") == profile and not record.get("rendered_from_cache") and isinstance(wall, (int, float)):
        return float(wall)
    return quick_seconds(name)


def longest_first(names: Sequence[str], profile: str, *, results: Path) -> list[str]:
    """``names`` ordered by their expected wall time, longest first (ties keep the given order)."""
    expected = {n: _expected_seconds(n, profile, results) for n in names}
    return sorted(names, key=lambda n: -expected[n])


def _run_one(fn: Callable[[str], float], name: str,
             environ: dict[str, str] | None = None) -> tuple[str, float | None, str | None]:
    """``(name, seconds, None)``, or ``(name, None, message)`` when the chapter failed.

    ``environ``: the caller's environment, set for the call and restored after it. joblib reuses
    its worker processes, which keep the environment they were started with; the pipeline's
    variables (``SYMLIB_EXECUTED``, the thread counts...) must be the caller's now.
    """
    before = dict(os.environ)
    if environ is not None:
        os.environ.clear()
        os.environ.update(environ)
    try:
        return name, fn(name), None
    except SystemExit as err:
        if not isinstance(err.code, str):  # SIGTERM (exit code 143) or an explicit exit: stop all
            raise
        return name, None, err.code  # the pipeline's "<chapter>: execution failed ..." message
    finally:
        if environ is not None:
            os.environ.clear()
            os.environ.update(before)


def run_chapters(fn: Callable[[str], float], names: Sequence[str], jobs: int,
                 report: Callable[[str, float | None, str | None], None]) -> tuple[dict, dict]:
    """Call ``fn(name)`` for every chapter, ``jobs`` at a time, in the order given.

    ``report(name, seconds, error)`` is called in this process as each chapter finishes.

    Returns:
        ``(times, failures)``: seconds per chapter that ran, the failure message per chapter that
        did not.
    """
    times, failures = {}, {}
    if jobs <= 1:
        results = (_run_one(fn, n) for n in names)
    else:
        # workers, not threads: each chapter sets its kernel's environment and handles SIGTERM
        results = Parallel(n_jobs=jobs, return_as="generator_unordered", batch_size=1,
                           pre_dispatch="n_jobs")(delayed(_run_one)(fn, n, dict(os.environ)) for n in names)
    for name, seconds, error in results:
        report(name, seconds, error)
        if error is None:
            times[name] = seconds
        else:
            failures[name] = error
    return times, failures

"""Fan out independent fits through joblib: local processes on request, a cluster via Dask.

The chapters' independent fits (chapter 4's Stan runs, chapter 3's MNIST cells, chapter 2b's
chunks of reference networks, chapter 1's two experiments) go through :func:`fan_out`, which
hands them to :class:`joblib.Parallel`. How many run at once is one setting, the environment
variable ``SYMLIB_JOBS`` (or a ``jobs`` argument): ``SYMLIB_JOBS=2`` runs two at a time in
joblib's local worker processes (the loky backend), ``-1`` one per core. Unset, joblib's
default applies: one at a time, in this process, unless a ``joblib.parallel_config`` says
otherwise. That default is deliberate for the short profiles: on a shared 2-core machine,
starting workers (each imports torch and symlib, about 9 CPU-seconds) cost more than running side
by side saved. ``pipeline execute`` of a long profile on the CPU sets ``SYMLIB_JOBS=-1`` when it
is unset (:func:`default_jobs`).
Whatever joblib backend is active runs the fits, so a cluster needs no code change::

    from dask.distributed import Client
    import joblib
    from symlib.chapters import constrained_models as ch4, get_profile

    with Client("scheduler-address:8786"), joblib.parallel_config(backend="dask"):
        results = ch4.CHAPTER.run_stages(get_profile("04_constrained_models", "paper"), seed=0)

Results do not depend on where or in which order the fits run: each task carries everything it
draws from (a seed, not a generator: generators are built inside the task) and sets torch's
thread count itself, to the chapter's ``threads`` (one thread per task when that is ``None``
and tasks run side by side, so that ``n`` workers use ``n`` cores, not ``n`` times all of them).
With the same thread count as the serial run (the smoke and quick profiles pin one) the fits
are bit-identical to it. torch's thread count is per process, so Dask workers should run one
thread each (``dask worker --nthreads 1``). Tasks must pickle: a module-level function and
plain arguments (tensors, arrays, dataclasses), no closures.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import joblib
from tqdm import tqdm

from symlib.book.cache import merge_used_entries, usage_mark, used_entries
from symlib.book.runtime import torch_threads

__all__ = ["ENV_VAR", "default_jobs", "fan_out", "n_jobs"]

T = TypeVar("T")

ENV_VAR = "SYMLIB_JOBS"


def n_jobs(value: int | str | None = None) -> int | None:
    """How many fits run at once: ``value``, else ``$SYMLIB_JOBS``, else ``None``.

    ``None`` leaves the choice to joblib: 1 (serial, in this process) unless a
    ``joblib.parallel_config`` context sets ``n_jobs`` or a backend such as Dask's, which uses
    every worker of its cluster. Negative values count back from the number of cores, as in
    joblib (``-1``: all of them).

    Raises:
        ValueError: for 0 or a value that is not an integer (the message names the variable).
    """
    source = "n_jobs"
    if value is None:
        value = os.environ.get(ENV_VAR) or None
        source = ENV_VAR
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value == 0:
        raise ValueError(
            f"{source} must be a non-zero integer (1: serial, -1: every core); got {value!r}"
        )
    return value


def default_jobs(profile: str, device: str) -> str | None:
    """What ``pipeline execute`` sets ``$SYMLIB_JOBS`` to when the user left it unset.

    ``"-1"`` (one worker per core) for the long profiles (``full``, ``paper``) on the CPU: their
    fits run for minutes with one torch thread each, so on 2 cores two at a time nearly halve a
    chapter's wall time, while a worker's start-up costs seconds. ``None`` (serial, in the
    notebook's process) otherwise: the short profiles, where start-up would cost more than it
    saves, and GPU runs, whose workers would each hold a CUDA context (not measured yet).
    """
    if profile in ("full", "paper") and str(device).split(":")[0] == "cpu":
        return "-1"
    return None


def fan_out(
    fn: Callable[..., T],
    tasks: Iterable[Sequence[Any]],
    *,
    threads: int | None = 1,
    jobs: int | str | None = None,
    progress: bool = False,
    desc: str | None = None,
) -> list[T]:
    """``[fn(*task) for task in tasks]``, run by the active joblib backend, in task order.

    Args:
        fn: a module-level function (it is pickled by name); each call must depend on its
            arguments alone: pass seeds and build generators inside it.
        tasks: argument tuples, one per call.
        threads: torch intra-op threads inside each call (``None``: leave torch's setting;
            when calls run side by side a ``None`` becomes 1).
        jobs: how many calls run at once (:func:`n_jobs`; default ``$SYMLIB_JOBS``).
        progress: show a plain tqdm bar over finished calls.
        desc: the bar's label.

    Returns:
        The calls' results, in the order of ``tasks``.
    """
    tasks = [tuple(t) for t in tasks]
    # a lone task gains nothing from a local worker (joblib then runs it here), but still goes
    # to a cluster when a backend such as Dask's is active, which ignores n_jobs
    jobs = n_jobs(jobs)
    if len(tasks) == 1:
        jobs = 1
    if threads is None and joblib.effective_n_jobs(jobs) != 1:
        threads = 1
    parallel = joblib.Parallel(n_jobs=jobs, return_as="generator")
    calls = (joblib.delayed(_call)(fn, task, threads) for task in tasks)
    results = []
    for value, used in tqdm(parallel(calls), total=len(tasks), desc=desc, disable=not progress):
        merge_used_entries(used)  # so the results file names the code that computed the workers' entries
        results.append(value)
    return results


def _call(fn: Callable[..., T], task: tuple, threads: int | None) -> tuple[T, list[dict]]:
    """One task, with torch's thread count set here (a worker does not inherit the parent's),
    and the cache entries it served or wrote (:func:`symlib.book.cache.used_entries`)."""
    mark = usage_mark()
    with torch_threads(threads):
        value = fn(*task)
    return value, used_entries(mark)

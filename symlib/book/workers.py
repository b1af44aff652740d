"""Local joblib workers that see the process's current ``SYMLIB_*`` settings.

joblib's local worker processes (the loky backend, :func:`symlib.book.parallel.fan_out` with
``SYMLIB_JOBS`` above 1) are started once and reused by later fan-outs in the same process, with
the environment they started with. A process that changes ``$SYMLIB_CACHE`` between two fan-outs
(the test suite, one cache per test; ``benchmarks/quick_stages.py``, one per chapter; a user's
interactive Python) then had its second fan-out's entries written to, and served from, the first one's cache.

:class:`EnvLokyBackend` is joblib's loky backend that hands the workers every ``SYMLIB_*``
variable of the parent as it is when the fan-out starts. loky reuses its workers only while the
arguments they were started with are unchanged, so a changed (or removed) variable starts fresh
workers: nothing is served from another cache, and nothing changes while the settings do not.
:func:`use_env_aware_workers` makes it joblib's ``"loky"``, the default backend;
:func:`symlib.book.pipeline.compute` (one ``$SYMLIB_PIECE_START`` per chapter), the test suite
and ``benchmarks/quick_stages.py`` call it. It changes where an entry is written,
never what is computed, so the chapters' code hashes do not include it.

Public: :class:`EnvLokyBackend`, :func:`use_env_aware_workers`, :data:`PREFIX`.
"""

from __future__ import annotations

import os

import joblib
from joblib._parallel_backends import LokyBackend

__all__ = ["PREFIX", "EnvLokyBackend", "use_env_aware_workers"]

PREFIX = "SYMLIB_"
"""The variables handed to the workers (and whose change starts fresh ones)."""


class EnvLokyBackend(LokyBackend):
    """joblib's loky backend, with the parent's ``SYMLIB_*`` variables in the workers' environment
    (module docstring)."""

    def _prepare_worker_env(self, n_jobs):
        env = super()._prepare_worker_env(n_jobs)
        return env | {k: v for k, v in sorted(os.environ.items()) if k.startswith(PREFIX)}


def use_env_aware_workers() -> None:
    """Make :class:`EnvLokyBackend` joblib's ``"loky"`` backend in this process (idempotent)."""
    joblib.register_parallel_backend("loky", EnvLokyBackend)

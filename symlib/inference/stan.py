"""PyStan (Stan's NUTS) for chapter 4's networks: build, sample, and evaluate log densities.

The Stan programs live in ``symlib/inference/stan_models/*.stan`` (package data, see :data:`MODELS`). A model
is compiled once per machine and Python environment: httpstan keys the compiled extension by a
hash of the program text, its own version and the Python executable, and keeps it under
``~/.cache/httpstan`` (about 47 s per model with g++ on an idle core, over a minute on a busy
one), so only the first :func:`build` of each program pays. httpstan's build writes a ``build/`` folder into the
current directory, so :func:`build` runs from a temporary directory and never touches the
repository tree.

httpstan also stores every seeded fit; :meth:`StanModel.sample` deletes the files of its own
chains, since symlib caches results itself (only its own: other processes, e.g. joblib workers,
may be sampling the same model at the same time).

Compiling is :mod:`symlib.inference.stan_build`'s job: one build per program at a time across
processes (a file lock), a cached module checked before use (a damaged one is removed, with a
warning naming its folder, and compiled again), no HTTP client timeout, and the compiler's
output in ``<cache>/logs/<id>.log`` with one line on stderr per compile.
:mod:`symlib.inference.stan_processes` makes httpstan's chain processes die with this process
and keeps its socket files out of the system temp folder.

PyStan drives httpstan through ``asyncio.run``; inside a Jupyter kernel an event loop is already
running, so :func:`build` applies ``nest_asyncio`` first (only then). PyStan's progress lines are
captured, not printed; :func:`build` re-raises compile errors with the captured text.

Example::

    model = build("ordered", data, seed=1)
    fit = model.sample(chains=2, warmup=300, draws=300)
    fit.draws["b1"].shape          # (chains, draws, H)
    fit.sampler["treedepth__"]     # (chains, draws)
    model.log_prob(z), model.grad_log_prob(z)   # at unconstrained z (Stan's own ordering)
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import io
import os
import re
import tempfile
import time
import warnings
from dataclasses import dataclass
from importlib import resources
from typing import Any, NamedTuple

import numpy as np

from symlib.inference import stan_build, stan_processes

__all__ = ["MODELS", "SAMPLER_FIELDS", "NutsFit", "StanModel", "build", "program"]

MODELS = ("unconstrained", "ordered", "constrained")
"""The Stan programs: (a) weights as they are, (b) ordered hidden biases, (c) ordered biases and a
unit-norm incoming weight vector per hidden unit (through angles), last layer free."""

SAMPLER_FIELDS = ("lp__", "accept_stat__", "stepsize__", "treedepth__", "n_leapfrog__",
                  "divergent__", "energy__")
"""Per-draw NUTS diagnostics returned in :attr:`NutsFit.sampler`."""

_ELAPSED_RE = re.compile(r"([0-9.eE+-]+) seconds \((Warm-up|Sampling)\)")


def program(name: str) -> str:
    """The text of Stan program ``name`` (one of :data:`MODELS`)."""
    if name not in MODELS:
        raise ValueError(f"unknown Stan model {name!r}; valid: {', '.join(MODELS)}")
    return resources.files("symlib.inference").joinpath("stan_models", f"{name}.stan").read_text()


class NutsFit(NamedTuple):
    """NUTS draws and diagnostics of one :meth:`StanModel.sample` call.

    Attributes:
        draws: parameter name -> array ``(chains, draws, *dims)`` (constrained values, including
            transformed parameters such as the constrained model's ``W1``).
        sampler: each of :data:`SAMPLER_FIELDS` -> array ``(chains, draws)``.
        warmup_s: Stan's own elapsed warm-up time per chain (seconds).
        sampling_s: Stan's own elapsed sampling time per chain (seconds).
        wall_s: wall time of the whole call (chains run in parallel processes).
    """

    draws: dict[str, np.ndarray]
    sampler: dict[str, np.ndarray]
    warmup_s: np.ndarray
    sampling_s: np.ndarray
    wall_s: float


@dataclass(frozen=True)
class StanModel:
    """A built (compiled, data-bound) Stan model; thin wrapper around ``stan.model.Model``."""

    name: str
    model: Any
    build_s: float
    """Seconds :func:`build` took (compile included when the program was not in the cache)."""

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(self.model.param_names)

    @property
    def dims(self) -> dict[str, tuple[int, ...]]:
        return {n: tuple(d) for n, d in zip(self.model.param_names, self.model.dims)}

    def log_prob(self, z, adjust_transform: bool = True) -> float:
        """Stan's log density at the unconstrained point ``z`` (with the Jacobian by default)."""
        with _quiet():
            return float(self.model.log_prob([float(v) for v in np.asarray(z).ravel()],
                                             adjust_transform=adjust_transform))

    def grad_log_prob(self, z) -> np.ndarray:
        """Gradient of :meth:`log_prob` (Jacobian included) at the unconstrained point ``z``."""
        with _quiet():
            return np.asarray(self.model.grad_log_prob([float(v) for v in np.asarray(z).ravel()]))

    def constrain(self, z) -> np.ndarray:
        """Constrained parameters and transformed parameters (flat, Stan's column-major order)."""
        with _quiet():
            return np.asarray(self.model.constrain_pars([float(v) for v in np.asarray(z).ravel()]))

    def sample(self, *, chains: int, warmup: int, draws: int, max_depth: int = 10,
               adapt_delta: float = 0.8, init: list[dict] | None = None) -> NutsFit:
        """Run NUTS (Stan's ``hmc_nuts_diag_e_adapt``); the seed was fixed by :func:`build`."""
        kwargs = {"num_chains": chains, "num_warmup": warmup, "num_samples": draws,
                      "max_depth": max_depth, "delta": adapt_delta}
        if init is not None:
            kwargs["init"] = init
        _allow_nested_loop()
        fits_dir = _fits_directory(self.model.model_name)
        before = set(fits_dir.glob("*")) if fits_dir.is_dir() else set()
        t0 = time.perf_counter()
        with _quiet() as log:
            try:
                fit = self.model.sample(**kwargs)
            except Exception as err:
                raise RuntimeError(f"Stan sampling of {self.name!r} failed: {err}\n{log.getvalue()}") from err
        wall = time.perf_counter() - t0
        # httpstan keeps every seeded fit on disk; symlib caches results itself, so drop this
        # call's files (a rerun then samples again instead of replaying). Only this call's: a
        # file that appeared meanwhile may be another process's fit, still to be read.
        _delete_fits(set(fits_dir.glob("*")) - before if fits_dir.is_dir() else set(), fit.stan_outputs)
        out = {}
        for name, dims in zip(fit.param_names, fit.dims):
            arr = np.asarray(fit[name]).reshape(-1, draws, chains)     # (flat, draw, chain)
            out[name] = np.transpose(arr, (2, 1, 0)).reshape(chains, draws, *dims)
        sampler = {}
        for f in SAMPLER_FIELDS:
            sampler[f] = np.asarray(fit[f]).reshape(draws, chains).T.copy()
        warm, samp = _elapsed(fit, chains)
        return NutsFit(out, sampler, warm, samp, wall)


def build(name: str, data: dict, *, seed: int, code: str | None = None) -> StanModel:
    """Compile (or fetch from httpstan's cache) Stan program ``name`` and bind ``data``.

    Runs from a temporary working directory (httpstan writes ``build/`` into the cwd).

    Args:
        name: one of :data:`MODELS` (or any label when ``code`` is given).
        data: the program's data block as a dict of numbers / arrays.
        seed: Stan's random seed for every later :meth:`StanModel.sample` call.
        code: program text instead of the packaged one (tests).
    """
    with warnings.catch_warnings():       # stan.plugins imports the deprecated pkg_resources
        warnings.filterwarnings("ignore", message="pkg_resources is deprecated")
        try:
            import stan
        except ImportError as err:  # an optional dependency: the methods install without it
            raise ImportError("Stan's NUTS needs PyStan: pip install 'bnn-symlib[stan]'") from err

    code = program(name) if code is None else code
    data = {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in data.items()}
    _allow_nested_loop()
    stan_processes.install()
    t0 = time.perf_counter()
    cwd = os.getcwd()
    # compiled() holds the program's lock until the model is bound, so no other process
    # removes or rewrites its folder meanwhile; stan.build then finds it in the cache
    with stan_build.compiled(name, code), \
            tempfile.TemporaryDirectory(prefix="symlib-stan-") as tmp, _quiet() as log:
        os.chdir(tmp)
        try:
            model = stan.build(code, data=data, random_seed=int(seed))
        except Exception as err:
            raise RuntimeError(f"building Stan model {name!r} failed: {err}\n{log.getvalue()}") from err
        finally:
            os.chdir(cwd)
    return StanModel(name, model, time.perf_counter() - t0)


def _fits_directory(model_name: str):
    """Where httpstan stores the fits of ``model_name`` (``models/<id>``)."""
    import httpstan.cache

    return httpstan.cache.model_directory(model_name) / "fits"


def _delete_fits(paths, outputs) -> None:
    """Delete those of ``paths`` (httpstan's gzipped fit files) that hold one of ``outputs``."""
    mine = set(outputs)
    for path in paths:
        try:
            if gzip.decompress(path.read_bytes()) in mine:
                path.unlink(missing_ok=True)
        except (OSError, EOFError, gzip.BadGzipFile):
            continue  # gone already, or still being written by its own process


def _elapsed(fit, chains: int) -> tuple[np.ndarray, np.ndarray]:
    """Stan's own per-chain warm-up and sampling times, parsed from its logger messages."""
    warm, samp = np.full(chains, np.nan), np.full(chains, np.nan)
    for c, raw in enumerate(fit.stan_outputs[:chains]):
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        for value, kind in _ELAPSED_RE.findall(text):
            (warm if kind == "Warm-up" else samp)[c] = float(value)
    return warm, samp


def _allow_nested_loop() -> None:
    """PyStan calls ``asyncio.run``; in a running loop (Jupyter) that needs ``nest_asyncio``."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    import nest_asyncio

    nest_asyncio.apply()


@contextlib.contextmanager
def _quiet():
    """Capture PyStan's progress output (it writes through clikit to stdout and stderr)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        yield buf

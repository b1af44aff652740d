"""Compile Stan programs into httpstan's cache safely: one build per model, checked, quiet.

httpstan (PyStan's server) compiles a program into ``<cache>/models/<id>/`` (``<cache>`` is
``$XDG_CACHE_HOME/httpstan/<version>``, by default ``~/.cache/httpstan/<version>``; ``<id>`` hashes
the program text, httpstan's version and the Python executable) and then trusts whatever it finds
there. That went wrong in three ways:

* two processes compiling one program at once left a truncated shared library behind;
* a compile killed at link time (a closed terminal, an OOM kill, a cancelled CI job) leaves a
  0-byte or cut ``.so``: every later build failed with simdjson's ``TAPE_ERROR``, or loading it
  killed the process (a dead notebook kernel, the file not named);
* PyStan asks for the compile over HTTP through aiohttp's default client timeout of 300 s
  (``stan.common.HttpstanClient`` opens an ``aiohttp.ClientSession()`` with
  ``aiohttp.client.DEFAULT_TIMEOUT``), which a compile on a busy machine outlasts (339-464 s
  were measured).

:func:`compiled` therefore, for one program,

1. holds an exclusive ``fcntl.flock`` on ``<cache>/locks/<id>.lock`` until the caller has bound
   the model (other processes building the same program wait; other programs do not);
2. checks a cached module (:func:`check_module`: its ELF tables must fit in the file, it must
   import in a child Python, so that one that segfaults on loading cannot kill this process, and
   expose the functions httpstan calls, and httpstan's two log files must be there); a damaged one is removed with a
   :class:`StanCacheWarning` naming its folder, and compiled once more;
3. compiles through httpstan's own functions (``httpstan.models.build_services_extension_module``,
   as httpstan's ``POST /models`` handler does) in a child Python, not over HTTP, so no client
   timeout applies; ``stan.build`` afterwards finds the model in the cache. The child's output
   (g++'s warnings included) goes to ``<cache>/logs/<id>.log``; the console gets one line per
   model. The child dies with this process, and takes the compiler with it. It compiles without
   debug information (:func:`compile_flags`: Python's own flags, ``-O3`` included, then ``-g0``),
   which GCC does not let change the generated code and which is a large share of a compile's
   time (``benchmarks/bench_stan_compile.py`` measures both).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

__all__ = ["StanCacheWarning", "check_module", "compile_flags", "compiled", "log_path", "model_directory",
           "model_id"]

EXPECTED_FUNCTIONS = ("hmc_nuts_diag_e_adapt_wrapper", "fixed_param_wrapper", "log_prob",
                      "log_prob_grad", "write_array", "transform_inits", "get_param_names",
                      "get_dims", "constrained_param_names")
"""What httpstan calls on a model's extension module (``httpstan/stan_services.cpp``)."""

CHECK_TIMEOUT_S = 120
"""Loading a sound module takes well under a second; a hang counts as damage."""


class StanCacheWarning(RuntimeWarning):
    """A damaged compiled model was found in httpstan's cache and removed."""


def model_id(code: str) -> str:
    """httpstan's id of Stan program ``code`` in this Python (e.g. ``'2uxewutp'``)."""
    import httpstan.models

    return httpstan.models.calculate_model_name(code).split("/")[1]


def _cache_directory() -> Path:
    import httpstan.cache

    return httpstan.cache.cache_directory()


def model_directory(code: str) -> Path:
    """Where httpstan keeps program ``code``'s compiled module (may not exist)."""
    return _cache_directory() / "models" / model_id(code)


def log_path(code: str) -> Path:
    """Where the compiler output of program ``code``'s last compile goes."""
    return _cache_directory() / "logs" / f"{model_id(code)}.log"


def _module_file(directory: Path) -> Path | None:
    """The extension module in ``directory``, as httpstan finds it (first with a right suffix)."""
    try:
        return next(p for p in directory.iterdir() if p.suffix in EXTENSION_SUFFIXES)
    except (FileNotFoundError, StopIteration):
        return None


_CHECK_SCRIPT = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("stan_services", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
missing = [name for name in sys.argv[2:] if not hasattr(module, name)]
if missing:
    sys.exit("it lacks " + ", ".join(missing))
"""

def _elf_problem(module: Path) -> str | None:
    """Why ELF file ``module`` is cut short, or None (also None for a file that is not ELF).

    A library cut in half may still import (the loader maps what it needs lazily) and then
    fail with SIGBUS inside a chain; the tables in the ELF header say how long the file must be.
    """
    size = module.stat().st_size
    with open(module, "rb") as fh:
        head = fh.read(64)
        if head[:4] != b"\x7fELF" or len(head) < 52:
            return None
        wide, order = head[4] == 2, "<" if head[5] == 1 else ">"
        if wide:
            phoff, shoff = struct.unpack_from(order + "QQ", head, 0x20)
            phentsize, phnum, shentsize, shnum = struct.unpack_from(order + "HHHH", head, 0x36)
        else:
            phoff, shoff = struct.unpack_from(order + "II", head, 0x1C)
            phentsize, phnum, shentsize, shnum = struct.unpack_from(order + "HHHH", head, 0x2A)
        needed = max(phoff + phentsize * phnum, shoff + shentsize * shnum)
        if needed <= size:  # the program headers can be read: each segment must be complete
            fh.seek(phoff)
            table = fh.read(phentsize * phnum)
            for i in range(phnum):
                at = i * phentsize
                if wide:
                    offset, filesz = struct.unpack_from(order + "Q", table, at + 8)[0], \
                        struct.unpack_from(order + "Q", table, at + 32)[0]
                else:
                    offset, filesz = struct.unpack_from(order + "I", table, at + 4)[0], \
                        struct.unpack_from(order + "I", table, at + 16)[0]
                needed = max(needed, offset + filesz)
    if needed > size:
        return f"{module.name} is cut short ({size:,} of at least {needed:,} bytes)"
    return None


_SOUND: set[tuple] = set()
"""(path, inode, size, mtime) of modules this process found sound: each is checked once."""


def check_module(directory: Path) -> str | None:
    """Why the compiled model in ``directory`` cannot be used, or None when it can.

    The module is imported in a child Python, so a truncated file that crashes the loader
    (a segfault rather than an ImportError) shows as a bad exit status, not as this process dying.
    """
    module = _module_file(directory)
    if module is None:
        return "no compiled module"
    for log in ("stanc.log", "stderr.log"):  # httpstan reads both when it finds the model
        if not (directory / log).is_file():
            return f"{log} is missing (the compile did not finish)"
    stat = module.stat()
    key = (str(module), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if key in _SOUND:
        return None
    if stat.st_size == 0:
        return f"{module.name} is empty"
    cut = _elf_problem(module)
    if cut is not None:
        return cut
    try:
        proc = subprocess.run([sys.executable, "-c", _CHECK_SCRIPT, str(module),
                               *EXPECTED_FUNCTIONS], check=False, capture_output=True,
                              text=True, stdin=subprocess.DEVNULL, timeout=CHECK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"loading {module.name} hung for {CHECK_TIMEOUT_S} s"
    if proc.returncode == 0:
        _SOUND.add(key)
        return None
    if proc.returncode < 0:
        reason = f"killed by {signal.Signals(-proc.returncode).name}"
    else:
        lines = proc.stderr.strip().splitlines()
        reason = lines[-1] if lines else f"exit status {proc.returncode}"
    return f"loading {module.name} ({stat.st_size:,} bytes) failed: {reason}"


@contextlib.contextmanager
def _lock(code: str) -> Iterator[None]:
    """Exclusive lock on program ``code`` for every process sharing this httpstan cache."""
    path = _cache_directory() / "locks" / f"{model_id(code)}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # released when fh closes, or when the process dies
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def compiled(name: str, code: str) -> Iterator[float]:
    """Make sure httpstan's cache holds a sound compiled ``code``; hold it while the body runs.

    Args:
        name: the model's label in messages (e.g. ``'ordered'``).
        code: the Stan program.

    Yields:
        Seconds spent compiling (0.0 when the cache had a sound module).

    Raises:
        RuntimeError: the program does not compile, or its fresh module does not load (both
            messages name the log file with the compiler's output).
    """
    directory = model_directory(code)
    with _lock(code):
        problem = check_module(directory)
        if problem is None:
            yield 0.0
            return
        if problem != "no compiled module":
            warnings.warn(f"the compiled Stan model {name!r} in {directory} is damaged ({problem}); "
                          "removed that folder, compiling it again", StanCacheWarning, stacklevel=3)
        shutil.rmtree(directory, ignore_errors=True)
        seconds = _compile(name, code)
        problem = check_module(directory)
        if problem is not None:
            raise RuntimeError(f"compiled Stan model {name!r} in {directory} cannot be used "
                               f"({problem}); compiler output: {log_path(code)}")
        yield seconds


_COMPILE_SCRIPT = """
import asyncio, ctypes, os, signal, sys, threading, time

code_file, expected, parent, flags = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
os.environ["CFLAGS"] = os.environ["CXXFLAGS"] = flags  # setuptools' compiler flags (compile_flags)

def die(*_):  # this child leads its own process group: take g++ down with it
    os.killpg(0, signal.SIGKILL)

signal.signal(signal.SIGTERM, die)
if sys.platform.startswith("linux"):
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: SIGTERM when the parent dies

def watch():  # elsewhere, and to close the race with the parent's death before prctl
    while os.getppid() == parent:
        time.sleep(1)
    die()

threading.Thread(target=watch, daemon=True).start()

import httpstan.cache, httpstan.compile, httpstan.models

code = open(code_file).read()
model_name = httpstan.models.calculate_model_name(code)
if model_name != "models/" + expected:
    sys.exit(f"this Python ({sys.executable}) names the program {model_name}, the caller models/"
             f"{expected}: run the compile from the same Python")
httpstan.cache.delete_model_directory(model_name)
try:
    _, stanc_warnings = httpstan.compile.compile(code, "model_" + expected)
except ValueError as err:
    sys.exit(f"stanc rejected the program: {err}")
httpstan.cache.dump_stanc_warnings(stanc_warnings, model_name)
output = asyncio.run(httpstan.models.build_services_extension_module(code))
print(output, flush=True)
httpstan.cache.dump_services_extension_module_compiler_output(output, model_name)
"""


def compile_flags() -> str:
    """The C++ flags a compile runs with: those this Python was built with (setuptools' default,
    e.g. ``-DNDEBUG -g -fwrapv -O3 -Wall``), then ``-g0``.

    The compile's child hands them to setuptools as ``$CFLAGS`` and ``$CXXFLAGS``, which replace
    its defaults (so the defaults are repeated); ``-g0`` last turns off their ``-g``. Debug
    information for Stan's templates is a large share of a compile's time, and GCC guarantees
    that ``-g`` does not change the code it generates.
    """
    import sysconfig

    return f"{sysconfig.get_config_var('CFLAGS') or ''} -g0".strip()


def _compile(name: str, code: str) -> float:
    """Compile ``code`` into httpstan's cache in a child Python; seconds taken.

    The child's stdout and stderr (g++ prints there directly, past any Python-level redirect)
    go to :func:`log_path`; stderr gets one line.
    """
    log = log_path(code)
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"compiling Stan model {name!r} for the first time (about a minute; compiler output in "
          f"{log})\u2026", end="", file=sys.stderr, flush=True)
    flags = compile_flags()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="symlib-stan-") as tmp, open(log, "w") as out:
        source = Path(tmp) / "program.stan"
        source.write_text(code)
        # cwd: setuptools writes its build/ folder there
        proc = subprocess.Popen(
            [sys.executable, "-c", _COMPILE_SCRIPT, str(source), model_id(code), str(os.getpid()),
             flags],
            cwd=tmp, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)
        try:
            status = proc.wait()
        except BaseException:  # e.g. KeyboardInterrupt: leave no compiler running
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            print(" interrupted", file=sys.stderr, flush=True)
            raise
    seconds = time.perf_counter() - t0
    if status != 0:
        print(" failed", file=sys.stderr, flush=True)
        tail = "\n".join(log.read_text(errors="replace").strip().splitlines()[-20:])
        raise RuntimeError(f"compiling Stan model {name!r} failed (exit status {status}); "
                           f"compiler output: {log}\n{tail}")
    print(f" done in {seconds:.0f} s", file=sys.stderr, flush=True)
    return seconds

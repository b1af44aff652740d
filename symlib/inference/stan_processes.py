"""httpstan's chain processes and socket files, made to go when this process goes.

httpstan runs every chain in a module-level ``ProcessPoolExecutor``
(``httpstan.services_stub.executor``, fork start method, ``os.cpu_count()`` workers). Killed
with SIGKILL, a process leaves those workers alive (about 285 MB each). For each chain httpstan
also binds a Unix socket ``httpstan_*.sock`` in the system temp folder and never unlinks it
(18 per chapter-4 run).

:func:`install` (once per process, before the first chain; :func:`symlib.inference.stan.build`
calls it) therefore

* replaces ``httpstan.services_stub.executor`` by the same pool whose workers die with this
  process: on Linux they ask for ``SIGKILL`` on their parent's death (``PR_SET_PDEATHSIG`` via
  ``prctl``; only when the forking thread is the main thread, since the signal follows the
  thread), and everywhere a thread in each worker exits it once its parent is gone (httpstan
  releases the GIL while a chain runs, so that thread gets its turn);
* points httpstan's ``tempfile.mkstemp`` (``httpstan.services_stub.tempfile``) at a private folder
  ``<temp>/symlib-httpstan-<pid>``, removed when this process exits (names kept short: a Unix
  socket's path has at most 107 bytes; where even that is too long, httpstan's default stays);
* removes what killed runs left: such folders of processes no longer alive, and
  ``httpstan_*.sock`` files in the temp folder that no process has bound (Linux).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import ctypes
import functools
import multiprocessing as mp
import multiprocessing.util
import os
import re
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time
import types
from pathlib import Path

__all__ = ["SOCKET_PREFIX", "install", "remove_stale"]

SOCKET_PREFIX = "symlib-httpstan-"
"""Name prefix of the per-process socket folders (``<prefix><pid>``)."""
_MAX_SOCKET_PATH = 107
_SOCKET_NAME_LENGTH = len("/12345678.sock")

_PR_SET_PDEATHSIG = 1
_FORK_INFO = {"pid": None, "main_thread": False}
"""Set in the parent just before each fork; the child reads its inherited copy."""
_INSTALLED: dict[int, Path] = {}
"""pid -> this process's socket folder (a forked child of an installed process installs again)."""
_LOCK = threading.Lock()


def _note_fork() -> None:
    _FORK_INFO["pid"] = os.getpid()
    _FORK_INFO["main_thread"] = threading.current_thread() is threading.main_thread()


os.register_at_fork(before=_note_fork)


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def _init_worker() -> None:
    """Pool-worker initializer: httpstan's own (ignore SIGINT), then die with the parent."""
    import httpstan.services_stub

    httpstan.services_stub.init_worker()
    parent = _FORK_INFO["pid"]
    if sys.platform.startswith("linux") and _FORK_INFO["main_thread"]:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before prctl
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _bound_socket_paths() -> set[str] | None:
    """Paths of the Unix sockets bound now (Linux's /proc/net/unix), or None where unknown."""
    try:
        lines = Path("/proc/net/unix").read_text().splitlines()[1:]
    except OSError:
        return None
    return {fields[7] for fields in map(str.split, lines) if len(fields) >= 8}


def remove_stale(temp: Path | None = None) -> list[Path]:
    """Remove socket litter of dead processes from ``temp`` (the system temp folder); the paths.

    Removes ``symlib-httpstan-<pid>`` folders whose process is gone, and unbound
    ``httpstan_*.sock`` sockets (httpstan's own, from runs before :func:`install`; Linux only,
    where the bound ones are known).
    """
    temp = Path(tempfile.gettempdir() if temp is None else temp)
    removed = []
    for folder in temp.glob(f"{SOCKET_PREFIX}*"):
        match = re.fullmatch(rf"{SOCKET_PREFIX}(\d+)", folder.name)
        if match and folder.is_dir() and not _pid_alive(int(match.group(1))):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    bound = _bound_socket_paths()
    if bound is not None:
        for path in temp.glob("httpstan_*.sock"):
            try:
                if stat.S_ISSOCK(path.lstat().st_mode) and str(path) not in bound:
                    path.unlink()
                    removed.append(path)
            except OSError:
                continue  # gone meanwhile, or not ours to remove
    return removed


def _remove_folder(folder: Path, pid: int) -> None:
    if os.getpid() == pid:  # not from a forked child that inherited the handler
        shutil.rmtree(folder, ignore_errors=True)


def _socket_name(folder: Path, **_ignored) -> tuple[int, str]:
    """``tempfile.mkstemp`` for httpstan's sockets: a short name in ``folder``."""
    return tempfile.mkstemp(suffix=".sock", prefix="", dir=folder)


def install() -> None:
    """Make httpstan's chain processes and socket files go with this process (idempotent)."""
    with _LOCK:
        pid = os.getpid()
        if pid in _INSTALLED:
            return
        import httpstan.services_stub as stub

        remove_stale()
        folder = Path(tempfile.gettempdir()) / f"{SOCKET_PREFIX}{pid}"
        if len(os.fsencode(folder)) + _SOCKET_NAME_LENGTH <= _MAX_SOCKET_PATH:
            folder.mkdir(mode=0o700, exist_ok=True)  # a dead namesake's was removed just now
            atexit.register(_remove_folder, folder, pid)
            # httpstan's only use of tempfile is mkstemp, for the socket names
            stub.tempfile = types.SimpleNamespace(
                mkstemp=functools.partial(_socket_name, folder=folder))
        stub.executor = concurrent.futures.ProcessPoolExecutor(
            mp_context=mp.get_context("fork"), initializer=_init_worker)
        # In a joblib worker, multiprocessing joins its children on exit before
        # concurrent.futures stops the pool, so the exit would wait for ever; a multiprocessing
        # finalizer runs before that join. Its priority is above the pool's call queue's own
        # finalizer (10), which closes the queue: after it, the stop signals never arrive.
        multiprocessing.util.Finalize(None, stub.executor.shutdown, exitpriority=100)
        _INSTALLED[pid] = folder

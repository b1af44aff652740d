"""Writing a file whole or not at all, and saying plainly when the disk is full.

Every writer of state that must survive an interruption (cache entries, checkpoints, published
records) writes a temporary file beside the target, flushes it to disk and renames it into
place, so readers see the old file or all of the new one. A full disk surfaces from deep inside
a writer (torch's zip writer says "[enforce fail at inline_container.cc] . unexpected pos"):
:func:`atomic_write` serialises first and reports a full disk with the path, the bytes it needed
and the bytes free.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["DiskFullError", "atomic_write", "free_bytes", "require_free"]


class DiskFullError(OSError):
    """No space left to write a file: the message names the path, the bytes needed and free."""


def free_bytes(path: str | os.PathLike) -> int:
    """Bytes free on the file system holding ``path`` (or its nearest existing parent)."""
    path = Path(path).absolute()
    existing = next(p for p in (path, *path.parents) if p.exists())
    return shutil.disk_usage(existing).free


def require_free(path: str | os.PathLike, needed: int, *, what: str = "a file") -> None:
    """Raise :class:`DiskFullError` now if the file system of ``path`` has fewer than ``needed``
    bytes free (checked before a long stage writes its results, not after)."""
    free = free_bytes(path)
    if free < needed:
        raise DiskFullError(errno.ENOSPC, f"not enough space for {what} at {path}: it needs {needed:,} bytes, "
                                          f"{free:,} are free; free some space (or point the cache elsewhere) "
                                          "and run again")


def atomic_write(path: str | os.PathLike, data: bytes, *, tmp_prefix: str | None = None) -> None:
    """Write ``data`` to ``path`` whole or not at all (temporary file, fsync, rename).

    Raises:
        DiskFullError: the disk filled up; the message names ``path``, the size and the space free.
    """
    path = Path(path)
    prefix = tmp_prefix if tmp_prefix is not None else f".{path.name}.{os.getpid()}."
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as error:
        Path(tmp).unlink(missing_ok=True)
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFullError(error.errno, f"no space left to write {path}: it needs {len(data):,} bytes, "
                                             f"{free_bytes(path.parent):,} are free; free some space (or point "
                                             "the cache elsewhere) and run again; nothing was lost: the "
                                             "previous file, if any, is unchanged") from error
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    try:  # persist the rename itself (POSIX); not possible on every platform
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)

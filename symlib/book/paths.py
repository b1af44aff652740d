"""Where the book's checkout is, so default paths work the same for editable and normal installs.

The book machinery reads notebooks and writes results, executed notebooks and the cache inside
the checkout. It finds the checkout from the working directory (the nearest ancestor holding
``_toc.yml`` and ``notebooks/``; chapters run with ``notebooks/`` as working directory), then
from the package's own location (an editable install). A normal install used outside any
checkout has no project root: defaults then fall back to the working directory.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["EXECUTED_VARIABLE", "executed_dir", "project_root", "project_root_or_cwd"]

EXECUTED_VARIABLE = "SYMLIB_EXECUTED"


def _is_root(path: Path) -> bool:
    return (path / "_toc.yml").is_file() and (path / "notebooks").is_dir()


def project_root() -> Path | None:
    """The book's checkout containing the working directory (or this package), if any."""
    cwd = Path.cwd().resolve()
    for candidate in (cwd, *cwd.parents, Path(__file__).resolve().parents[2]):
        if _is_root(candidate):
            return candidate
    return None


def project_root_or_cwd() -> Path:
    """:func:`project_root`, or the working directory when there is no checkout."""
    return project_root() or Path.cwd().resolve()


def executed_dir() -> Path:
    """Where executed notebooks go: ``$SYMLIB_EXECUTED`` if set and not empty (``~`` expanded,
    a relative path taken against the working directory), else ``executed/`` in the checkout."""
    env = os.environ.get(EXECUTED_VARIABLE)
    if env:
        return Path(env).expanduser().absolute()
    return project_root_or_cwd() / "executed"

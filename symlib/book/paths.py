"""Where the book's checkout is, so default paths work the same for editable and normal installs.

The book machinery reads notebooks and writes results, executed notebooks and the cache inside
the checkout. It finds the checkout from the working directory (the nearest ancestor holding
``_toc.yml`` and ``notebooks/``; chapters run with ``notebooks/`` as working directory), then
from the package's own location (an editable install). A normal install used outside any
checkout has no project root: defaults then fall back to the working directory.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["project_root", "project_root_or_cwd"]


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

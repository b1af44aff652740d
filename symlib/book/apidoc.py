"""The API reference pages (``book/api/*.md``), generated: one page per subpackage, each public
name documented once, under its public home.

A subpackage that re-exports a name of one of its modules (``symlib.symmetry.min_mass`` from
``symlib.symmetry.minmass``) documents it on the package; the module's entry leaves it out
(``:exclude-members:``), so that the reference, the index and the search list every name once.
Chapters' internals are not API: their page documents each chapter package (its docstring says
what it holds) and its profiles, the settings a reader may change.

Run ``python -m symlib.book.apidoc`` after adding a module; ``--check`` exits 1 when a committed
page differs from the generated one (the test suite checks it too).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

import symlib.book
import symlib.chapters
import symlib.data
import symlib.inference
import symlib.metrics
import symlib.nn
import symlib.symmetry
import symlib.transforms

__all__ = ["PAGES", "documented", "generate", "page_text", "write"]

PAGES = {
    "symmetry": "Symmetries: groups, canonicalisation, matching",
    "nn": "Networks and training",
    "inference": "Inference: VI, SGM, HMC, ensembles, Stan",
    "metrics": "Metrics: predictive, MMD, MCMC diagnostics",
    "transforms": "Transforms",
    "data": "Datasets: synthetic sets, MNIST, Fashion-MNIST, Boston housing",
    "book": "Book machinery: runs, results, tables, cache",
    "chapters": "Chapter packages and their profiles",
}
"""Subpackage -> its page's title (the page is ``book/api/<subpackage>.md``)."""

PACKAGES = {"symmetry": symlib.symmetry, "nn": symlib.nn, "inference": symlib.inference, "metrics": symlib.metrics,
            "transforms": symlib.transforms, "data": symlib.data, "book": symlib.book, "chapters": symlib.chapters}
"""Subpackage -> the package (each page's subject, imported here: this module documents them all)."""

API_DIR = Path(__file__).resolve().parents[2] / "book" / "api"


def _block(module: str, exclude: list[str] | None = None, *, members: bool = True) -> str:
    options = "   :members:\n" if members else ""
    if exclude:
        options += f"   :exclude-members: {', '.join(sorted(exclude))}\n"
    return f"```{{eval-rst}}\n.. automodule:: {module}\n{options}```\n"


def _submodules(package) -> list[str]:
    if not hasattr(package, "__path__"):  # a module, not a package
        return []
    return sorted(m.name for m in pkgutil.iter_modules(package.__path__, package.__name__ + ".")
                  if not m.name.rsplit(".", 1)[1].startswith("_"))


def _reexported(package, module) -> list[str]:
    """The names ``package`` documents (its ``__all__``) that are ``module``'s own objects."""
    own = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    return [n for n in getattr(package, "__all__", []) if n in own and getattr(package, n, None) is getattr(module, n, None)
            and not isinstance(getattr(module, n, None), type(sys))]


def documented(name: str) -> list[tuple[str, list[str]]]:
    """``(module, excluded names)`` of every automodule block of subpackage ``name``'s page."""
    if name == "chapters":  # found by their notebooks (NN_package.md), in the book's order: no chapter import
        blocks = [("symlib.chapters", [])]
        for notebook in sorted((API_DIR.parents[1] / "notebooks").glob("*.md")):
            package = notebook.stem.split("_", 1)[1]
            if (API_DIR.parents[1] / "symlib" / "chapters" / package / "__init__.py").is_file():
                module = f"symlib.chapters.{package}"
                blocks += [(f"{module}|no-members", []), (f"{module}.profiles", [])]
        return blocks
    package = PACKAGES[name]
    blocks = [(package.__name__, [])]
    for sub in _submodules(package):
        # every module pkgutil lists, by its name: documenting all of them is this module's job
        module = importlib.import_module(sub)
        blocks.append((sub, sorted(set(_reexported(package, module)) | set(_imported(module)))))
    return blocks


def _imported(module) -> list[str]:
    """Names in ``module.__all__`` that it imports from another module of symlib (documented there)."""
    return [n for n in getattr(module, "__all__", [])
            if str(getattr(getattr(module, n, None), "__module__", "") or "").startswith("symlib.")
            and getattr(getattr(module, n), "__module__", None) != module.__name__]


def page_text(name: str) -> str:
    """The generated page of subpackage ``name``."""
    head = f"(api-{name})=\n# `symlib.{name}`: {PAGES[name]}\n"
    if name == "chapters":
        head += ("\nEach chapter's package: what it holds (its docstring) and its profiles, the settings a run may "
                 "change. The chapters' stages, claims and views are internals, read in the source.\n")
    blocks = []
    for module, exclude in documented(name):
        module, _, flag = module.partition("|")
        blocks.append(_block(module, exclude, members=flag != "no-members"))
    return head + "\n" + "\n".join(blocks)


def generate() -> dict[Path, str]:
    """Every page, by path."""
    return {API_DIR / f"{name}.md": page_text(name) for name in PAGES}


def write(check: bool = False) -> list[Path]:
    """Write the pages (or, with ``check``, only list those that differ); returns the differing."""
    differ = [p for p, text in generate().items() if not p.is_file() or p.read_text() != text]
    if not check:
        for path in differ:
            path.write_text(generate()[path])
    return differ


if __name__ == "__main__":
    check = "--check" in sys.argv[1:]
    stale = write(check=check)
    for path in stale:
        print(f"{'differs' if check else 'wrote'}: {path}")
    sys.exit(1 if check and stale else 0)

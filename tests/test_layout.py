"""The library's layout: dependency arrows point down only, and every package lists its names.

pyproject.toml's import-linter contracts (``make lint``) check the same arrows on the import graph;
this scan of the import statements needs nothing installed and names the statement at fault."""

import ast
import importlib
from pathlib import Path

import pytest

from symlib.book import LAYERS

SYMLIB = Path(__file__).resolve().parents[1] / "symlib"
BOOK = SYMLIB / "book"

# Which top-level parts of symlib each part may import (besides itself). Arrows point down:
# chapters -> book machinery and methods -> nn / symmetry -> torch.
ALLOWED = {
    "files": set(),                          # writing a file whole or not at all: the floor
    "data": set(),                           # the datasets: beside the methods, below the book
    "transforms": set(),
    "nn": {"transforms"},
    "symmetry": {"nn"},
    "metrics": {"nn", "symmetry"},
    "inference": {"nn", "symmetry", "transforms", "metrics", "files"},
    "book": {"files", "data"},
    "chapters": {"book", "nn", "symmetry", "transforms", "metrics", "inference", "files", "data"},
    # the book's run layer (symlib.book.LAYERS) sits above the chapters: it finds a chapter by name
    # through their registry and runs the methods' budgets
    "book.run": {"files", "data", "chapters", "inference", "nn", "symmetry", "transforms", "metrics"},
}


def _part(path: Path) -> str:
    rel = path.relative_to(SYMLIB)
    if rel.parts[0] == "book" and path.stem in LAYERS["run"]:
        return "book.run"
    return rel.parts[0].removesuffix(".py")


def _imported_parts(path: Path) -> set[str]:
    parts = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("symlib."):
            parts.add(node.module.split(".")[1])
        elif isinstance(node, ast.ImportFrom) and node.module == "symlib":
            parts |= {alias.name for alias in node.names if alias.name != "__version__"}
        elif isinstance(node, ast.Import):
            parts |= {a.name.split(".")[1] for a in node.names if a.name.startswith("symlib.")}
    return parts


MODULES = sorted(p for p in SYMLIB.rglob("*.py") if p.name != "__init__.py" or p.parent != SYMLIB)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SYMLIB)))
def test_dependency_arrows_point_down(path):
    part = _part(path)
    assert part in ALLOWED, f"{part} is not placed in the layout"
    wrong = _imported_parts(path) - ALLOWED[part] - {part, part.split(".")[0]}
    assert not wrong, f"symlib.{part} must not import symlib.{', symlib.'.join(sorted(wrong))}"


def _imports_of_tools(source: str) -> list[str]:
    """The statements of a module's ``source`` that import the maintainer tooling (``tools``, at
    any depth of the file)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        if any(n == "tools" or n.startswith("tools.") for n in names):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_symlib_module_imports_the_maintainer_tooling():
    """``tools/`` serves the maintainers' long runs on lent machines; the library works without it
    (pyproject's import-linter contract checks the same on the import graph)."""
    found = [f"{path.relative_to(SYMLIB.parent)}:{site}" for path in MODULES
             for site in _imports_of_tools(path.read_text())]
    assert not found, "symlib imports tools/:\n" + "\n".join(found)


@pytest.mark.parametrize("source", ["import tools", "import tools.longruns.carry as c",
                                    "from tools.longruns import carry", "from tools import longruns",
                                    "def f():\n    from tools.longruns.checkpoint_names import live"])
def test_the_tooling_check_finds_every_form_of_import(source):
    assert len(_imports_of_tools(source)) == 1


def test_the_tooling_check_passes_over_look_alike_names():
    assert _imports_of_tools("import toolsmith\nfrom .tools import x\nfrom symlib.book import tools\n") == []


@pytest.mark.parametrize("package", ["symmetry", "nn", "metrics", "inference", "data", "book", "chapters"])
def test_every_package_lists_its_public_names(package):
    module = importlib.import_module(f"symlib.{package}")
    assert module.__all__, package
    for name in module.__all__:
        if (
            package in ("book", "chapters", "inference")
            and (SYMLIB / package / name).with_suffix(".py").exists()
        ):
            continue  # a submodule, importable on demand
        if package == "chapters" and (SYMLIB / package / name).is_dir():
            continue
        assert hasattr(module, name), f"symlib.{package}.{name}"


BOOK_MODULES = sorted(p.stem for p in BOOK.glob("*.py") if p.stem != "__init__")
LAYER_OF = {module: index for index, names in enumerate(reversed(LAYERS.values())) for module in names}
"""Module of symlib.book -> its layer's height (0: base)."""


def _book_imports(tree: ast.AST) -> set[str]:
    """The modules of symlib.book that a syntax tree imports."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "symlib.book":
            out |= {a.name for a in node.names if a.name in LAYER_OF}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("symlib.book."):
            out.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[2] for a in node.names if a.name.startswith("symlib.book.")}
    return out


def test_every_book_module_is_in_one_layer():
    listed = [m for names in LAYERS.values() for m in names]
    assert sorted(listed) == BOOK_MODULES, "symlib.book.LAYERS must list every module of symlib/book once"


@pytest.mark.parametrize("module", BOOK_MODULES)
def test_a_book_module_imports_only_its_own_layer_and_those_below(module):
    tree = ast.parse((BOOK / f"{module}.py").read_text())
    above = sorted(m for m in _book_imports(tree) if LAYER_OF[m] > LAYER_OF[module])
    assert not above, f"symlib.book.{module} imports {above}, from a layer above its own"


def _import_graph() -> dict[str, set[str]]:
    return {m: _book_imports(ast.parse((BOOK / f"{m}.py").read_text())) - {m} for m in BOOK_MODULES}


def test_the_book_modules_import_one_another_without_a_cycle():
    graph, done, path = _import_graph(), set(), []

    def visit(module):
        if module in path:
            raise AssertionError(f"import cycle: {' -> '.join(path[path.index(module):] + [module])}")
        if module in done:
            return
        path.append(module)
        for other in sorted(graph[module]):
            visit(other)
        path.pop()
        done.add(module)

    for module in BOOK_MODULES:
        visit(module)


LAZY_IMPORTS = {
    "pandas": "0.3 s to import, and only tables and frames need it; every chapter and worker imports the book",
    "matplotlib": "0.4 s to import: the house style is applied where a figure is drawn",
    "papermill": "the notebook toolchain, loaded by the commands that execute notebooks only (0.7 s together)",
    "nbclient": "the notebook toolchain (see papermill)",
    "nbformat": "the notebook toolchain (see papermill)",
    "jupytext": "the notebook toolchain (see papermill)",
    "traitlets": "the notebook toolchain (see papermill)",
}
"""The only imports symlib/book may place inside a function: optional heavy third-party packages."""

FROZEN = {"streams"}
"""``compute`` modules (symlib.book.codehash.BOOK_ROLES): their code is in every stage's code hash,
so moving one of their imports would make every cached result stale; they are left as they are."""


def test_no_book_module_imports_inside_a_function():
    found = []
    for module in BOOK_MODULES:
        if module in FROZEN:
            continue
        tree = ast.parse((BOOK / f"{module}.py").read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = [node.module or ""]
                else:
                    continue
                if any(n.split(".")[0] not in LAZY_IMPORTS for n in names):
                    found.append(f"symlib/book/{module}.py:{node.lineno}: {ast.unparse(node)}")
    assert not found, "imports inside functions (move them to the top):\n" + "\n".join(found)


def test_no_book_module_imports_by_a_computed_name():
    """``importlib.import_module`` would hide a dependency from these tests and from import-linter;
    only the API reference's generator imports each module it documents by the name pkgutil lists."""
    found = []
    for module in BOOK_MODULES:
        for node in ast.walk(ast.parse((BOOK / f"{module}.py").read_text())):
            if (isinstance(node, ast.Attribute) and node.attr in ("import_module", "__import__")
                    or isinstance(node, ast.Name) and node.id in ("import_module", "__import__")):
                found.append(f"{module}:{node.lineno}")
    assert [site.split(":")[0] for site in found] == ["apidoc"], found

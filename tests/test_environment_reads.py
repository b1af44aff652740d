"""Nothing below the book's run layer reads the environment: the methods and the chapters take
their configuration (a time budget included) as arguments, which the run layer
(:mod:`symlib.book.runtime`, :mod:`symlib.book.pipeline`) parses once and passes down."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SYMLIB = Path(__file__).resolve().parents[1] / "symlib"
BELOW_THE_RUN_LAYER = ("inference", "nn", "symmetry", "metrics", "transforms", "chapters")
"""The packages (or modules, ``transforms.py``) that must read no environment variable."""


def environment_reads(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` of every ``os.environ``, ``os.getenv``, ``environ.get`` / ``getenv`` name
    and ``from os import environ / getenv`` in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb", "getenvb"):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Name) and node.id in ("environ", "getenv", "environb", "getenvb"):
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            found += [(node.lineno, f"from os import {a.name}") for a in node.names
                      if a.name in ("environ", "getenv", "environb", "getenvb")]
    return found


def _files() -> list[Path]:
    out = []
    for name in BELOW_THE_RUN_LAYER:
        package, module = SYMLIB / name, SYMLIB / f"{name}.py"
        out += sorted(package.rglob("*.py")) if package.is_dir() else [module] if module.is_file() else []
    return out


def test_every_layer_named_is_there():
    for name in BELOW_THE_RUN_LAYER:
        assert (SYMLIB / name).is_dir() or (SYMLIB / f"{name}.py").is_file(), name
    assert len(_files()) > 50


@pytest.mark.parametrize("source", [
    "import os\nos.environ.get('X')", "import os\nos.getenv('X')", "from os import environ\nenviron['X']",
    "import os as o\no.environ['X'] = '1'", "from os import getenv",
])
def test_the_scan_finds_a_read(source):
    assert environment_reads(source)


def test_the_scan_leaves_other_code_alone():
    assert environment_reads("import os\npath = os.path.join('a', 'b')\nx = {'environment': 1}\n") == []


def test_no_module_below_the_run_layer_reads_the_environment():
    reads = {f"{p.relative_to(SYMLIB.parent)}:{line}": what for p in _files()
             for line, what in environment_reads(p.read_text())}
    assert reads == {}, ("these read the environment; take the value as an argument, parsed in the "
                         f"run layer (symlib.book.runtime) and passed down: {reads}")

"""The library's layout: dependency arrows point down only, and every package lists its names."""

import ast
import importlib
from pathlib import Path

import pytest

SYMLIB = Path(__file__).resolve().parents[1] / "symlib"

# Which top-level parts of symlib each part may import (besides itself). Arrows point down:
# chapters -> book machinery and methods -> nn / symmetry -> torch.
ALLOWED = {
    "files": set(),                          # writing a file whole or not at all: the floor
    "transforms": set(),
    "nn": {"transforms"},
    "symmetry": {"nn"},
    "metrics": {"nn", "symmetry"},
    "inference": {"nn", "symmetry", "transforms", "metrics", "files"},
    "book": {"files"},
    "chapters": {"book", "nn", "symmetry", "transforms", "metrics", "inference", "files"},
}


def _part(path: Path) -> str:
    rel = path.relative_to(SYMLIB)
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
    wrong = _imported_parts(path) - ALLOWED[part] - {part}
    assert not wrong, f"symlib.{part} must not import symlib.{', symlib.'.join(sorted(wrong))}"


@pytest.mark.parametrize("package", ["symmetry", "nn", "metrics", "inference", "book", "chapters"])
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

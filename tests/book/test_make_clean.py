"""`make clean` removes what the book wrote, where SYMLIB_CACHE / SYMLIB_RESULTS / SYMLIB_EXECUTED point."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VENV = Path(sys.executable).parent.parent  # the running environment: make must not build one

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _checkout(tmp_path) -> Path:
    """A throwaway checkout (Makefile, _toc.yml, notebooks/) holding every kind of output."""
    root = tmp_path / "book"
    (root / "notebooks").mkdir(parents=True)
    shutil.copy(REPO / "Makefile", root)
    (root / "_toc.yml").write_text("format: jb-book\n")
    (root / "notebooks" / "00_symmetries.md").write_text("# x\n")
    for rel in ("_build/html/index.html", "executed/00_symmetries.ipynb", "results/00_symmetries.json",
                "book/_static/mathjax/tex-chtml.js"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    return root


def _outside(tmp_path) -> dict[str, Path]:
    files = {
        "cache entry": tmp_path / "cache" / "00_symmetries" / "k.pt",
        "cache, user's file": tmp_path / "cache" / "notes.txt",
        "results": tmp_path / "res" / "00_symmetries.json",
        "results, user's file": tmp_path / "res" / "mine.json",
        "pieces": tmp_path / "res" / "pieces" / "00_symmetries.json",
        "executed": tmp_path / "exe" / "00_symmetries.ipynb",
        "executed, failed": tmp_path / "exe" / "00_symmetries.failed.ipynb",
        "executed, user's file": tmp_path / "exe" / "mine.ipynb",
    }
    for path in files.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    return files


def _make_clean(root, tmp_path, venv):
    env = {**os.environ, "PYTHONPATH": str(REPO), "SYMLIB_CACHE": str(tmp_path / "cache"),
           "SYMLIB_RESULTS": str(tmp_path / "res"), "SYMLIB_EXECUTED": str(tmp_path / "exe")}
    return subprocess.run(["make", "-s", "clean", f"VENV={venv}"], cwd=root, env=env,
                          capture_output=True, text=True, check=False)


def test_make_clean_honours_the_path_variables(tmp_path):
    # the issue: it imported symlib.cache (gone), hid the error and left $SYMLIB_CACHE untouched
    root, files = _checkout(tmp_path), _outside(tmp_path)
    done = _make_clean(root, tmp_path, VENV)
    assert done.returncode == 0, done.stderr
    kept = {name for name, path in files.items() if path.exists()}
    assert kept == {"cache, user's file", "results, user's file", "executed, user's file"}
    assert not (tmp_path / "res" / "pieces").exists()
    assert sorted(p.name for p in root.iterdir()) == ["Makefile", "_toc.yml", "book", "notebooks"]
    assert not (root / "book" / "_static" / "mathjax").exists()


def test_make_clean_without_the_library_says_what_it_left(tmp_path):
    root, files = _checkout(tmp_path), _outside(tmp_path)
    done = _make_clean(root, tmp_path, tmp_path / "no-venv")
    assert done.returncode != 0 and "SYMLIB_CACHE" in done.stderr and "make install" in done.stderr
    assert all(path.exists() for path in files.values())  # not silently skipped: reported
    assert not (root / "executed").exists() and not (root / "_build").exists()

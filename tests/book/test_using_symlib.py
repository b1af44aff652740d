"""The "Using symlib" page (book/using-symlib.md): it executes through the pipeline, each example
prints its line, and every ``symlib.…`` name it shows is a real object (the API links resolve)."""

import importlib
import re
from pathlib import Path

import nbformat
import pytest

from symlib.book import pipeline

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "book" / "using-symlib.md"


def test_the_page_is_a_book_page_the_build_executes_and_lists():
    assert pipeline.BOOK_PAGES["using-symlib"] == PAGE and "using-symlib" in pipeline.EXAMPLE_PAGES
    assert PAGE.read_text().startswith("---\njupytext:")
    toc = (ROOT / "_toc.yml").read_text()
    assert "file: executed/using-symlib\n" in toc
    # the methods apart from the book's machinery
    methods, machinery = toc.split('caption: "API: methods"')[1].split('caption: "API: book machinery"')
    assert "book/api/symmetry" in methods and "book/api/book" not in methods
    assert "book/api/book" in machinery and "book/api/chapters" in machinery


def test_every_symlib_name_on_the_page_exists():
    names = set(re.findall(r"`(symlib(?:\.\w+)+)`", PAGE.read_text()))
    assert names
    for name in names:
        module, _, attr = name.rpartition(".")
        try:
            obj = importlib.import_module(name)
        except ImportError:
            obj = getattr(importlib.import_module(module), attr, None)
        assert obj is not None, f"{name} on the page names nothing in symlib"


@pytest.mark.slow
def test_the_page_executes_and_every_example_checks_itself(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "EXECUTED", tmp_path / "executed")
    monkeypatch.setenv("SYMLIB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path / "cache"))
    for var in ("SYMLIB_EXECUTED", "SYMLIB_RESULTS_STAGING", "SYMLIB_CACHED_ONLY"):
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # as the book's quick build runs it
    seconds = pipeline.execute("using-symlib", profile="quick", seed=0, device="cpu")
    nb = nbformat.read(tmp_path / "executed" / "using-symlib.ipynb", as_version=4)
    printed = [o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    text = "".join(printed)
    for expected in ("weight vectors compute this function", "after symmetry removal", "R-hat ≤",
                     "ordered biases"):
        assert expected in text
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())
    assert seconds < 120  # a page of examples, seconds on the quick build

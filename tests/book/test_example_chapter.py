"""The example chapter (tests/book/example_chapter/) runs through the book's pipeline.

It proves the contract of :mod:`symlib.book.chapter` end to end: its MyST notebook executes with
:func:`symlib.book.pipeline.execute` in the smoke profile, writes its results file and one cache
entry per stage, under keys made of exactly the fields each stage declares.
"""

import json
import os
import tempfile
from dataclasses import replace
from pathlib import Path

import nbformat
import pytest
from example_chapter import CHAPTER, PROFILES

from symlib.book import cache, pipeline

HERE = Path(__file__).resolve().parent


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """The pipeline's folders in tmp_path, and the example chapter importable by the kernel."""
    monkeypatch.setattr(pipeline, "NOTEBOOKS", HERE / "example_chapter")
    monkeypatch.setattr(pipeline, "EXECUTED", tmp_path / "executed")
    monkeypatch.setenv("SYMLIB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])))
    for var in ("SYMLIB_EXECUTED", "SYMLIB_RESULTS_STAGING", "SYMLIB_CACHED_ONLY"):
        monkeypatch.setenv(var, "")  # recorded, so what the pipeline run sets is undone
        monkeypatch.delenv(var)
    folder = tempfile.mkdtemp(prefix="symlib-t", dir="/tmp")  # short: the kernel's IPC socket paths
    monkeypatch.setattr(tempfile, "tempdir", folder)
    yield tmp_path
    monkeypatch.undo()
    os.rmdir(folder)


@pytest.mark.slow
def test_the_example_chapter_runs_through_the_pipeline(sandbox):
    pipeline.execute("99_example", profile="smoke", seed=0, device="cpu")
    record = json.loads((sandbox / "results" / "99_example.json").read_text())
    smoke = PROFILES["smoke"]
    expected = CHAPTER.run_stages(smoke, seed=0)  # served from the notebook's cache entries
    assert record["tables"]["summary"]["columns"] == ["mean", "scaled sd", "n"]
    assert record["tables"]["summary"]["rows"] == [[expected["summary"]["mean"], expected["summary"]["scaled sd"], 200]]
    [claim] = record["claims"]
    assert claim["verdict"].startswith("not judged: profile sized to judge the claims")  # the smoke gate
    assert claim["ours"].endswith("robustness: depends on tolerance; holds with 0.5")
    assert record["robustness"]["mean-near-zero"]["columns"] == ["choice", "setting", "verdict", "robust verdict"]
    nb = nbformat.read(sandbox / "executed" / "99_example.ipynb", as_version=4)
    glued = {o.metadata["scrapbook"]["name"] for c in nb.cells if c.cell_type == "code" for o in c.outputs
             if "scrapbook" in o.get("metadata", {})}
    assert glued == {"mean", "tab_summary", "tab_ledger"}

    entries = sorted(p.relative_to(sandbox / "cache").as_posix() for p in (sandbox / "cache").glob("*/*.pt"))
    keys = {s.name: cache.config_key(f"99_example-{s.name}", s.version, s.key(smoke, 0)) for s in CHAPTER.stages}
    assert entries == [f"99_example-draws/{keys['draws']}.pt", f"99_example-summary/{keys['summary']}.pt"]
    # an undeclared field moves no key; a declared one moves the keys of the stages declaring it
    assert all(s.key(replace(smoke, label="other"), 0) == s.key(smoke, 0) for s in CHAPTER.stages)
    scaled = replace(smoke, scale=3.0)
    assert [s.key(scaled, 0) == s.key(smoke, 0) for s in CHAPTER.stages] == [True, False]

"""Every chapter's smoke-profile cache keys, pinned (issue 27, step 4).

The chapter-contract refactor must keep every stage's cache key (experiment, version and key)
unless a stage's version is bumped on purpose. This test runs each chapter's smoke stages as its
notebook does (every declared stage), records every key
:func:`symlib.book.cache.cached` derives, and compares them with tests/golden/smoke_cache_keys.json.

Regenerate the golden file only for an intended key change, and say so in the commit (name
chapters to rewrite only theirs):

    PYTHONPATH=$PWD python tests/book/test_smoke_cache_keys.py [01_ortho_skip ...]
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import tempfile
from pathlib import Path

import pytest

from symlib.chapters import CHAPTERS

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "smoke_cache_keys.json"


def _stages(chapter: str, module, config) -> None:
    """What the chapter's notebook computes in the smoke profile (seed 0, CPU): every stage."""
    module.CHAPTER.run_stages(config, seed=0, device="cpu")


def record(chapters=tuple(CHAPTERS)) -> dict[str, list[dict]]:
    """Run the smoke stages of ``chapters`` and return, per chapter, the distinct
    ``{experiment, version, key}`` that ``cached`` asked :func:`~symlib.book.cache.config_key` for,
    sorted. Call it with ``SYMLIB_CACHE`` pointing at a private folder."""
    from symlib.book import cache
    from symlib.chapters import get_profile

    seen: list[tuple[str, str, str]] = []
    original = cache.config_key

    def recording(experiment, version, config):
        key = original(experiment, version, config)
        seen.append((experiment, version, key))
        return key

    # cached() looks config_key up in its module when it is called, whichever way a chapter
    # imported cached; the chapters never call config_key themselves
    cache.config_key = recording
    out = {}
    try:
        for chapter in chapters:
            start = len(seen)
            module = importlib.import_module(f"symlib.chapters.{CHAPTERS[chapter]}")
            _stages(chapter, module, get_profile(chapter, "smoke"))
            out[chapter] = [dict(zip(("experiment", "version", "key"), k)) for k in sorted(set(seen[start:]))]
    finally:
        cache.config_key = original
    return out


@pytest.mark.slow
def test_smoke_cache_keys_are_the_golden_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SYMLIB_RESULTS", str(tmp_path / "results"))
    monkeypatch.delenv("SYMLIB_JOBS", raising=False)  # in this process, where the recorder is
    golden = json.loads(GOLDEN.read_text())
    assert sorted(golden) == sorted(CHAPTERS)
    recorded = record()
    for chapter in CHAPTERS:
        assert recorded[chapter] == golden[chapter], (
            f"{chapter}: the smoke profile's cache keys changed; if on purpose (a stage version "
            f"bumped), regenerate {GOLDEN} (see this module's docstring)"
        )


if __name__ == "__main__":
    os.environ.pop("SYMLIB_JOBS", None)
    with tempfile.TemporaryDirectory() as folder:
        os.environ["SYMLIB_CACHE"] = str(Path(folder) / "cache")
        os.environ["SYMLIB_RESULTS"] = str(Path(folder) / "results")
        keys = record(tuple(sys.argv[1:]) or tuple(CHAPTERS))
    # only the chapters named (default: all) are rewritten; the others keep their golden keys
    GOLDEN.write_text(json.dumps({**json.loads(GOLDEN.read_text()), **keys}, indent=1) + "\n")
    print(f"wrote the keys of {', '.join(keys)} to {GOLDEN}")

"""Every chapter's smoke-profile cache keys and results, pinned.

Restructuring the book machinery must keep every stage's cache key (experiment, version and key)
unless a stage's version is bumped on purpose, and every stage's result bit for bit: the contract
modules that run and store stages are in no code hash (``symlib.book.provenance.BOOK_ROLES``), so
this test is what notices a change there that moves a number. It runs each chapter's smoke stages
as its notebook does (every declared stage), records every key :func:`symlib.book.cache.cached`
derives and a digest of every entry it stores (:func:`symlib.book.same_numbers.value_digest`), and
compares them with tests/golden/smoke_cache_keys.json and tests/golden/smoke_numbers.json. The
numbers are compared only on the platform that recorded them (torch version, CPU capability):
elsewhere floating-point results may differ in their last bits, and that test is skipped, saying so.

Regenerate the golden files only for an intended change (a stage's version bumped, a change of
code proven or meant to move numbers), and say so in the commit (name chapters to rewrite only
theirs):

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
import torch

from symlib.chapters import CHAPTERS

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "smoke_cache_keys.json"
NUMBERS = GOLDEN.with_name("smoke_numbers.json")


def platform_id() -> dict:
    """What the pinned numbers depend on besides the code: torch's version and the CPU
    instructions its kernels use."""
    return {"torch": torch.__version__, "cpu capability": torch.backends.cpu.get_cpu_capability()}


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
    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # one thread, as the smoke profile's kernels run: the pinned numbers' setting
    try:
        for chapter in chapters:
            start = len(seen)
            module = importlib.import_module(f"symlib.chapters.{CHAPTERS[chapter]}")
            _stages(chapter, module, get_profile(chapter, "smoke"))
            out[chapter] = [dict(zip(("experiment", "version", "key"), k)) for k in sorted(set(seen[start:]))]
    finally:
        cache.config_key = original
        torch.set_num_threads(threads)
    return out


def numbers(chapters=tuple(CHAPTERS)) -> dict[str, dict[str, str]]:
    """Per chapter, ``{"<experiment>/<key>": digest}`` of every entry in the cache that
    :func:`record` filled (``$SYMLIB_CACHE``)."""
    from symlib.book import cache
    from symlib.book.provenance import chapter_of
    from symlib.book.same_numbers import value_digest

    out = {chapter: {} for chapter in chapters}
    for path in sorted(cache.cache_dir().glob("*/*.pt")):
        chapter = chapter_of(path.parent.name)
        if path.parent.name != "checkpoints" and chapter in out:
            ok, value, _ = cache._load(path, quarantine=False)
            out[chapter][f"{path.parent.name}/{path.stem}"] = value_digest(value) if ok else "unreadable"
    return out


def test_the_golden_files_name_every_chapter():
    assert sorted(json.loads(GOLDEN.read_text())) == sorted(CHAPTERS)
    assert sorted(json.loads(NUMBERS.read_text())["chapters"]) == sorted(CHAPTERS)


@pytest.mark.slow
@pytest.mark.parametrize("chapter", list(CHAPTERS))
def test_smoke_cache_keys_and_results_are_the_golden_ones(chapter, tmp_path, monkeypatch):
    """One run of the chapter's smoke stages, in a cache of its own, checked twice: its cache
    keys, then (on the platform that pinned them) its results. (A chapter's stages read no other
    chapter's entries: each chapter alone records what a run of every chapter in one cache does.)"""
    monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SYMLIB_RESULTS", str(tmp_path / "results"))
    monkeypatch.delenv("SYMLIB_JOBS", raising=False)  # in this process, where the recorder is
    golden = json.loads(GOLDEN.read_text())[chapter]
    recorded = record((chapter,))[chapter]
    assert recorded == golden, (
        f"{chapter}: the smoke profile's cache keys changed; if on purpose (a stage version "
        f"bumped), regenerate {GOLDEN} (see this module's docstring)"
    )
    pinned = json.loads(NUMBERS.read_text())
    if pinned["platform"] != platform_id():
        pytest.skip(f"the smoke numbers were pinned on {pinned['platform']}; this is {platform_id()}: "
                    "results may differ in their last bits")
    digests = numbers((chapter,))[chapter]
    moved = sorted(k for k in pinned["chapters"][chapter].keys() | digests.keys()
                   if pinned["chapters"][chapter].get(k) != digests.get(k))
    assert not moved, (
        f"{chapter}: the smoke results of {moved} changed; a change meant to move numbers regenerates "
        f"{NUMBERS} (see this module's docstring) and leaves the chapter's runs stale")


if __name__ == "__main__":
    os.environ.pop("SYMLIB_JOBS", None)
    with tempfile.TemporaryDirectory() as folder:
        os.environ["SYMLIB_CACHE"] = str(Path(folder) / "cache")
        os.environ["SYMLIB_RESULTS"] = str(Path(folder) / "results")
        keys = record(tuple(sys.argv[1:]) or tuple(CHAPTERS))
        digests = numbers(tuple(keys))
    # only the chapters named (default: all) are rewritten; the others keep their golden values
    GOLDEN.write_text(json.dumps({**json.loads(GOLDEN.read_text()), **keys}, indent=1) + "\n")
    old = json.loads(NUMBERS.read_text()) if NUMBERS.is_file() else {"chapters": {}}
    if old.get("platform") not in (None, platform_id()) and set(digests) != set(CHAPTERS):
        raise SystemExit(f"{NUMBERS} was pinned on {old['platform']}: regenerate every chapter here, or none")
    NUMBERS.write_text(json.dumps({"platform": platform_id(), "chapters": {**old["chapters"], **digests}},
                                  indent=1, sort_keys=True) + "\n")
    print(f"wrote the keys and numbers of {', '.join(keys)} to {GOLDEN} and {NUMBERS}")

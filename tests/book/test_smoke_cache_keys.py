"""Every chapter's smoke-profile cache keys and results, pinned.

Restructuring the book machinery must keep every stage's cache key (experiment, version and key)
unless a stage's version is bumped on purpose, and every stage's result bit for bit: the contract
modules that run and store stages are in no code hash (``symlib.book.provenance.BOOK_ROLES``), so
this test is what notices a change there that moves a number. It runs each chapter's smoke stages
as its notebook does (every declared stage), records every key :func:`symlib.book.cache.cached`
derives and a digest of every entry it stores (:func:`symlib.book.same_numbers.value_digest`), and
compares them with tests/golden/smoke_cache_keys.json and tests/golden/smoke_numbers.json. The
numbers are pinned per platform (:func:`tests.pinned.platform_id`: torch version, CPU capability
and vendor), since floating-point results differ in their last bits between them; on a platform
with no pinned set that test is skipped, saying so.

Regenerate the golden files only for an intended change (a stage's version bumped, a change of
code proven or meant to move numbers), and say so in the commit (name chapters to rewrite only
theirs; this platform's numbers are rewritten, and the other platforms' sets, which this machine
cannot recompute, are dropped, since they pin the old numbers):

    PYTHONPATH=$PWD python tests/book/test_smoke_cache_keys.py [01_ortho_skip ...]

To pin the numbers of the same code on another platform, add its set and keep the others (it
refuses only changed cache keys, a stage version or profile bumped; that the code is the one
the other sets pinned is for you to check, e.g. that their platform passes this test on it):

    PYTHONPATH=$PWD python tests/book/test_smoke_cache_keys.py --add-platform
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
from tests.pinned import platform_id

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "smoke_cache_keys.json"
NUMBERS = GOLDEN.with_name("smoke_numbers.json")


def pinned_set(pinned: dict, platform: dict) -> dict | None:
    """The chapters' digests pinned on ``platform`` in the golden file's ``pinned`` (None: none)."""
    return next((entry["chapters"] for entry in pinned["platforms"] if entry["platform"] == platform), None)


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
    platforms = json.loads(NUMBERS.read_text())["platforms"]
    assert platforms and all(sorted(entry["chapters"]) == sorted(CHAPTERS) for entry in platforms)
    assert len({json.dumps(entry["platform"], sort_keys=True) for entry in platforms}) == len(platforms)


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
    here = pinned_set(pinned, platform_id())
    if here is None:
        pytest.skip(f"the smoke numbers were pinned on {[e['platform'] for e in pinned['platforms']]}; "
                    f"this is {platform_id()}: results may differ in their last bits")
    digests = numbers((chapter,))[chapter]
    moved = sorted(k for k in here[chapter].keys() | digests.keys()
                   if here[chapter].get(k) != digests.get(k))
    assert not moved, (
        f"{chapter}: the smoke results of {moved} changed; a change meant to move numbers regenerates "
        f"{NUMBERS} (see this module's docstring) and leaves the chapter's runs stale")


if __name__ == "__main__":
    add = "--add-platform" in sys.argv
    named = tuple(a for a in sys.argv[1:] if a != "--add-platform")
    if add and named:
        raise SystemExit("--add-platform pins every chapter: name none")
    os.environ.pop("SYMLIB_JOBS", None)
    with tempfile.TemporaryDirectory() as folder:
        os.environ["SYMLIB_CACHE"] = str(Path(folder) / "cache")
        os.environ["SYMLIB_RESULTS"] = str(Path(folder) / "results")
        keys = record(named or tuple(CHAPTERS))
        digests = numbers(tuple(keys))
    golden_keys = json.loads(GOLDEN.read_text())
    old = json.loads(NUMBERS.read_text()) if NUMBERS.is_file() else {"platforms": []}
    here, others = platform_id(), [e for e in old["platforms"] if e["platform"] != platform_id()]
    if add:
        if any(golden_keys[c] != keys[c] for c in keys):
            raise SystemExit(f"the cache keys differ from {GOLDEN} (a stage version or profile changed): "
                             "regenerate, not --add-platform")
        entries = [*others, {"platform": here, "chapters": digests}]
    else:
        # only the chapters named (default: all) are rewritten; the others keep this platform's values
        mine = pinned_set(old, here)
        if mine is None and set(digests) != set(CHAPTERS):
            raise SystemExit(f"{NUMBERS} has no numbers of {here}: regenerate every chapter here, or none")
        entries = [{"platform": here, "chapters": {**(mine or {}), **digests}}]
        GOLDEN.write_text(json.dumps({**golden_keys, **keys}, indent=1) + "\n")
    NUMBERS.write_text(json.dumps({"platforms": entries}, indent=1, sort_keys=True) + "\n")
    print(f"wrote the numbers of {', '.join(keys)} on {here} to {NUMBERS}"
          + ("" if add else f", and their keys to {GOLDEN}")
          + (f"; dropped the sets of {[e['platform'] for e in others]}" if others and not add else ""))

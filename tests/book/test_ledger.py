"""The book-wide verdict tallies and per-claim rows (symlib.book.ledger), on made-up records."""

import json

from symlib.book import ledger
from symlib.book.results import ChapterResults, Column, Kind, precondition


def _record(chapter="01_made_up"):
    """A record with one claim per column pattern, written and read back as a results file."""
    r = ChapterResults(chapter, "full", 0, "cpu")
    rhat = precondition("rhat", "split R-hat <= 1.01", 1.3, False, column=Column.ROBUST, source="today's standard")
    budget = precondition("budget", "the paper's sampler", "1 chain, step 1e-3", True, column=Column.REPRODUCED,
                          source="Sec. 4")
    trained = precondition("accuracy", "accuracy >= 90% of 0.8", 0.5, False, source="Table 1")
    r.add_claim("both-hold", "A holds", "p1", "o1", True, criterion="c", preconditions=(budget,))
    r.add_claim("robust-blocked", "B holds", "p2", "o2", True, criterion="c", preconditions=(budget, rhat))
    r.add_claim("neither", "C holds", "p3", "o3", False, criterion="c", preconditions=(trained,))
    r.add_claim("other-protocol", "D holds", "p4", "o4 (1 chain)", True, criterion="c",
                robust_holds=False, robust_ours="o4 (4 chains)")
    r.add_claim("check", "a theorem", "p5", "o5", True, kind=Kind.CODE_CHECK)
    return json.loads(json.dumps(r.to_dict()))


def _old_record():
    """A record from before the two columns: one verdict, no ``verdicts``."""
    record = _record("02_old")
    for c in record["claims"]:
        c.pop("verdicts")
    return record


def test_column_outcomes_and_what_stops():
    claims = {c["id"]: c for c in _record()["claims"]}
    assert [ledger.column_outcome(claims["both-hold"], col) for col in ledger.COLUMNS] == ["holds", "holds"]
    assert [ledger.column_outcome(claims["robust-blocked"], col) for col in ledger.COLUMNS] == ["holds", "not judged"]
    assert ledger.what_stops(claims["robust-blocked"], "reproduced") == ""
    assert ledger.what_stops(claims["robust-blocked"], "robust") == "split R-hat <= 1.01 (reached: 1.3)"
    assert ledger.what_stops(claims["neither"], "reproduced") == "accuracy >= 90% of 0.8 (reached: 0.5)"
    assert [ledger.column_outcome(claims["other-protocol"], col) for col in ledger.COLUMNS] == ["holds", "does not hold"]


def test_old_record_robust_column_is_not_recorded_not_a_verdict():
    claims = {c["id"]: c for c in _old_record()["claims"]}
    assert ledger.column_outcome(claims["robust-blocked"], "reproduced") == "holds"
    assert ledger.column_outcome(claims["robust-blocked"], "robust") == ledger.NOT_RECORDED
    assert ledger.what_stops(claims["robust-blocked"], "robust") == ""
    assert ledger.what_stops(claims["neither"], "reproduced") == "accuracy >= 90% of 0.8 (reached: 0.5)"


def test_counts_per_chapter_and_total():
    frame = ledger.counts({"01_made_up": _record(), "03_none": None}).set_index("chapter")
    assert "robust: not recorded" not in frame.columns  # every record has both columns
    row = frame.loc["01_made_up"]
    assert row["claims"] == 4  # the code check is not a claim
    assert (row["reproduced: holds"], row["reproduced: does not hold"], row["reproduced: not judged"]) == (3, 0, 1)
    assert (row["robust: holds"], row["robust: does not hold"], row["robust: not judged"]) == (1, 1, 2)
    assert frame.loc["03_none", "claims"] == 0
    assert frame.loc["all chapters"].equals(frame.loc["01_made_up"] + frame.loc["03_none"])


def test_counts_with_an_old_record_count_its_robust_column_apart():
    frame = ledger.counts({"01_made_up": _record(), "02_old": _old_record()}).set_index("chapter")
    assert frame.loc["02_old", "robust: not recorded"] == 4
    assert frame.loc["02_old", ["robust: holds", "robust: does not hold", "robust: not judged"]].sum() == 0
    assert frame.loc["all chapters", "reproduced: holds"] == 6
    sentence = ledger.totals_sentence({"01_made_up": _record(), "02_old": _old_record()})
    assert sentence.startswith("Of the 8 claims in the published full runs, reproduced: 6 hold, 0 do not hold, 2 not judged")
    assert "4 not recorded" in sentence


def test_claim_rows():
    rows = ledger.claim_rows({"01_made_up": _record()}).set_index("claim")
    assert list(rows.index) == ["A holds", "B holds", "C holds", "D holds"]
    assert rows.loc["B holds", "what stops a verdict"] == "robust: split R-hat <= 1.01 (reached: 1.3)"
    assert rows.loc["C holds", "what stops a verdict"] == (
        "reproduced: accuracy >= 90% of 0.8 (reached: 0.5); robust: accuracy >= 90% of 0.8 (reached: 0.5)")
    assert rows.loc["D holds", "ours"] == "o4 (1 chain) (robust protocol: o4 (4 chains))"
    assert rows.loc["A holds", "what stops a verdict"] == ""


def test_no_claims():
    assert ledger.totals_sentence({}) == "No claim is judged yet in the published full runs."


def test_html_links_claims_and_shows_both_columns():
    record = _record()
    record["notes"] = {"claim_sections": {"both-hold": "section-a"}}
    out = ledger.claims_html({"01_made_up": record, "02_none": None}, label="Table 2", anchor="claims",
                             caption="every claim")
    assert out.count('class="symlib-claim-card"') == 4  # one per claim, no code check, nothing for a missing record
    # a made-up chapter has no notebook, so its name stands for its title
    assert ('<p class="symlib-chapter-head"><a class="reference internal" href="01_made_up.html">01_made_up</a></p>'
            in out and "02_none" not in out)
    assert '<span class="symlib-claim-no">Claim 1.</span>' in out  # numbered as in the chapter's ledger
    assert '<a class="reference internal" href="01_made_up.html#section-a">A holds</a>' in out
    assert "✓ holds" in out and "✗ does not hold" in out and "○ not judged" in out
    assert "reached 1.3; judging needs split R-hat ≤ 1.01" in out
    counts = ledger.counts_html({"01_made_up": record, "02_old": _old_record()}, label="Table 1", anchor="n",
                                caption="tally")
    assert "not recorded" in counts and counts.count("<tr>") == 2 + 3  # two header rows, two chapters, the total
    assert '<th colspan="3">reproduced</th><th colspan="4">robust</th>' in counts


def test_chapter_titles_come_from_the_notebooks_headings():
    assert ledger.chapter_title("01_ortho_skip") == "1 · Orthogonal skip connections against VI underfitting"
    assert ledger.chapter_title("99_no_such_chapter") == "99_no_such_chapter"
    table = ledger.counts_html({"06_synthesis": {"claims": []}}, label="", anchor="t", caption="c", link_prefix="x/")
    assert '<a class="reference internal" href="x/06_synthesis.html">6 · Synthesis: every remedy' in table

"""The claims ledger's cards (symlib.book.cards)."""

from symlib.book import cards
from symlib.book.results import Claim, Kind, precondition


def _claim(**fields):
    acc = precondition("accuracy", "median accuracy >= 0.858", 0.627, False, source="Table 1")
    rhat = precondition("rhat", "split R-hat <= 1.01", 1.4, False, column="robust")
    base = {"id": "c", "text": "networks agree", "paper": "95.3 %", "ours": "62.7 %", "holds": True,
            "criterion": "x", "preconditions": (acc, rhat)}
    return Claim(**{**base, **fields}).to_dict()


def test_not_judged_in_one_sentence_with_the_value_reached_and_the_bar():
    verdict, failed = cards.tier_verdict(_claim(), "robust")
    assert verdict == "not judged" and [p["name"] for p in failed] == ["accuracy", "rhat"]
    assert cards.not_judged_sentence(failed) == "reached 0.627; judging needs median accuracy ≥ 0.858 (and 1 more)"
    assert cards.tier_verdict(None, "reproduced") == ("—", [])


def test_a_card_per_tier_and_column():
    full = _claim(preconditions=())
    out = cards.claim_card(_claim(), tiers={"quick (this build)": _claim(), "full (published)": full},
                           href="#sec", anchor="claim-c", stale_tiers=("full (published)",))
    assert out.count("○ not judged") == 2 and out.count("✓ holds") == 2  # quick: neither; full: both hold
    assert '<dt>ours (quick (this build))</dt><dd>62.7 %</dd>' in out and 'class="symlib-paper">95.3 %' in out
    assert '<tr class="symlib-stale"><th scope="row">full (published)</th>' in out
    assert '<a class="reference internal" href="#sec">networks agree</a>' in out and 'id="claim-c"' in out
    numbered = cards.claim_card(_claim(), tiers={"quick": _claim()}, number=3)
    assert '<p class="symlib-claim"><span class="symlib-claim-no">Claim 3.</span> networks agree</p>' in numbered
    missing = cards.claim_card(_claim(), tiers={"quick (this build)": _claim(), "full (published)": None})
    assert missing.count("· —") == 2  # the published run lacks the claim


def test_claims_are_numbered_without_gaps_and_code_checks_lettered_apart():
    entries = [{"id": "a"}, {"id": "k1", "kind": "code check"}, {"id": "b", "kind": "claim"},
               {"id": "k2", "kind": "code check"}, {"id": "c"}]
    assert cards.claim_numbers(entries) == {"a": "1", "k1": "A", "b": "2", "k2": "B", "c": "3"}
    assert [cards._letters(i) for i in (0, 25, 26, 27)] == ["A", "Z", "AA", "AB"]
    check = Claim(id="k", text="a theorem", paper="p", ours="o", holds=True, kind=Kind.CODE_CHECK).to_dict()
    out = cards.claim_card(check, tiers={"quick": check}, number="A")
    assert '<span class="symlib-check-no">Code check A.</span>' in out and "symlib-claim-no" not in out


def test_a_code_check_says_so():
    check = Claim(id="k", text="a theorem", paper="p", ours="o", holds=True, kind=Kind.CODE_CHECK).to_dict()
    out = cards.claim_card(check, tiers={"quick": check})
    assert "⚙ holds" in out and "a check of our code, not a claim of the paper: not counted" in out


def test_the_glance_box_counts_both_columns_and_links_each_claim():
    check = Claim(id="k", text="a theorem", paper="p", ours="o", holds=True, kind=Kind.CODE_CHECK).to_dict()
    held = _claim(id="h", text="held", preconditions=())
    old = {k: v for k, v in _claim(id="o", text="old", preconditions=()).items() if k != "verdicts"}
    out = cards.glance("01_x", {"claims": [_claim(), held, old, check]}, provenance="full = <code>x</code>")
    assert "3 claims: reproduced: 2 holds, 1 not judged; robust: 1 holds, 1 not judged, 1 not recorded" in out
    assert ('<span class="symlib-claim-no">2.</span> <a class="reference internal" href="#claim-h">held</a>' in out
            and "a theorem" not in out)
    assert "<code>x</code>" in out
    assert "No full run of this chapter is published yet" in cards.glance("01_x", None)


def test_a_card_names_code_in_words():
    out = cards.claim_card(_claim(ours="robustness: depends on ood_score; q_r"), tiers={"full": _claim(
        ours="robustness: depends on ood_score; q_r")})
    assert "depends on OOD score; q_r" in out and "ood_score" not in out


def test_a_robust_refutation_names_its_first_setting_and_counts_the_others():
    """A table cell says where a robust "does not hold" was found without listing every setting
    of the sweep (a long list made one cell several times taller than its row)."""
    from symlib.book.cards import refuted_sentence

    assert refuted_sentence("this run's setting (this profile)") == \
        "fails with every robust precondition met under this run's setting (this profile)"
    long = refuted_sentence("this run's setting (this profile); largest weight; first weight, scales normalised")
    assert long == ("fails with every robust precondition met under this run's setting (this profile) "
                    "and 2 other settings of its sweep")
    assert refuted_sentence("a; b").endswith("under a and 1 other setting of its sweep")

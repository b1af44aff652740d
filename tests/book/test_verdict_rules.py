"""The rules every chapter's verdicts follow, on made-up claims: a diagnosis for every "does not
hold", a robust "does not hold" wherever a fully gated setting refutes a claim, the rule for a
reference that has not mixed, replicates behind a robust "holds", and a stuck chain failing ESS."""

from dataclasses import replace

import pytest
from example_chapter import CHAPTER as EXAMPLE
from example_chapter import PROFILES

from symlib.book.cards import claim_card, diagnosis_text
from symlib.book.chapter import RunResults, Sweep
from symlib.book.ledger import claim_rows
from symlib.book.preconditions import MIN_REPLICATES, chains_mixed, reference_converged, replicated
from symlib.book.results import Cause, ChapterResults, Claim, Column, Diagnosis, precondition

QUICK = PROFILES["quick"]


def _results(mean):
    return RunResults({"summary": {"mean": mean, "n": 10}}, config=QUICK)


def _claim(**fields):
    base = {"id": "c", "text": "A claim", "paper": "Sec. 1: 'a claim'", "ours": "0.3", "holds": False, "criterion": "x < 0.1"}
    return Claim(**{**base, **fields})


# --- diagnosis --------------------------------------------------------------------------------

def test_a_claim_that_does_not_hold_must_say_why():
    undiagnosed = replace(EXAMPLE, claims=lambda r: [replace(c, diagnosis=()) for c in EXAMPLE.claims(r)])
    with pytest.raises(ValueError, match="every claim that does not hold says why.*none for mean-near-zero"):
        undiagnosed.judged_claims(_results(0.9))
    # one that holds in both columns needs none
    [holds] = replace(undiagnosed, sweeps=()).judged_claims(_results(0.01))
    assert holds.holds is True and not holds.diagnosis


def test_the_chapter_may_give_diagnoses_and_they_are_stored_and_shown():
    given = replace(EXAMPLE, claims=lambda r: [replace(c, diagnosis=()) for c in EXAMPLE.claims(r)],
                    diagnoses=lambda r: {"mean-near-zero": (Diagnosis(Cause.DATA, "draws from a t distribution"),)})
    [claim] = given.judged_claims(_results(0.9))
    assert claim.holds is False and claim.diagnosis[0].cause is Cause.DATA
    stored = claim.to_dict()
    assert stored["diagnosis"] == [{"cause": "data", "detail": "draws from a t distribution", "sweep": ""}]
    assert diagnosis_text(stored) == "data: draws from a t distribution"
    card = claim_card(stored, tiers={"full": stored})
    assert "why it does not hold (full)" in card and "data: draws from a t distribution" in card
    rows = claim_rows({"99_example": {"claims": [stored]}})
    assert rows.loc[0, "why it does not hold"] == "data: draws from a t distribution"
    with pytest.raises(ValueError, match="not claims"):
        replace(given, diagnoses=lambda r: {"other": ()}).judged_claims(_results(0.9))


def test_a_stored_diagnosis_survives_a_round_trip_through_the_results_file():
    results = ChapterResults(chapter="99_example", profile="quick", seed=0, device="cpu")
    claim = _claim(diagnosis=(Diagnosis(Cause.BUDGET, "1 of 4 chains"),), reference="HMC: split R-hat 2.45")
    results.add_claims([claim.to_dict()])
    assert results.claims[0].diagnosis == claim.diagnosis and results.claims[0].reference == claim.reference


def test_a_diagnosis_is_checked():
    with pytest.raises(ValueError, match="cause must be one of"):
        Diagnosis("bad luck", "x")
    with pytest.raises(TypeError, match="non-empty detail"):
        Diagnosis(Cause.BUDGET, "")
    with pytest.raises(ValueError, match="names the sweep choice"):
        Diagnosis(Cause.OPEN_CHOICE, "the direction of u")


def test_an_open_choice_must_be_one_the_sweep_varies():
    rows = [{"choice": "tolerance", "setting": "0.5", "verdict": "does not hold", "robust verdict": "does not hold"},
            {"choice": "tolerance", "setting": "0.9", "verdict": "holds", "robust verdict": "holds"}]
    chapter = replace(EXAMPLE, sweeps=(Sweep("mean-near-zero", lambda r: rows),),
                      diagnoses=lambda r: {"mean-near-zero": (Diagnosis(Cause.OPEN_CHOICE, "u", sweep="direction"),)},
                      claims=lambda r: [replace(c, diagnosis=()) for c in EXAMPLE.claims(r)])
    with pytest.raises(ValueError, match="open choice 'direction', which its sensitivity sweep does not vary"):
        chapter.judged_claims(_results(0.9))
    ok = replace(chapter, diagnoses=lambda r: {"mean-near-zero": (Diagnosis(Cause.OPEN_CHOICE, "tol", sweep="tolerance"),)})
    [claim] = ok.judged_claims(_results(0.9))
    assert claim.diagnosis[0].sweep == "tolerance"


# --- the robust "does not hold" rule ----------------------------------------------------------

def test_a_claim_failing_at_its_own_fully_gated_setting_does_not_hold_robustly():
    """Before: the robust column said "not judged" because other settings were unjudged."""
    rows = [{"choice": "tolerance", "setting": "0.5", "verdict": "does not hold", "robust verdict": "does not hold"},
            {"choice": "tolerance", "setting": "0.9", "verdict": "not judged", "robust verdict": "not judged"}]
    chapter = replace(EXAMPLE, sweeps=(Sweep("mean-near-zero", lambda r: rows),))
    [claim] = chapter.judged_claims(_results(0.9))
    assert claim.failed(Column.ROBUST)  # the sweep was not judged in full ...
    assert claim.robust is False and claim.column_verdict(Column.ROBUST) == "does not hold"  # ... yet refuted
    assert claim.to_dict()["verdicts"]["robust"]["refuted_under"].startswith("this run's setting")


def test_a_claim_whose_own_setting_is_not_fully_gated_stays_not_judged():
    rows = [{"choice": "tolerance", "setting": "0.5", "verdict": "does not hold", "robust verdict": "not judged"},
            {"choice": "tolerance", "setting": "0.9", "verdict": "not judged", "robust verdict": "not judged"}]
    unmixed = replace(EXAMPLE, sweeps=(Sweep("mean-near-zero", lambda r: rows),), claims=lambda r: [
        replace(c, preconditions=(*c.preconditions, *reference_converged("HMC", rhat=1.3, bulk_ess=50.0)[0]))
        for c in EXAMPLE.claims(r)])
    [claim] = unmixed.judged_claims(_results(0.9))
    assert claim.robust is None and not claim.robust_refuted


# --- a reference that has not mixed -----------------------------------------------------------

def test_an_unmixed_reference_gates_the_robust_column_only_and_is_shown_beside_the_reproduced():
    pre, words = reference_converged("the HMC reference", rhat=2.45, bulk_ess=5.0, tail_ess=12.0, chains=4,
                                     depth_share=0.99)
    assert {p.column for p in pre} == {Column.ROBUST} and not any(p.met for p in pre)
    assert all("Vehtari" in p.source for p in pre)
    assert words == ("the HMC reference: split R-hat 2.45, bulk ESS 5, tail ESS 12, 4 chains, 99% of iterations "
                     "at the maximum tree depth (not mixed by today's standard)")
    claim = _claim(holds=True, preconditions=pre, reference=words)
    assert claim.holds is True and claim.robust is None  # judged against it as the paper did; not robust
    card = claim_card(claim.to_dict(), tiers={"full": claim.to_dict()})
    assert "reference: the HMC reference: split R-hat 2.45" in card


def test_a_reference_whose_convergence_the_paper_reported_gates_both_columns_citing_it():
    pre, words = reference_converged("NUTS", rhat=1.3, bulk_ess=900.0, reported="Table 3: R-hat below 1.1")
    assert {p.column for p in pre} == {Column.BOTH} and {p.source for p in pre} == {"Table 3: R-hat below 1.1"}
    assert _claim(holds=True, preconditions=pre).holds is None
    mixed, words = reference_converged("NUTS", rhat=1.001, bulk_ess=900.0, tail_ess=800.0)
    assert all(p.met for p in mixed) and words.endswith("(mixed by today's standard)")


# --- replicates and stuck chains --------------------------------------------------------------

def test_a_robust_holds_needs_replicates():
    one = _claim(holds=True, preconditions=(replicated(1),))
    assert one.holds is True and one.robust is None
    several = _claim(holds=True, preconditions=(replicated(MIN_REPLICATES, what="splits"),))
    assert several.robust is True and several.preconditions[0].criterion == f"splits >= {MIN_REPLICATES}"


def test_a_quantity_that_never_moves_fails_the_ess_gate_as_it_fails_r_hat():
    """Before: R-hat NaN failed, but an ESS equal to the number of draws passed its gate."""
    rhat, bulk, tail = chains_mixed(float("nan"), 4000.0, 4000.0)
    assert not rhat.met and not bulk.met and not tail.met
    assert "not counted" in bulk.measured
    assert all(p.met for p in chains_mixed(1.001, 4000.0, 4000.0))


def test_precondition_helpers_keep_their_names():
    assert precondition("x", "a >= 1", 2.0, True).measured == "2"

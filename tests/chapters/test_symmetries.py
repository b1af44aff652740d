"""Chapter 0 end to end in the smoke profile, and its pieces against independent counts."""

import math

import matplotlib
import pytest
import torch

from symlib.book.chapter import RunResults
from symlib.book.results import Column, Kind
from symlib.book.streams import Stream
from symlib.chapters import get_profile
from symlib.chapters import symmetries as ch0
from symlib.chapters.symmetries import CHAPTER
from symlib.chapters.symmetries.stages import brute_force_counts


@pytest.fixture(scope="module")
def results():
    return CHAPTER.run_stages(get_profile("00_symmetries", "smoke"), seed=0)


def test_smoke_run_and_claims_hold(results):
    claims = CHAPTER.judged_claims(results)
    assert {c.id for c in claims} == {"function-invariance", "mode-count", "canonicalisation"}
    assert all(c.holds is True for c in claims), [c.verdict for c in claims]
    assert all(c.kind is Kind.CODE_CHECK and c.criterion for c in claims)  # by construction: code checks


def _judged(invariance=None, brute=None, demo=None):
    """Verdicts of made-up numbers: by default all three checks pass."""
    invariance = invariance or [{"max |f(g·w)(x) - f(w)(x)|": 1e-15, "min ||g·w - w|| / ||w||": 0.8}]
    brute = brute or {"relu 2-3-1": {"brute force": 6, "formula": 6}}
    demo = demo or {"relu": {"canonical_spread": 1e-15, "raw_spread": 3.0, "distinct_raw": 50}}
    return {c.id: c for c in ch0.CHAPTER.claims(RunResults({"invariance": invariance, "brute": brute, "demo": demo}))}


def test_each_criterion_and_precondition_on_made_up_numbers():
    assert all(c.holds is True for c in _judged().values())
    changed = _judged(invariance=[{"max |f(g·w)(x) - f(w)(x)|": 1e-6, "min ||g·w - w|| / ||w||": 0.8}])
    assert changed["function-invariance"].holds is False
    still = _judged(invariance=[{"max |f(g·w)(x) - f(w)(x)|": 0.0, "min ||g·w - w|| / ||w||": 1e-6}])
    assert still["function-invariance"].holds is None and "moved the weights" in still["function-invariance"].verdict
    assert _judged(brute={"tanh 2-3-1": {"brute force": 47, "formula": 48}})["mode-count"].holds is False
    spread = _judged(demo={"relu": {"canonical_spread": 0.1, "raw_spread": 3.0, "distinct_raw": 50}})
    assert spread["canonicalisation"].holds is False
    one = _judged(demo={"relu": {"canonical_spread": 0.0, "raw_spread": 0.0, "distinct_raw": 1}})
    assert one["canonicalisation"].holds is None and "copies differ" in one["canonicalisation"].verdict


def test_code_checks_judge_both_columns_alike_and_every_precondition_says_what_it_checks():
    """Issue 28: a code check has no paper's run to reproduce, so its preconditions gate both
    columns and cite the construction they guard; a failed one leaves both columns not judged."""
    for judged in (_judged(), _judged(invariance=[{"max |f(g·w)(x) - f(w)(x)|": 0.0, "min ||g·w - w|| / ||w||": 0.0}]),
                   _judged(demo={"relu": {"canonical_spread": 0.0, "raw_spread": 0.0, "distinct_raw": 1}})):
        for c in judged.values():
            v = c.verdicts
            assert v["reproduced"]["verdict"] == v["robust"]["verdict"] == c.verdict, c.id
            for p in c.preconditions:
                assert p.column is Column.BOTH and "construction of the check" in p.source, (c.id, p.name)
    assert _judged()["function-invariance"].verdicts["robust"]["holds"] is True
    vacuous = _judged(invariance=[{"max |f(g·w)(x) - f(w)(x)|": 0.0, "min ||g·w - w|| / ||w||": 0.0}])
    assert vacuous["function-invariance"].robust is None and vacuous["function-invariance"].holds is None


def test_canonical_copies_collapse(results):
    for d in results["demo"].values():
        assert d["distinct_canonical"] == 1 and d["distinct_raw"] > 1


def test_mode_table_values():
    rows = {r["network"]: r for r in ch0.mode_count_table()}
    assert rows["Boston housing 13-50-1"]["log10 #permutation modes"] == round(math.log10(math.factorial(50)), 1)
    assert rows["OptuNet (MNIST convnet)"]["#permutation modes"] == "172,800"
    assert rows["sinc regression MLP 1-32x5-1"]["also"] == "none"  # SELU: permutations only


def test_brute_force_counter_is_independent_of_formula():
    # 2 hidden units, tanh: 2! permutations x 2^2 sign patterns
    assert ch0.brute_force_mode_count((1, 2, 1), "tanh", torch.Generator().manual_seed(0)) == 8
    assert ch0.brute_force_mode_count((2, 3, 1), "relu", torch.Generator().manual_seed(0)) == 6


def test_figure(results):
    matplotlib.use("Agg")
    fig = ch0.plot_canonicalisation(results["demo"])
    assert len(fig.axes) == 4


def test_stages_draw_from_their_own_named_streams(results):
    """Each seeded stage equals its function called with the generators of its named streams, and
    another run seed moves every one of them."""
    config = get_profile("00_symmetries", "smoke")
    again = CHAPTER.run_stages(config, seed=3)

    def stream(stage, purpose):
        return Stream(3, "00_symmetries", stage, purpose).torch()

    assert again["invariance"] == ch0.invariance_table(config, stream("invariance", "nets-and-group"))
    assert again["brute"] == brute_force_counts(stream("brute", "nets"))
    demo = ch0.canonicalisation_demo(config, {a: stream("demo", a) for a in ("relu", "tanh")})
    assert all(again["demo"][a]["raw"].equal(demo[a]["raw"]) for a in ("relu", "tanh"))
    assert again["modes"] == ch0.mode_count_table()
    assert not again["demo"]["relu"]["raw"].equal(results["demo"]["relu"]["raw"])
    assert again["invariance"] != results["invariance"]


def test_the_streams_are_distinct_and_no_legacy_seed_is_left():
    """Issue 27, step 5: the three seeded stages no longer share the run seed."""
    names = [(s.stage, s.purpose) for s in CHAPTER.streams(0)]
    assert names == [("brute", "nets"), ("invariance", "nets-and-group"), ("demo", "relu"), ("demo", "tanh")]
    assert CHAPTER.legacy_aliases(0) == [] and all(s.legacy_seed is None for s in CHAPTER.stages)


def test_views_and_quotes_come_from_the_results(results):
    frames = {v.name: v.build(results) for v in CHAPTER.views if hasattr(v, "caption")}
    assert list(frames) == ["invariance", "brute_force_mode_count", "mode_counts", "canonicalisation"]
    assert list(frames["canonicalisation"].index) == ["relu", "tanh"]
    quotes = {q.name: float(q.value(results)) for q in CHAPTER.quotes}
    assert quotes["worst_output_change"] == max(r["max |f(g·w)(x) - f(w)(x)|"] for r in results["invariance"])

"""The chapter contract: declared stages, exact cache keys, field-read validation, one claims
signature, the smoke gate, sweeps and named streams (symlib.book.chapter)."""

from dataclasses import dataclass, replace

import pytest
from example_chapter import CHAPTER as EXAMPLE
from example_chapter import PROFILES

from symlib.book import cache
from symlib.book.chapter import Chapter, RunResults, Stage, Sweep, sized_to_judge
from symlib.book.results import Claim, Column, Kind, precondition
from symlib.book.streams import Stream
from symlib.chapters.symmetries import CHAPTER as CH0

SMOKE = PROFILES["smoke"]


@dataclass(frozen=True)
class P:
    a: int = 1
    b: int = 2


def _chapter(*stages, claims=lambda r: [], **kw):
    return Chapter(name="98_test", paper="none", profiles={"smoke": P()}, stages=stages, claims=claims, **kw)


def test_a_stage_reading_an_undeclared_field_fails_loudly():
    chapter = _chapter(Stage("s", lambda ctx: ctx.config.b, fields=("a",), cache=False))
    with pytest.raises(AttributeError, match=r"stage 's' read profile field 'b', which it did not declare.*fields=\(\.\.\.\)"):
        chapter.run_stages(P(), seed=0)


def test_the_key_is_exactly_the_declared_fields_seed_and_device():
    stage = EXAMPLE.stage("draws")
    assert stage.key(SMOKE, 0) == {"seed": 0, "n_draws": 200}
    assert stage.key(SMOKE, 0, "cuda") == {"seed": 0, "n_draws": 200, "device": "cuda"}
    assert stage.key(replace(SMOKE, label="other", scale=5.0), 0) == stage.key(SMOKE, 0)
    assert stage.key(replace(SMOKE, n_draws=7), 0) != stage.key(SMOKE, 0)


def test_declaring_a_chapter_checks_its_stages():
    with pytest.raises(ValueError, match="declares fields \\['c'\\] that the profile does not have"):
        _chapter(Stage("s", print, fields=("c",)))
    with pytest.raises(ValueError, match="needs \\['t'\\], which are not earlier stages"):
        _chapter(Stage("s", print, needs=("t",)), Stage("t", print))
    with pytest.raises(ValueError, match="declared twice"):
        _chapter(Stage("s", print), Stage("s", print))
    with pytest.raises(ValueError, match="does not declare their fields \\['a'\\]"):
        _chapter(Stage("s", print, fields=("a",)), Stage("t", print, fields=("b",), needs=("s",)))
    with pytest.raises(ValueError, match="stages 's' and 't' would share their cache entries"):
        _chapter(Stage("s", print, experiment="98_test-x"), Stage("t", print, experiment="98_test-x"))
    _chapter(Stage("s", print, experiment="98_test-x"), Stage("t", print, fields=("a",), experiment="98_test-x"))
    with pytest.raises(ValueError, match="either legacy_seed or streams"):
        Stage("s", print, streams=("init",), legacy_seed=lambda s: s)


def test_streams_are_named_declared_and_legacy_seeds_kept():
    seen = {}

    def record(ctx):
        seen["init"] = ctx.stream("init")
        with pytest.raises(ValueError, match="did not declare"):
            ctx.stream("noise")
        with pytest.raises(AttributeError, match="no legacy_seed"):
            ctx.seed  # noqa: B018
        return 0

    chapter = _chapter(Stage("s", record, streams=("init",), cache=False),
                       Stage("old", lambda ctx: ctx.seed, legacy_seed=lambda s: s * 1000 + 2, cache=False))
    results = chapter.run_stages(P(), seed=1)
    assert seen["init"] == Stream(1, "98_test", "s", "init") and results["old"] == 1002
    assert chapter.streams(1) == [Stream(1, "98_test", "s", "init")]


@pytest.mark.parametrize("chapter", [EXAMPLE, CH0], ids=lambda c: c.name)
def test_no_two_streams_of_a_chapter_coincide(chapter):
    for seed in (0, 1, 2):
        chapter.streams(seed)  # raises naming the two streams that coincide


def test_claims_must_be_claims_and_the_smoke_gate_is_applied_once():
    results = RunResults({"summary": {"mean": 0.01}}, config=SMOKE)
    [claim] = EXAMPLE.judged_claims(results)
    assert claim.holds is None and "profile sized to judge the claims" in claim.verdict
    assert claim.ours.endswith("robustness: depends on tolerance; holds with 0.5")
    [judged] = EXAMPLE.judged_claims(replace(results, config=PROFILES["quick"]))
    assert judged.holds is True
    check = Claim(id="c", text="t", paper="p", ours="o", holds=True, kind=Kind.CODE_CHECK)
    gated = _chapter(Stage("s", print, cache=False), claims=lambda r: [check], judge_field=None)
    assert gated.judged_claims(RunResults({}, config=P())) == [check]
    as_dict = _chapter(claims=lambda r: [check.to_dict()])
    with pytest.raises(TypeError, match="must return a list of symlib.book.results.Claim; got \\['dict'\\]"):
        as_dict.judged_claims(RunResults({}, config=P()))
    assert sized_to_judge(True) == []


def test_a_sweep_has_one_shape():
    bad = replace(EXAMPLE, sweeps=(Sweep("mean-near-zero", lambda r: [{"setting": "x", "outcome": "holds"}]),))
    with pytest.raises(ValueError, match="choice, setting, verdict and robust verdict; missing "
                                         "\\['choice', 'robust verdict', 'verdict'\\]"):
        bad.judged_claims(RunResults({"summary": {"mean": 0.0}}, config=SMOKE))


def test_a_sweep_without_rows_is_not_run_in_that_profile():
    results = RunResults({"summary": {"mean": 0.01}}, config=PROFILES["quick"])
    off = replace(EXAMPLE, sweeps=(Sweep("mean-near-zero", lambda r: []),))
    [claim] = off.judged_claims(results)
    assert "robustness" not in claim.ours and off.sweep_frame(off.sweeps[0], results) is None
    # the robust column asks for the sweep: not judged there, the reproduced column unaffected
    assert claim.holds is True and claim.robust is None
    assert claim.column_verdict(Column.ROBUST) == ("not judged: the claim judged under every setting of its "
                                                   "sensitivity sweep (measured not run in this profile)")


def _swept_claim(rows, **fields):
    """The example's claim judged with a sweep of ``rows`` (the first is the run's own)."""
    chapter = replace(EXAMPLE, sweeps=(Sweep("mean-near-zero", lambda r: rows),))
    [claim] = chapter.judged_claims(RunResults({"summary": {"mean": 0.01}}, config=PROFILES["quick"]))
    return replace(claim, **fields) if fields else claim


def _row(setting, verdict, robust=None):
    return {"choice": "tolerance", "setting": setting, "verdict": verdict, "robust verdict": robust or verdict}


def test_a_sweep_feeds_the_robust_column():
    own = _row("0.5", "holds")
    every = _swept_claim([own, _row("0.1", "holds"), _row("0.05", "holds")])
    assert (every.holds, every.robust) == (True, True)
    assert every.preconditions[-1].measured == "2 of 2 judged" and every.preconditions[-1].column is Column.ROBUST
    # fails under one open choice: not robust; the reproduced column keeps the run's own verdict
    flips = _swept_claim([own, _row("0.1", "holds"), _row("1e-09", "does not hold")])
    assert (flips.holds, flips.robust) == (True, False)
    assert flips.verdicts["robust"]["measured"].endswith("does not hold under 1e-09")
    # a setting the robust column could not judge: not judged there, by how much
    partly = _swept_claim([own, _row("0.1", "holds", robust="not judged"), _row("0.05", "holds")])
    assert partly.robust is None and partly.holds is True
    assert "(measured 1 of 2 judged)" in partly.column_verdict(Column.ROBUST)
    # but one fully gated setting that refutes it is enough: does not hold, whatever is unjudged
    refuted = _swept_claim([own, _row("0.1", "holds", robust="not judged"), _row("1e-09", "does not hold")])
    assert (refuted.holds, refuted.robust) == (True, False) and refuted.robust_refuted == "1e-09"
    assert refuted.column_verdict(Column.ROBUST) == "does not hold"
    # the robust column judges its own outcome per setting, not the reproduced one
    robust_only = _swept_claim([own, _row("0.1", "holds", robust="does not hold")])
    assert (robust_only.holds, robust_only.robust) == (True, False)


def test_the_runner_passes_needs_and_caches_each_stage(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path))
    first = EXAMPLE.run_stages(SMOKE, seed=0)
    assert first["summary"]["n"] == 200 and first["summary"]["mean"] == first["draws"].mean().item()
    entries = {p.parent.name: p.stem for p in tmp_path.glob("*/*.pt")}
    assert entries == {
        "99_example-draws": cache.config_key("99_example-draws", "1", {"seed": 0, "n_draws": 200}),
        "99_example-summary": cache.config_key("99_example-summary", "1", {"seed": 0, "n_draws": 200, "scale": 2.0}),
    }
    again = EXAMPLE.run_stages(replace(SMOKE, label="undeclared"), seed=0)  # same keys: served
    assert again["draws"].equal(first["draws"]) and len(list(tmp_path.glob("*/*.pt"))) == 2
    EXAMPLE.run_stages(replace(SMOKE, scale=3.0), seed=0)  # only the summary's key moves
    assert [len(list((tmp_path / d).glob("*.pt"))) for d in ("99_example-draws", "99_example-summary")] == [1, 2]


def _square_plus_offset(ctx, item):
    """A fan-out stage's compute (module level: it may run in a joblib worker)."""
    return item * item + ctx.config.a


def test_a_fan_out_stage_caches_each_item_on_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path))
    stage = Stage("fan", _square_plus_offset, fields=("a",), items=lambda config: [1, 2, 3][: config.a + 1])
    chapter = _chapter(stage)
    assert chapter.run_stages(P(a=1), seed=0)["fan"] == {1: 2, 2: 5}
    keys = {p.stem for p in (tmp_path / "98_test-fan").glob("*.pt")}
    assert keys == {cache.config_key("98_test-fan", "1", {"seed": 0, "a": 1, "item": i}) for i in (1, 2)}
    assert stage.key(P(a=1), 0, item=2) == {"seed": 0, "a": 1, "item": 2}
    # a larger run reuses the items it shares with the smaller one (they differ only by a, so
    # none here) and each item is its own entry
    assert chapter.run_stages(P(a=2), seed=0)["fan"] == {1: 3, 2: 6, 3: 11}
    assert len(list((tmp_path / "98_test-fan").glob("*.pt"))) == 5
    twice = _chapter(Stage("fan", _square_plus_offset, items=lambda config: [1, 1]))
    with pytest.raises(ValueError, match="lists an item twice"):
        twice.run_stages(P(), seed=0)


def test_a_fan_out_stage_runs_in_joblib_workers(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLIB_CACHE", str(tmp_path))
    monkeypatch.setenv("SYMLIB_JOBS", "2")
    chapter = _chapter(Stage("fan", _square_plus_offset, fields=("a",), items=lambda config: [1, 2, 3]))
    assert chapter.run_stages(P(a=4), seed=0)["fan"] == {1: 5, 2: 8, 3: 13}  # the view pickles


def test_key_data_adds_declared_parts_and_cannot_clash():
    stage = Stage("s", print, fields=("a",), key_data=lambda config: {"files": f"sha-{config.a}"})
    assert stage.key(P(a=3), 1) == {"seed": 1, "a": 3, "files": "sha-3"}
    clash = Stage("s", print, fields=("a",), key_data=lambda config: {"a": 0})
    with pytest.raises(ValueError, match="key_data gives \\['a'\\], which the key already has"):
        clash.key(P(), 0)
    with pytest.raises(AttributeError, match="did not declare"):  # key_data sees the declared fields only
        Stage("s", print, fields=("a",), key_data=lambda config: {"x": config.b}).key(P(), 0)


def test_a_view_can_be_changed_only_in_its_declared_fields():
    view = Stage("s", print, fields=("a",)).view(P(), "98_test")
    assert view.replace(a=5).a == 5 and view.a == 1
    with pytest.raises(AttributeError, match="did not declare"):
        view.replace(b=3)


def test_fan_out_items_get_their_own_streams_and_notes_reach_the_results():
    seen = {}

    def draw(ctx, item):
        seen[item] = ctx.stream("init", item)
        return 0

    chapter = _chapter(Stage("fan", draw, streams=("init",), items=lambda config: [("a", 1), ("b", 2)], cache=False),
                       notes=lambda results: {"n_items": len(results["fan"])})
    results = chapter.run_stages(P(), seed=4)
    assert seen[("a", 1)] == Stream(4, "98_test", "fan", 'init[["a",1]]') and seen[("a", 1)] != seen[("b", 2)]
    assert chapter.notes(results) == {"n_items": 2}


def test_errata_may_quote_the_run():
    from symlib.book.results import Erratum

    erratum = Erratum(id="e", paper_says="1", correction="2", where="p. 1")
    static = _chapter(errata=(erratum,))
    dynamic = _chapter(errata=lambda results: [replace(erratum, correction=f"2 (this run: {results['x']})")])
    results = RunResults({"x": 7}, config=P())
    assert static.errata_of(results) == (erratum,)
    assert dynamic.errata_of(results)[0].correction == "2 (this run: 7)"
    with pytest.raises(TypeError, match="errata must be symlib.book.results.Erratum"):
        _chapter(errata=lambda results: [{"id": "e"}]).errata_of(results)


def test_a_sweeps_rows_are_computed_once_per_results():
    calls = []

    def rows(results):
        calls.append(1)
        return [{"choice": "tolerance", "setting": "0.5", "verdict": "holds", "robust verdict": "holds"}]

    chapter = replace(EXAMPLE, sweeps=(Sweep("mean-near-zero", rows),))
    results = RunResults({"summary": {"mean": 0.01}}, config=PROFILES["quick"])
    chapter.judged_claims(results)
    first = chapter.sweep_frame(chapter.sweeps[0], results)
    assert chapter.sweep_frame(chapter.sweeps[0], results) is first and calls == [1]
    chapter.judged_claims(replace(results, config=SMOKE))  # other results: judged again
    assert calls == [1, 1]


def test_a_reproduced_precondition_must_cite_its_source():
    results = RunResults({"summary": {"mean": 0.01}}, config=PROFILES["quick"])

    def claims(source):
        pre = (precondition("chains", "one chain, as the paper's", 1, True, column=Column.REPRODUCED, source=source),
               precondition("rhat", "split R-hat <= 1.01", 1.2, False, column=Column.ROBUST))  # robust: no source needed
        return lambda r: [Claim(id="c", text="t", paper="p", ours="o", holds=True, preconditions=pre)]

    with pytest.raises(ValueError, match="must cite where the paper's run is shown or stated .* none given for c: chains"):
        replace(EXAMPLE, claims=claims(""), sweeps=()).judged_claims(results)
    [claim] = replace(EXAMPLE, claims=claims("Sec. 4"), sweeps=()).judged_claims(results)
    assert (claim.holds, claim.robust) == (True, None)


def test_a_sweep_may_mark_the_runs_own_setting_anywhere():
    rows = [dict(_row("0.1", "holds"), **{"this run": False}), dict(_row("0.5", "holds"), **{"this run": True}),
            dict(_row("1e-09", "does not hold"), **{"this run": False})]
    claim = _swept_claim(rows)
    assert claim.preconditions[-1].measured == "2 of 2 judged" and claim.robust is False
    assert claim.verdicts["robust"]["measured"].endswith("does not hold under 1e-09")

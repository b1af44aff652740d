"""Publishing runs (symlib.book.publishing): a finished run's record and figures copied to
published/<tier>/ with where its numbers were computed, a run in progress and one that lost its
state recorded, records rehashed, and the command line that refuses uncommitted code."""

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest

from symlib.book import pieces, published, publishing, records
from symlib.book.provenance import (
    combined_code_hash,
    compute_code_hash,
    profile_hash,
    stage_code_hash,
    stage_experiments,
)
from symlib.book.results import ChapterResults, precondition
from symlib.chapters.ortho_skip.profiles import PROFILES

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def _run(tmp_path, profile_name="full", config=None):
    config = config or PROFILES["smoke"]
    results = ChapterResults("01_ortho_skip", profile_name, 0, "cpu", config=config)
    results.add_claim(
        "a",
        "plain VI underfits",
        "yes",
        "ours",
        True,
        criterion="x",
        preconditions=[precondition("plateau", "ELBO plateaued", 0.001, True)],
    )
    results.add_claim(
        "b",
        "skips help",
        "yes",
        "ours",
        None,
        preconditions=[precondition("plateau", "ELBO plateaued", 0.2, False)],
    )
    results.write(tmp_path / "results")
    notebook = {
        "cells": [
            {"outputs": [{"data": {"image/png": base64.b64encode(PNG).decode()}}]},
            {"outputs": [{"text": "no figure"}]},
            # a glued figure (myst_nb.glue(..., display=False)) as papermill stores it
            {"outputs": [{"data": {"application/papermill.record/image/png": base64.b64encode(PNG).decode()}}]},
        ]
    }
    (tmp_path / "executed").mkdir()
    (tmp_path / "executed" / "01_ortho_skip.ipynb").write_text(json.dumps(notebook))
    return config


def test_publish_copies_the_record_and_its_figures(tmp_path):
    config = _run(tmp_path)
    out = publishing.publish(
        "01_ortho_skip",
        source=tmp_path / "results",
        executed=tmp_path / "executed",
        dest=tmp_path / "published",
    )
    record = published.load("01_ortho_skip", tmp_path / "published")
    assert out.name == "01_ortho_skip.json" and record["profile"] == "full"
    assert record["figures"] == ["figure-1.png", "figure-2.png"]
    for name in record["figures"]:
        assert (tmp_path / "published" / "01_ortho_skip" / name).read_bytes() == PNG
    assert record["provenance"]["profile_hash"] == profile_hash(config)
    assert published.staleness(record, config) == []
    summary = published.tier_summary(record)
    assert "reproduced: 1 hold, 0 do not, 1 not judged; robust: 1 hold, 0 do not, 1 not judged" in summary
    assert "published 20" in summary  # the date of publication
    del record["published"]
    assert "published" not in published.tier_summary(record)  # no empty "published )"


def test_only_full_runs_are_published(tmp_path):
    _run(tmp_path, profile_name="quick")
    with pytest.raises(ValueError, match="only `full` runs"):
        publishing.publish("01_ortho_skip", source=tmp_path / "results", dest=tmp_path / "published")
    with pytest.raises(FileNotFoundError, match="make chapter"):
        publishing.publish("05_rebasin_hmc", source=tmp_path / "results", dest=tmp_path / "published")


def test_the_record_says_where_its_numbers_were_computed(tmp_path, monkeypatch):
    dest = tmp_path / "published"
    _run(tmp_path)
    record = published.load("01_ortho_skip", publishing.publish("01_ortho_skip", source=tmp_path / "results",
                                                   executed=tmp_path / "executed", dest=dest).parent)
    computed = record["computed"]
    assert computed["device"].startswith("cpu") and computed["compute_time"].endswith(" s")
    assert computed["code_hash"] == record["provenance"]["code_hash"]
    assert "computed on cpu" in published.tier_summary(record)

    # the same run's pages re-rendered from its cache computed nothing: the account is carried over
    (tmp_path / "executed" / "01_ortho_skip.ipynb").unlink()
    monkeypatch.setenv("SYMLIB_CACHED_ONLY", "1")
    _run(tmp_path / "again")
    rerendered = published.load("01_ortho_skip", publishing.publish("01_ortho_skip", source=tmp_path / "again" / "results",
                                                       executed=tmp_path / "again" / "executed", dest=dest).parent)
    assert rerendered["rendered_from_cache"] and rerendered["computed"] == computed
    # and with nothing published before, publishing a re-render is refused
    with pytest.raises(ValueError, match="re-rendered from the cache"):
        publishing.publish("01_ortho_skip", source=tmp_path / "again" / "results", dest=tmp_path / "elsewhere")


def test_a_paper_run_is_published_as_its_tier_with_its_pieces(tmp_path, monkeypatch):
    """The paper tier (issue 31): published under published/paper/, with how many pieces and device
    minutes its latest complete run took; a full run is not published as paper; records() puts it first."""
    from symlib.book import pieces

    _run(tmp_path, "paper", PROFILES["paper"])
    for seconds, outcome in ((590.0, "budget"), (600.0, "budget"), (130.0, "complete"), (9.0, "rendered")):
        pieces.log_piece("01_ortho_skip", profile="paper", device="cuda (NVIDIA H100 80GB HBM3)", seconds=seconds,
                         outcome=outcome, directory=tmp_path / "results")
    out = publishing.publish("01_ortho_skip", tier="paper", source=tmp_path / "results", executed=tmp_path / "executed",
                      dest=tmp_path / "published" / "paper")
    record = published.load("01_ortho_skip", out.parent, tier="paper")
    run = record["computed"]["pieces"]
    assert record["profile"] == "paper" and run["pieces"] == 3 and run["minutes"] == 22.0
    assert run["stopped_at_budget"] == 2 and run["devices"] == ["cuda (NVIDIA H100 80GB HBM3)"]
    assert "22 minutes of device compute in 3 pieces" in published.tier_summary(record)
    with pytest.raises(ValueError, match="only `full` runs are published as full"):
        publishing.publish("01_ortho_skip", source=tmp_path / "results", dest=tmp_path / "published" / "full")
    with pytest.raises(ValueError, match="tier must be one of"):
        publishing.publish("01_ortho_skip", tier="quick", source=tmp_path / "results")

    monkeypatch.setattr(published, "project_root_or_cwd", lambda: tmp_path)
    assert published.published_dir("paper") == tmp_path / "published" / "paper"
    assert next(iter(published.records("01_ortho_skip").values()))["profile"] == "paper"
    (tmp_path / "published" / "paper" / "01_ortho_skip.json").unlink()
    assert published.records("01_ortho_skip") == {}


def test_a_rerender_of_new_code_takes_its_account_from_the_pieces_file(tmp_path):
    """A re-render whose numbers came from other stage code than the published record's: the
    published account does not describe them; the pieces file's complete run of that code does."""
    from symlib.book import pieces

    def record(stage_hash, rendered=True):
        return {"chapter": "05_rebasin_hmc", "profile": "full", "rendered_from_cache": rendered,
                "provenance": {"code_hash": "nb" + stage_hash, "computed_with": [{"code_hash": stage_hash}]},
                "computed": {"device": "cpu (old)", "commit": "old", "code_hash": "old", "compute_time": "1 s"}}

    path = tmp_path / "results" / "05_rebasin_hmc.json"
    old, new = record("aaaa", rendered=False), record("bbbb")
    with pytest.raises(ValueError, match="neither an earlier published record"):
        publishing._computed(new, old, path)
    for seconds, outcome, code in ((100.0, "complete", "aaaa"), (3600.0, "complete", "bbbb"), (90.0, "rendered", "bbbb")):
        pieces.log_piece("05_rebasin_hmc", profile="full", device="cpu", seconds=seconds, outcome=outcome,
                         directory=tmp_path / "results", code_hash=code)
    got = publishing._computed(new, old, path)
    assert got["compute_time"] == "3600 s" and got["pieces"]["pieces"] == 1 and got["code_hash"] == "nbbbbb"
    assert got["device"] == "cpu" and got["commit"] != "old"
    assert publishing._computed(record("aaaa"), old, path) == old["computed"]      # same code: carried over


def test_a_rerender_after_the_same_code_ran_again_takes_the_newer_run(tmp_path):
    """A record re-rendered from the cache of a second complete run of the same stage code (run in
    another checkout, its cache brought here) takes that run's account, not the replaced record's;
    a plain re-render of the run the account describes keeps it."""
    from symlib.book import pieces

    path = tmp_path / "results" / "06_synthesis.json"
    code = {"code_hash": "nbaaaa", "computed_with": [{"code_hash": "aaaa"}]}
    day = datetime(2026, 12, 6, 7, 54, tzinfo=UTC)
    pieces.log_piece("06_synthesis", profile="full", device="cpu", seconds=213.0, outcome="complete",
                     directory=tmp_path / "results", code_hash="aaaa", started=day)
    first = publishing._computed({"chapter": "06_synthesis", "profile": "full", "rendered_from_cache": True,
                                  "provenance": code}, None, path)
    old = {"chapter": "06_synthesis", "profile": "full", "provenance": code, "computed": first}
    again = {"chapter": "06_synthesis", "profile": "full", "rendered_from_cache": True, "provenance": code}
    pieces.log_piece("06_synthesis", profile="full", device="cpu", seconds=9.0, outcome="rendered",
                     directory=tmp_path / "results", code_hash="aaaa", started=day + timedelta(minutes=5))
    assert publishing._computed(again, old, path) == first                          # a re-render: carried over
    pieces.log_piece("06_synthesis", profile="full", device="cpu", seconds=2870.0, outcome="complete",
                     directory=tmp_path / "results", code_hash="aaaa", started=day + timedelta(hours=9))
    got = publishing._computed(again, old, path)
    assert got["compute_time"] == "2870 s" and got["pieces"]["pieces"] == 1 and got != first


def test_a_rerender_of_a_chapter_whose_stages_declare_their_code_finds_its_pieces(tmp_path):
    """Chapter 5's stages declare their code: its pieces record the compute code hash (one of all
    its stages'), which a re-render's record gives back from its stages' hashes."""
    from symlib.book import pieces

    experiments = ("05_rebasin_hmc-bayes", "05_rebasin_hmc-ensemble", "05_rebasin_hmc-not", "05_rebasin_hmc-vi")
    groups = [{"code_hash": stage_code_hash(experiments[0]), "stages": list(experiments), "entries": 6}]
    record = {"chapter": "05_rebasin_hmc", "profile": "paper", "rendered_from_cache": True,
              "provenance": {"code_hash": "nb", "computed_with": groups}}
    path = tmp_path / "results" / "05_rebasin_hmc.json"
    assert publishing._combined_hash(record) == compute_code_hash("05_rebasin_hmc") != groups[0]["code_hash"]
    pieces.log_piece("05_rebasin_hmc", profile="paper", device="cuda (H100)", seconds=400.0, outcome="budget",
                     directory=tmp_path / "results", code_hash=compute_code_hash("05_rebasin_hmc"))
    pieces.log_piece("05_rebasin_hmc", profile="paper", device="cuda (H100)", seconds=200.0, outcome="complete",
                     directory=tmp_path / "results", code_hash=compute_code_hash("05_rebasin_hmc"))
    got = publishing._computed(record, None, path)
    assert got["pieces"]["pieces"] == 2 and got["compute_time"] == "600 s" and got["device"] == "cuda (H100)"
    other = dict(record, provenance={"code_hash": "nb", "computed_with": [dict(groups[0], code_hash="0" * 16)]})
    with pytest.raises(ValueError, match="neither an earlier published record"):
        publishing._computed(other, None, path)


def test_a_rerender_finds_its_pieces_when_some_stages_cache_nothing(tmp_path):
    """Chapter 4's ``compile``, ``boston`` and ``robust`` stages cache nothing, so a re-render's
    record names only its other stages; its pieces' compute code hash still counts all of them
    (this refused to publish chapter 4's paper run on 2026-11-29). A cached stage's hash other
    than this checkout's is still refused."""
    chapter = "04_constrained_models"
    cached = [f"{chapter}-{s}" for s in ("boston_fits", "prior", "robust_boston_fits", "robust_synth", "synth")]
    assert set(cached) < set(stage_experiments(chapter))        # the case: some stages are in no group
    groups = [{"code_hash": stage_code_hash(cached[0]), "stages": cached, "entries": 108}]
    record = {"chapter": chapter, "profile": "paper", "rendered_from_cache": True,
              "provenance": {"code_hash": "nb", "computed_with": groups}}
    path = tmp_path / "results" / f"{chapter}.json"
    assert publishing._combined_hash(record) == compute_code_hash(chapter)
    for seconds, outcome in ((7800.0, "budget"), (988.0, "complete"), (12.0, "rendered")):
        pieces.log_piece(chapter, profile="paper", device="cpu", seconds=seconds, outcome=outcome,
                         directory=tmp_path / "results", code_hash=compute_code_hash(chapter))
    got = publishing._computed(record, None, path)
    assert got["pieces"]["pieces"] == 2 and got["compute_time"] == "8788 s" and got["device"] == "cpu"
    other = dict(record, provenance={"code_hash": "nb", "computed_with": [dict(groups[0], code_hash="0" * 16)]})
    assert publishing._combined_hash(other) != compute_code_hash(chapter)
    with pytest.raises(ValueError, match="neither an earlier published record"):
        publishing._computed(other, None, path)


def test_a_rerender_keeps_the_compute_account_of_the_record_it_replaces_across_a_proven_equivalence(tmp_path, monkeypatch):
    """A record re-rendered from cache entries that name an older scheme's stage hashes replaces a
    record (rehashed) that names the new ones: the registry of equivalences joins them, so the
    account of where the numbers were computed carries over; without the join it is refused."""
    from symlib.book import equivalence

    registry = tmp_path / "code_equivalences.json"
    monkeypatch.setattr(equivalence, "registry_path", lambda root=None: registry)
    stages = ["04_constrained_models-synth", "04_constrained_models-prior"]
    old = {"provenance": {"computed_with": [{"code_hash": "a" * 16, "stages": stages}]}, "rendered_from_cache": True,
           "chapter": "04_constrained_models", "profile": "paper"}
    previous = {"computed": {"device": "cpu", "compute_time": "60351 s"},
                "provenance": {"computed_with": [{"code_hash": "b" * 16, "stages": stages}]}}
    with pytest.raises(ValueError, match="re-rendered from the cache"):
        publishing._computed(old, previous, tmp_path / "results" / "04_constrained_models.json")
    equivalence.add([(s, "a" * 16, "b" * 16) for s in stages], "test: proven")
    assert publishing._computed(old, previous, tmp_path / "results" / "04_constrained_models.json") == previous["computed"]
    other = dict(old, provenance={"computed_with": [{"code_hash": "a" * 16, "stages": stages[:1]}]})
    with pytest.raises(ValueError):   # other stages: not the same numbers
        publishing._computed(other, previous, tmp_path / "results" / "04_constrained_models.json")


def test_a_rerender_finds_pieces_that_hashed_its_uncached_stages_under_older_code(tmp_path, monkeypatch):
    """The run that computed a re-rendered record's entries hashed its uncached stages as its own
    code did (an older scheme, or before a proven move): the pieces' compute code hash is found
    when the registry joins each such stage's old hash to this checkout's; without the join the
    re-render is refused."""
    from symlib.book import equivalence
    from symlib.book.provenance import combined_code_hash

    registry = tmp_path / "code_equivalences.json"
    monkeypatch.setattr(equivalence, "registry_path", lambda root=None: registry)
    chapter = "04_constrained_models"
    cached = [f"{chapter}-{s}" for s in ("boston_fits", "prior", "robust_boston_fits", "robust_synth", "synth")]
    uncached = sorted(set(stage_experiments(chapter)) - set(cached))
    old = {e: "a" * 16 for e in stage_experiments(chapter)}     # every stage's hash then
    record = {"chapter": chapter, "profile": "paper", "rendered_from_cache": True,
              "provenance": {"code_hash": "nb", "computed_with": [{"code_hash": "a" * 16, "stages": cached}]}}
    path = tmp_path / "results" / f"{chapter}.json"
    pieces.log_piece(chapter, profile="paper", device="cpu", seconds=900.0, outcome="complete",
                     directory=tmp_path / "results", code_hash=combined_code_hash(old))
    with pytest.raises(ValueError, match="neither an earlier published record"):
        publishing._computed(record, None, path)
    equivalence.add([(e, "a" * 16, stage_code_hash(e)) for e in uncached], "test: proven")
    assert publishing._computed(record, None, path)["compute_time"] == "900 s"


def _private_registry(tmp_path, monkeypatch):
    """The registry of equivalences, empty, in ``tmp_path`` for this test: (the module, its file)."""
    from symlib.book import equivalence

    registry = tmp_path / "code_equivalences.json"
    monkeypatch.setattr(equivalence, "registry_path", lambda root=None: registry)
    return equivalence, registry


def _chapter4_prior_older():
    """A re-rendered chapter 4 record whose ``prior`` entry names an older stage hash ("a" * 16) and
    whose other entries this checkout's: (chapter, this checkout's stage hashes, the prior stage,
    the other cached stages, the record)."""
    chapter = "04_constrained_models"
    now = {e: stage_code_hash(e) for e in stage_experiments(chapter)}
    prior, rest = f"{chapter}-prior", [f"{chapter}-{s}" for s in ("boston_fits", "robust_synth", "synth")]
    record = {"chapter": chapter, "profile": "full", "rendered_from_cache": True,
              "provenance": {"code_hash": "nb", "computed_with": [
                  {"code_hash": "a" * 16, "stages": [prior]}, {"code_hash": now[rest[0]], "stages": rest}]}}
    return chapter, now, prior, rest, record


def test_a_rerender_of_a_run_whose_entries_span_proven_equivalent_code_takes_its_own_pieces(tmp_path, monkeypatch):
    """A run in pieces computed one cached stage under older stage code and finished under this
    checkout's, the two joined by the registry: its record names the older hash for that stage
    while its complete piece recorded this checkout's compute code hash. The re-render takes
    that run's account, not the replaced record's (of an earlier run of equivalent code); without
    the join the older entry is other code, and the replaced record's account is refused too."""
    equivalence, _ = _private_registry(tmp_path, monkeypatch)
    chapter, now, prior, rest, record = _chapter4_prior_older()
    previous = {"computed": {"device": "cpu", "compute_time": "10130 s",
                             "pieces": {"pieces": 2, "last": "2026-11-29T19:23:56+00:00"}},
                "provenance": {"computed_with": [{"code_hash": "b" * 16, "stages": [prior, *rest]}]}}
    path = tmp_path / "results" / f"{chapter}.json"
    day = datetime(2026, 12, 6, 16, 53, tzinfo=UTC)
    pieces.log_piece(chapter, profile="full", device="cpu", seconds=5345.0, outcome="failed",
                     directory=tmp_path / "results", code_hash=compute_code_hash(chapter), started=day)
    pieces.log_piece(chapter, profile="full", device="cpu", seconds=6424.0, outcome="complete",
                     directory=tmp_path / "results", code_hash=compute_code_hash(chapter),
                     started=day + timedelta(hours=9))
    with pytest.raises(ValueError, match="neither an earlier published record"):
        publishing._computed(record, previous, path)
    equivalence.add([(e, h, now[e]) for e in (prior, *rest) for h in ("a" * 16, "b" * 16) if h != now[e]], "test: proven")
    got = publishing._computed(record, previous, path)
    assert got != previous["computed"] and got["compute_time"] == "11769 s" and got["pieces"]["pieces"] == 2


def test_a_runs_pieces_under_proven_equivalent_code_are_counted_in_its_account(tmp_path, monkeypatch):
    """The pieces that computed a run's older entry, under stage code the registry joins to this
    checkout's, recorded another compute code hash than its complete piece: they are part of the
    run (its record keeps what they computed), not abandoned; without the join they are."""
    from symlib.book.provenance import combined_code_hash

    equivalence, registry = _private_registry(tmp_path, monkeypatch)
    chapter, now, prior, rest, record = _chapter4_prior_older()
    path = tmp_path / "results" / f"{chapter}.json"
    day = datetime(2026, 12, 6, 10, 0, tzinfo=UTC)
    older = combined_code_hash({**now, prior: "a" * 16})
    for hours, seconds, outcome, code in ((0, 3000.0, "budget", older), (4, 2000.0, "failed", older),
                                          (8, 5345.0, "failed", compute_code_hash(chapter)),
                                          (12, 6424.0, "complete", compute_code_hash(chapter))):
        pieces.log_piece(chapter, profile="full", device="cpu", seconds=seconds, outcome=outcome,
                         directory=tmp_path / "results", code_hash=code, started=day + timedelta(hours=hours))
    equivalence.add([(prior, "a" * 16, now[prior])], "test: proven")
    got = publishing._computed(record, None, path)
    assert got["pieces"]["pieces"] == 4 and got["pieces"]["abandoned"] == 0 and got["compute_time"] == "16769 s"
    assert got["pieces"]["first"] == day.isoformat(timespec="seconds")
    fresh = publishing._computed({**record, "rendered_from_cache": False, "device": "cpu"}, None, path)
    assert fresh["pieces"] == got["pieces"]                          # a record computed in place counts them too
    # re-rendered over its own earlier record, whose account called them abandoned: counted afresh,
    # unless that account holds pieces the log here lacks
    last = (day + timedelta(hours=12)).isoformat(timespec="seconds")
    stale = {"computed": {"device": "cpu", "compute_time": "11769 s",
                          "pieces": {"pieces": 2, "abandoned": 2, "last": last}}, "provenance": record["provenance"]}
    assert publishing._computed(record, stale, path) == got
    more = {**stale, "computed": {**stale["computed"], "pieces": {"pieces": 9, "abandoned": 0, "last": last}}}
    assert publishing._computed(record, more, path) == more["computed"]
    registry.unlink()
    unjoined = {**record, "provenance": {"code_hash": "nb", "computed_with": [
        {"code_hash": now[prior], "stages": [prior]}, {"code_hash": now[rest[0]], "stages": rest}]}}
    alone = publishing._computed(unjoined, None, path)
    assert alone["pieces"]["pieces"] == 2 and alone["pieces"]["abandoned"] == 2


def test_pieces_that_logged_their_stage_hashes_are_matched_stage_by_stage(tmp_path, monkeypatch):
    """A piece that recorded each stage's code hash is part of the run when every stage's is the
    record's or joined to it by the registry, whatever its combined hash (here no combination
    :func:`publishing._combined_hashes` tries covers it); one stage of other code, and it is
    abandoned."""
    equivalence, _ = _private_registry(tmp_path, monkeypatch)
    chapter, now, prior, rest, record = _chapter4_prior_older()
    monkeypatch.setattr(publishing, "_combined_hashes", lambda record, limit=4096: set())
    path = tmp_path / "results" / f"{chapter}.json"
    day = datetime(2026, 12, 7, 8, 0, tzinfo=UTC)
    older, other = {**now, prior: "b" * 16}, {**now, rest[0]: "e" * 16}
    for hours, seconds, outcome, stages in ((0, 3000.0, "budget", older), (1, 200.0, "failed", other),
                                            (4, 2000.0, "complete", now)):
        pieces.log_piece(chapter, profile="full", device="cpu", seconds=seconds, outcome=outcome,
                         directory=tmp_path / "results", code_hash=combined_code_hash(stages),
                         started=day + timedelta(hours=hours), stage_hashes=stages)
    alone = publishing._computed({**record, "rendered_from_cache": False, "device": "cpu"}, None, path)
    assert alone["pieces"]["pieces"] == 1 and alone["pieces"]["abandoned"] == 2
    equivalence.add([(prior, h * 16, now[prior]) for h in "ab"], "test: proven")
    got = publishing._computed({**record, "rendered_from_cache": False, "device": "cpu"}, None, path)
    assert got["pieces"]["pieces"] == 2 and got["pieces"]["abandoned"] == 1 and got["pieces"]["seconds"] == 5000.0


def test_a_paper_run_in_progress_is_recorded_and_summarised(tmp_path, monkeypatch, capsys):
    from symlib.book import pieces

    monkeypatch.setattr(published, "project_root_or_cwd", lambda: tmp_path)
    assert published.progress_summary("05_rebasin_hmc") is None
    results = tmp_path / "results"
    pieces.log_piece("05_rebasin_hmc", profile="paper", device="cuda (H100)", seconds=240, outcome="budget",
                     directory=results, code_hash=compute_code_hash("05_rebasin_hmc"), note="chapter 5's HMC: stopped at its time budget after "
                     "piece 1, 727 transitions done; run again to continue from its checkpoint",
                     started=datetime(2026, 11, 27, 18, 0, tzinfo=UTC))
    src = pieces.pieces_path("05_rebasin_hmc", results)
    with pytest.raises(ValueError, match="no piece of the `full` profile"):
        publishing.record_progress("05_rebasin_hmc", src, tier="full")
    out = publishing.record_progress("05_rebasin_hmc", src)
    assert out == tmp_path / "published" / "paper" / "progress" / "05_rebasin_hmc.json"
    line = published.progress_summary("05_rebasin_hmc")
    assert line.startswith("in progress: 1 piece, 4 minutes of device compute on cuda (H100) (2026-11-27)")
    assert line.endswith("latest: chapter 5's HMC: stopped at its time budget after piece 1, 727 "
                         "transitions done")
    # each sampler's length and mixing so far, where the chapter's progress reader recorded them
    published.chains_path("05_rebasin_hmc").write_text(json.dumps([
        {"run": "main", "chains": 1, "transitions": 1335, "total": 10600, "draws_per_chain": 73,
         "draws_target": 1000, "rhat": 1.1053, "bulk_ess": 10.6, "quantity": "the logits at 20 test images"},
        {"run": "fixed step", "chains": 4, "transitions": 5, "total": 10600, "draws_per_chain": 0,
         "draws_target": 1000, "rhat": None, "bulk_ess": None}]))
    assert published.progress_summary("05_rebasin_hmc") == line + (
        "; main run: 1,335 of 10,600 transitions, 1 chain, 73 of 1,000 draws kept, split R-hat of the logits at "
        "20 test images 1.105, bulk ESS 11 so far; fixed step run: 5 of 10,600 transitions, 4 chains, 0 of 1,000 "
        "draws kept")
    # a run of older code is shown as such: the next piece starts it again
    pieces.log_piece("05_rebasin_hmc", profile="paper", device="cuda (H100)", seconds=60, outcome="budget",
                     directory=results, code_hash="older", note="chapter 5's HMC: 9 transitions done")
    publishing.record_progress("05_rebasin_hmc", src)
    older = published.progress_summary("05_rebasin_hmc")
    assert older.startswith("in progress: 1 piece, 1 minute of device compute") and older.endswith(
        "from an older version of the code: its checkpoints are not continued, the next piece starts the run again")
    # `published progress` (what gpu_piece.sh keep runs) warns when two pieces lost the same unit
    lost = f"{pieces.INTERRUPTED} 420 s + 60 s, raising KeyboardInterrupt; bayes: 0 of 4 items cached"
    for _ in range(2):
        pieces.log_piece("05_rebasin_hmc", profile="paper", device="cuda (H100)", seconds=480, outcome="budget",
                         directory=results, code_hash="older", note=lost)
    records.main(["progress", "05_rebasin_hmc", str(src)])
    err = capsys.readouterr().err
    assert err.startswith("[symlib] WARNING 05_rebasin_hmc: the last two pieces were both stopped inside a unit")
    pieces.log_piece("05_rebasin_hmc", profile="paper", device="cuda (H100)", seconds=60, outcome="complete",
                     directory=results, code_hash="h")
    records.main(["progress", "05_rebasin_hmc", str(src)])
    assert capsys.readouterr().err == ""
    # complete, not yet published: the page says so and how to publish it, not nothing
    done = published.progress_summary("05_rebasin_hmc")
    assert done.startswith("computed, not yet published: 1 piece, 1 minute") and done.endswith(
        "`make publish CHAPTER=05_rebasin_hmc TIER=paper`")
    assert published.load("05_rebasin_hmc", tier="paper") is None   # a progress file is not a record


def test_publishing_a_completed_run_retires_its_progress_file(tmp_path, monkeypatch):
    """A run computed in pieces is listed as "computed, not yet published" until its record is
    published; publishing it removes the progress file (and its samplers' file), which would
    otherwise need deleting by hand; a run still in progress keeps its file."""
    from symlib.book import pieces

    monkeypatch.setattr(published, "project_root_or_cwd", lambda: tmp_path)
    _run(tmp_path, "paper", PROFILES["paper"])
    results = tmp_path / "results"
    for hours, outcome in ((0, "budget"), (2, "complete")):
        pieces.log_piece("01_ortho_skip", profile="paper", device="cpu", seconds=3600.0, outcome=outcome,
                         directory=results, started=datetime(2026, 12, 7, 4 + hours, tzinfo=UTC))
    src = pieces.pieces_path("01_ortho_skip", results)
    publishing.record_progress("01_ortho_skip", src)
    published.chains_path("01_ortho_skip").write_text("[]")
    line = published.progress_summary("01_ortho_skip")
    assert line.startswith("computed, not yet published: 2 pieces, 120 minutes")
    assert "(2026-12-07)" in line
    publishing.publish("01_ortho_skip", tier="paper", source=results, executed=tmp_path / "executed")
    assert not published.progress_path("01_ortho_skip").exists()
    assert not published.chains_path("01_ortho_skip").exists()
    assert published.progress_summary("01_ortho_skip") is None
    # a stale progress file of that same run, put back: the published record already speaks for it
    publishing.record_progress("01_ortho_skip", src)
    assert published.progress_summary("01_ortho_skip") is None
    # a new run in progress beside a re-render of the published one keeps its file
    pieces.log_piece("01_ortho_skip", profile="paper", device="cpu", seconds=600.0, outcome="budget",
                     directory=results, started=datetime(2026, 12, 8, tzinfo=UTC))
    publishing.record_progress("01_ortho_skip", src)
    publishing.publish("01_ortho_skip", tier="paper", source=results, executed=tmp_path / "executed")
    assert published.progress_path("01_ortho_skip").is_file()
    assert published.progress_summary("01_ortho_skip").startswith("in progress: 1 piece, 10 minutes")


def test_publishing_retires_a_progress_file_recorded_before_the_runs_last_piece(tmp_path, monkeypatch):
    """A progress file recorded mid-run (before the piece that completed it) still reads "in
    progress"; the published record accounts for every piece it lists, so publishing removes it."""
    from symlib.book import pieces

    monkeypatch.setattr(published, "project_root_or_cwd", lambda: tmp_path)
    _run(tmp_path, "paper", PROFILES["paper"])
    results = tmp_path / "results"
    pieces.log_piece("01_ortho_skip", profile="paper", device="cpu", seconds=3600.0, outcome="budget",
                     directory=results, started=datetime(2026, 12, 7, 4, tzinfo=UTC))
    publishing.record_progress("01_ortho_skip", pieces.pieces_path("01_ortho_skip", results))
    pieces.log_piece("01_ortho_skip", profile="paper", device="cpu", seconds=3600.0, outcome="complete",
                     directory=results, started=datetime(2026, 12, 7, 6, tzinfo=UTC))
    assert published.progress_summary("01_ortho_skip").startswith("in progress: 1 piece")
    publishing.publish("01_ortho_skip", tier="paper", source=results, executed=tmp_path / "executed")
    assert not published.progress_path("01_ortho_skip").exists()
    assert published.load("01_ortho_skip", tier="paper")["computed"]["pieces"]["pieces"] == 2


def test_a_run_whose_state_was_lost_is_accounted_for_and_starts_again(tmp_path, monkeypatch):
    """`published lost`: the progress of a run whose checkpoints are gone moves to
    <chapter>.lost.json; the book says so, with how far it got, and that the next piece starts again."""
    from symlib.book import pieces

    monkeypatch.setattr(published, "project_root_or_cwd", lambda: tmp_path)
    with pytest.raises(ValueError, match="no `paper` run of 05_rebasin_hmc in progress"):
        publishing.record_lost("05_rebasin_hmc", "machine replaced")
    results = tmp_path / "results"
    code = compute_code_hash("05_rebasin_hmc")
    for i, seconds in enumerate((470.2, 170.2)):
        pieces.log_piece("05_rebasin_hmc", profile="paper", device="cuda (NVIDIA H200)", seconds=seconds,
                         outcome="budget", directory=results, code_hash=code, note=f"piece {i + 1}",
                         started=datetime(2026, 11, 29, 22, 17 + 8 * i, tzinfo=UTC))
    src = pieces.pieces_path("05_rebasin_hmc", results)
    publishing.record_progress("05_rebasin_hmc", src)
    published.chains_path("05_rebasin_hmc").write_text(json.dumps([
        {"run": "main", "chains": 1, "transitions": 2751, "total": 10600, "draws_per_chain": 215,
         "draws_target": 1000, "rhat": 1.035, "bulk_ess": 84.2}]))
    with pytest.raises(ValueError, match="say why"):
        publishing.record_lost("05_rebasin_hmc", "  ")
    out = publishing.record_lost("05_rebasin_hmc", "its untracked state went with the build machine",
                          when=datetime(2026, 12, 1, tzinfo=UTC))
    assert out == tmp_path / "published" / "paper" / "progress" / "05_rebasin_hmc.lost.json"
    assert not published.progress_path("05_rebasin_hmc").exists() and not published.chains_path("05_rebasin_hmc").exists()
    (lost,) = json.loads(out.read_text())
    assert lost["pieces"] == 2 and lost["seconds"] == pytest.approx(640.4) and lost["chains"][0]["transitions"] == 2751
    lost_clause = ("the state of an earlier run was lost and is not counted: 2026-11-29: 2 pieces, 10.7 minutes "
                   "of device compute on cuda (NVIDIA H200), main run at 2,751 of 10,600 transitions (its "
                   "untracked state went with the build machine)")
    assert published.progress_summary("05_rebasin_hmc") == f"not running: {lost_clause}; the next piece starts the run again"
    # the run starts again: its progress is shown, the lost one after it
    src.unlink()
    pieces.log_piece("05_rebasin_hmc", profile="paper", device="cuda (NVIDIA H200)", seconds=300, outcome="budget",
                     directory=results, code_hash=code, note="piece 1 again",
                     started=datetime(2026, 12, 2, tzinfo=UTC))
    publishing.record_progress("05_rebasin_hmc", src)
    line = published.progress_summary("05_rebasin_hmc")
    assert line.startswith("in progress: 1 piece, 5 minutes of device compute") and line.endswith(f"; before it, {lost_clause}")
    publishing.record_lost("05_rebasin_hmc", "lost again")
    assert published.progress_summary("05_rebasin_hmc").startswith("not running: the state of 2 earlier runs was lost")
    # once a run completes, it waits to be published (and then its published record speaks)
    pieces.log_piece("05_rebasin_hmc", profile="paper", device="cuda (NVIDIA H200)", seconds=60, outcome="complete",
                     directory=results, code_hash=code)
    publishing.record_progress("05_rebasin_hmc", src)
    assert published.progress_summary("05_rebasin_hmc").startswith(
        "computed, not yet published: 2 pieces, 6 minutes of device compute on cuda (NVIDIA H200) (2026-12-02 to ")
    with pytest.raises(SystemExit, match="no `paper` run"):
        records.main(["lost", "05_rebasin_hmc", "--why", "x"])


def test_rehash_names_an_unparsable_record(tmp_path):
    """Before: `published rehash` on an unparsable record gave a raw traceback without the file."""
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "01_ortho_skip.json").write_text('{"chapter": <<<<<<< HEAD')
    with pytest.raises(ValueError, match=r"published record .*01_ortho_skip\.json is not valid JSON"):
        publishing.rehash(dest_root=tmp_path, tiers=["full"])


def test_a_run_made_from_uncommitted_code_is_not_published(tmp_path, monkeypatch):
    """`records publish` refuses a results file whose commit ends in +dirty: no commit holds the
    code that made it. The same file made from a clean commit is published."""
    _run(tmp_path)
    path = tmp_path / "results" / "01_ortho_skip.json"
    record = json.loads(path.read_text())
    monkeypatch.setenv("SYMLIB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr(publishing, "published_dir", lambda tier="full": tmp_path / "published" / tier)
    monkeypatch.setattr(publishing, "executed_dir", lambda: tmp_path / "executed")
    for commit, refused in (("0123abcd+dirty", True), ("0123abcd", False)):
        record["provenance"]["commit"] = commit
        path.write_text(json.dumps(record))
        if refused:
            with pytest.raises(SystemExit, match=r"uncommitted changes .*0123abcd\+dirty"):
                records.main(["publish", "--tier", "full", "01_ortho_skip"])
            assert not (tmp_path / "published" / "full" / "01_ortho_skip.json").exists()
        else:
            records.main(["publish", "--tier", "full", "01_ortho_skip"])
            assert published.load("01_ortho_skip", tmp_path / "published" / "full")["provenance"]["commit"] == commit


def test_pieces_of_code_older_for_every_stage_are_found_when_the_stages_move_together(tmp_path, monkeypatch):
    """Chapter 4's stages share one module set, so one edit moves every stage's hash: a piece
    run before a proven-equivalent edit recorded the compute code hash of every stage at its older
    hash. With several hashes joined per stage, the stage-by-stage combinations exceed their
    limit before reaching it; the stages that share a hash are ranged together, and it is found."""
    from symlib.book.provenance import combined_code_hash

    equivalence, _ = _private_registry(tmp_path, monkeypatch)
    chapter = "04_constrained_models"
    experiments = stage_experiments(chapter)
    now = {e: stage_code_hash(e) for e in experiments}
    assert len(set(now.values())) == 1 and len(experiments) >= 8      # one module set, one hash
    equivalence.add([(e, h * 16, now[e]) for e in experiments for h in "abcd"], "test: proven")
    record = {"chapter": chapter, "profile": "full", "rendered_from_cache": True,
              "provenance": {"code_hash": "nb", "computed_with": [{"code_hash": now[experiments[0]],
                                                                   "stages": experiments}]}}
    path = tmp_path / "results" / f"{chapter}.json"
    day = datetime(2026, 12, 6, 10, 0, tzinfo=UTC)
    older = combined_code_hash(dict.fromkeys(experiments, "c" * 16))
    for hours, seconds, outcome, code in ((0, 3000.0, "budget", older),
                                          (8, 6424.0, "complete", compute_code_hash(chapter))):
        pieces.log_piece(chapter, profile="full", device="cpu", seconds=seconds, outcome=outcome,
                         directory=tmp_path / "results", code_hash=code, started=day + timedelta(hours=hours))
    assert 5 ** len(experiments) > 4096                               # beyond the stage-by-stage combinations
    got = publishing._computed(record, None, path)
    assert got["pieces"]["pieces"] == 2 and got["pieces"]["abandoned"] == 0 and got["compute_time"] == "9424 s"
